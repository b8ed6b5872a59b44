"""Lowering rules of row ops: reductions, softmax, cumsum, norms and top-k. Each moves its axis
last (one copy when needed), runs a [rows, n] kernel, and moves the result back."""
from __future__ import annotations

import math
from typing import Any, Mapping

from ..graph import Node
from ..kernels import kernel
from .emit import EmitContext
from .program import Buf
from .registry import lowering

_REDUCE_OP = {"sum": 0, "mean": 0, "max": 1, "min": 2, "prod": 3, "argmax": 4}
_LIMITS = {"f32": ("inf_(0x80000000u)", "inf_(0u)"),
           "i32": ("(-2147483647i - 1i)", "2147483647i"), "u32": ("0u", "0xffffffffu")}


def rows_per_workgroup(n: int) -> int:
    """Rows a ROW_REDUCE kernel handles per 256-thread workgroup: 8 (32 threads each) for
    rows of up to 1024 elements, else 1."""
    return 8 if n <= 1024 else 1


@lowering("sum", "mean", "max", "min", "prod", "argmax")
def _reduce(L: EmitContext, node: Node) -> Buf:
    x = L.graph.nodes[node.inputs[0]]
    rank = len(L.shape(x.id))
    if node.op == "argmax":
        axes: tuple[int, ...] = (node.attrs["axis"] % max(rank, 1),)
    else:
        axes = tuple(range(rank)) if node.attrs["axes"] is None else \
            tuple(sorted(a % rank for a in node.attrs["axes"]))
    buf, rows, n, _ = L.rows_last(x.id, axes)
    acc = "f32" if x.dtype.is_float else x.dtype.wgsl
    out_t = "i32" if node.op == "argmax" else L.T(node.dtype)
    scale = "vals[0] * p.scale" if acc == "f32" else "vals[0]"
    lo, hi = _LIMITS[acc]
    f = acc == "f32"
    k = kernel("reduce/reduce", T=L.T(x.dtype), OUT=out_t, ACC=acc, LOWEST=lo, HIGHEST=hi,
               SCALE=scale, MAX="fmax_" if f else "max", MIN="fmin_" if f else "min",
               ISNAN="isnan_(v)" if f else "false")
    out = L.temp(L.shape(node.id), node.dtype)
    L.emit(k, {"x": buf, "out": out},
           {"rows": rows, "n": n, "x_off": 0,
            "scale": (1.0 / n if n else float("nan")) if node.op == "mean" else 1.0},
           L.grid(rows, 1), {"OP": _REDUCE_OP[node.op]}, name=f"reduce[{node.op}]")
    return out


def _row_op(L: EmitContext, node: Node, shader: str, overrides: Mapping[str, Any],
            params: Mapping[str, Any] | None = None, extra: Mapping[str, Buf] | None = None,
            one_thread_per_row: bool = False) -> Buf:
    """Run a [rows, n] kernel over node.attrs['axis'] (moved last and back when needed):
    one thread per row, or RPW rows per 256-thread workgroup (ROW_REDUCE kernels)."""
    shape = L.shape(node.id)
    axis = node.attrs.get("axis", -1) % len(shape)
    buf, rows, n, perm = L.rows_last(node.inputs[0], (axis,))
    out = L.temp(shape, node.dtype)
    k = kernel(shader, T=L.T(node.dtype), ACC="f32" if node.dtype.is_float else
               node.dtype.wgsl)
    if one_thread_per_row:
        grid, overrides = L.grid(rows), dict(overrides)
    else:
        rpw = rows_per_workgroup(n)
        grid, overrides = L.grid(-(-rows // rpw), 1), {**overrides, "RPW": rpw}
    L.emit(k, {"x": buf, **(extra or {}), "out": out}, {"rows": rows, "n": n, **(params or {})},
           grid, overrides, name=node.op)
    return L.unpermute(out, perm, tuple(shape[a] for a in perm), node.dtype)


@lowering("softmax", "log_softmax")
def _softmax(L: EmitContext, node: Node) -> Buf:
    return _row_op(L, node, "reduce/softmax", {"LOG": node.op == "log_softmax"},
                   params={"per_batch": 1, "lq": 1, "q_off": 0, "scale": 1.0},
                   extra={"mask": L.dummy(0)})


@lowering("cumsum")
def _cumsum(L: EmitContext, node: Node) -> Buf:
    return _row_op(L, node, "scan/cumsum", {}, one_thread_per_row=True)


@lowering("layer_norm", "rms_norm")
def _norm(L: EmitContext, node: Node) -> Buf:
    shape = L.shape(node.id)
    residual = L.fusions.residuals.get(node.id)
    x, r = (L.buf(i) for i in residual) if residual else (L.buf(node.inputs[0]), L.dummy(0))
    wb = [L.buf(i) for i in node.inputs[1:]]
    w = wb[0] if len(wb) > 0 else L.dummy(1)
    b = wb[1] if len(wb) > 1 else L.dummy(2)
    out = L.temp(shape, node.dtype)
    rows, n = math.prod(shape[:-1]), shape[-1]
    rpw = rows_per_workgroup(n)
    L.emit(kernel("norm/layer_norm", T=L.T(node.dtype)),
           {"x": x, "r": r, "w": w, "b": b, "out": out},
           {"rows": rows, "n": n, "eps": node.attrs["eps"]}, L.grid(-(-rows // rpw), 1),
           {"RMS": node.op == "rms_norm", "HAS_W": len(wb) > 0, "HAS_B": len(wb) > 1,
            "HAS_RES": residual is not None, "RPW": rpw},
           name=f"{'add+' if residual else ''}{node.op}")
    return out


@lowering("argtopk")
def _argtopk(L: EmitContext, node: Node) -> Buf:
    shape = L.shape(node.id)
    axis = node.attrs["axis"] % len(shape)
    x = L.graph.nodes[node.inputs[0]]
    buf, rows, n, perm = L.rows_last(x.id, (axis,))
    out = L.temp(shape, node.dtype)
    L.emit(kernel("index/topk", T=L.T(x.dtype)), {"x": buf, "out": out},
           {"rows": rows, "n": n, "k": node.attrs["k"]}, L.grid(rows, 1), name="argtopk")
    return L.unpermute(out, perm, tuple(shape[a] for a in perm), node.dtype)
