"""Lowering rules of indexing ops: gather (embedding lookups) and take_along_axis."""
from __future__ import annotations

import math

from ..graph import Node
from ..kernels import kernel
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


@lowering("gather", "take_along_axis")
def _gather(L: EmitContext, node: Node) -> Buf:
    xs, ids = L.shape(node.inputs[0]), L.shape(node.inputs[1])
    axis = node.attrs["axis"] % len(xs)
    along = node.op == "take_along_axis"
    outer, inner, d = math.prod(xs[:axis]), math.prod(xs[axis + 1:]), xs[axis]
    nj = ids[axis] if along else math.prod(ids)
    out = L.temp(L.shape(node.id), node.dtype)
    total = outer * nj * inner
    L.emit(kernel("index/gather", T=L.T(node.dtype)),
           {"x": L.buf(node.inputs[0]), "idx": L.buf(node.inputs[1]), "out": out},
           {"total": total, "nj": nj, "inner": inner, "d": d, "x_off": 0}, L.grid(total),
           {"TAKE_ALONG": along}, name=node.op)
    return out
