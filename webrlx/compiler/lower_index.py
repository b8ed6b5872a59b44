"""Lowering rules of indexing ops: gather (embedding lookups) and take_along_axis."""
from __future__ import annotations

import math

from ..codegen import Expr
from ..graph import Node
from ..kernels import kernel
from ..shape import strides_of
from . import split
from .emit import EmitContext
from .program import Buf
from .registry import lowering


@lowering("scatter_set")
def _scatter_set(L: EmitContext, node: Node) -> Buf:
    """In place: the node's value is the target buffer, written where the indices say."""
    target = L.buf(node.inputs[0])
    m = L.shape(node.inputs[1])[0]
    L.emit(kernel("index/scatter_set", T=L.T(node.dtype)),
           {"idx": L.buf(node.inputs[1]), "values": L.buf(node.inputs[2]), "dst": target},
           {"m": m, "n": L.shape(node.id)[0]}, L.grid(m), name="scatter_set")
    return target


@lowering("scatter_add")
def _scatter_add(L: EmitContext, node: Node) -> Buf:
    """out = a copy of the target, then the values added at their rows (atomic adds)."""
    shape = L.shape(node.id)
    out = L.temp(shape, node.dtype)
    L.strided(Expr("load", (0,), node.dtype),
              [(L.buf(node.inputs[0]), node.dtype, 0, strides_of(shape))], out, node.dtype, 0,
              strides_of(shape), shape, "scatter_add")
    m, rows = L.shape(node.inputs[1])[0], math.prod(shape[1:])
    L.emit(kernel("index/scatter_add"),
           {"idx": L.buf(node.inputs[1]), "values": L.buf(node.inputs[2]), "out": out},
           {"m": m, "n": shape[0], "R": rows}, L.grid(m * rows), name="scatter_add")
    return out


@lowering("gather", "take_along_axis")
def _gather(L: EmitContext, node: Node) -> Buf:
    xs, ids = L.shape(node.inputs[0]), L.shape(node.inputs[1])
    axis = node.attrs["axis"] % len(xs)
    along = node.op == "take_along_axis"
    outer, inner, d = math.prod(xs[:axis]), math.prod(xs[axis + 1:]), xs[axis]
    nj = ids[axis] if along else math.prod(ids)
    out = L.temp(L.shape(node.id), node.dtype)
    x, idx = L.buf(node.inputs[0]), L.buf(node.inputs[1])
    k = kernel("index/gather", T=L.T(node.dtype))
    whole = {"x_off": 0, "k_lo": 0, "d_all": d, "idx_off": 0, "out_off": 0}
    if outer != 1 or not L.over_limit(x, idx, out):   # (outer > 1: the check names it)
        total = outer * nj * inner
        L.emit(k, {"x": x, "idx": idx, "out": out},
               {"total": total, "nj": nj, "inner": inner, "d": d, **whole}, L.grid(total),
               {"TAKE_ALONG": along}, name=node.op)
        return out
    # over the binding limit (split.py): windows of the table's rows x ranges of the ids
    isz = L.itemsize(node.dtype)
    tables = split.row_ranges(d, [inner * isz], L.limit, L.align, exact=False) \
        if L.over_limit(x) else [(0, d)]
    id_ranges = split.row_ranges(nj, [4, inner * isz], L.limit, L.align, exact=False) \
        if L.over_limit(idx, out) else [(0, nj)]
    for j0, j1 in id_ranges or [(0, nj)]:
        for v0, v1 in tables or [(0, d)]:
            wins, offs = L.place({"x": ("x_off", x, v0 * inner, v1 * inner, isz),
                                  "idx": ("idx_off", idx, j0, j1, 4),
                                  "out": ("out_off", out, j0 * inner, j1 * inner, isz)})
            total = (j1 - j0) * inner
            L.emit(k, {"x": x, "idx": idx, "out": out},
                   {"total": total, "nj": j1 - j0, "inner": inner, "d": v1 - v0, "k_lo": v0,
                    "d_all": d, **offs}, L.grid(total), {"TAKE_ALONG": along}, name=node.op,
                   windows=wins)
    return out
