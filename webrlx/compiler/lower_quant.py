"""Lowering rules of quantized ops (GGUF blocks dequantized inside the kernels): qmatmul as a
split-K GEMV for decode rows or a block-tiled matmul for prefill, and qgather."""
from __future__ import annotations

import math

from .. import quant
from ..graph import Node
from ..kernels import kernel
from .emit import EmitContext
from .lower_matmul import BIG_GRID
from .program import Buf, Variant
from .registry import lowering

GEMV_ROWS = 4       # up to this many rows: bandwidth-bound, split K across threads
GEMV_RPW = 8        # weight rows per GEMV workgroup (RPW in quant/qgemv.wgsl)


@lowering("qmatmul")
def _qmatmul(L: EmitContext, node: Node) -> Buf:
    x_id, w_id = node.inputs[0], node.inputs[1]
    fmt, n, k = node.attrs["format"], node.attrs["n"], node.attrs["k"]
    m = math.prod(L.shape(x_id)[:-1])
    out = L.temp(L.shape(node.id), node.dtype)
    has_bias = len(node.inputs) == 3
    bindings = {"x": L.buf(x_id), "w": L.buf(w_id),
                "bias": L.buf(node.inputs[2]) if has_bias else L.dummy(0), "out": out}
    params = {"M": m, "N": n, "K": k, "nw": quant.nwords(fmt, n, k)}
    overrides = {"Q8_0": fmt == "q8_0", "HAS_BIAS": has_bias}
    t = L.T(L.dtype(x_id))
    if m <= GEMV_ROWS:
        L.emit(kernel("quant/qgemv", T=t), bindings, params, (-(-n // GEMV_RPW), 1, 1),
               {**overrides, "ROWS": m}, name=f"qgemv[{fmt}]")
    else:       # 128x128 or 64x64 tiles (quant/qmatmul_tiled.wgsl's R = 2 or 1)
        tiles = {r: Variant.of(f"qmatmul_{64 * r}", kernel("quant/qmatmul_tiled", T=t, R=str(r)),
                               (-(-n // (64 * r)), -(-m // (64 * r)), 1), overrides)
                 for r in (2, 1)}
        first = 2 if -(-m // 128) * -(-n // 128) >= BIG_GRID else 1
        pick, other = tiles[first], tiles[3 - first]
        L.emit(kernel("quant/qmatmul_tiled", T=t, R=str(first)), bindings, params, pick.grid,
               overrides, name=pick.name, variants=[other],
               tune_key=f"qmatmul {fmt}/{t} {m}x{n}x{k}")
    return out


@lowering("qgather")
def _qgather(L: EmitContext, node: Node) -> Buf:
    w_id, ids_id = node.inputs
    fmt, n, k = node.attrs["format"], node.attrs["n"], node.attrs["k"]
    units = math.prod(L.shape(ids_id)) * k // 8
    out = L.temp(L.shape(node.id), node.dtype)
    L.emit(kernel("quant/qgather"), {"w": L.buf(w_id), "ids": L.buf(ids_id), "out": out},
           {"units": units, "N": n, "K": k, "nw": quant.nwords(fmt, n, k)}, L.grid(units),
           {"Q8_0": fmt == "q8_0"}, name=f"qgather[{fmt}]")
    return out
