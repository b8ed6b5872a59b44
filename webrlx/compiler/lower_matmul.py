"""Lowering rule of matmul (batched, broadcast, with fused bias + activation epilogues), and
`emit_matmul`, which picks GEMV, register-tiled vec4 (autotuned) or scalar tiled kernels by
shape; attention's two-matmul form uses it too."""
from __future__ import annotations

import math

from .. import dtype as dt
from ..activations import ACTIVATIONS
from ..graph import Node
from ..kernels import kernel
from ..shape import strides_of
from .emit import EmitContext
from .program import Buf, Variant
from .registry import lowering

BIG_GRID = 128   # 128x128 tiles only when they still give this many workgroups
GEMV_ROWS = 4    # up to this many rows: bandwidth-bound, split K across threads


@lowering("matmul")
def _matmul(L: EmitContext, node: Node) -> Buf:
    a_id, b_id = node.inputs[0], node.inputs[1]
    a_shape, b_shape = L.shape(a_id), L.shape(b_id)
    a2 = a_shape if len(a_shape) > 1 else (1,) + a_shape
    b2 = b_shape if len(b_shape) > 1 else b_shape + (1,)
    m, k, n = a2[-2], a2[-1], b2[-1]
    a_batch, b_batch = a2[:-2], b2[:-2]
    out_shape = L.shape(node.id)
    batch = math.prod(out_shape) // max(m * n, 1) if m * n else 0
    a_buf, b_buf = L.buf(a_id), L.buf(b_id)
    if math.prod(b_batch) == 1:            # weight-like B: fold A's batch into M
        m, batch, a_bs, b_bs = m * math.prod(a_batch), 1, 0, 0
    elif math.prod(a_batch) == 1:          # A broadcast over B's batch
        a_bs, b_bs = 0, k * n
    else:
        full = tuple(max(x, y) for x, y in zip((1,) * (len(b_batch) - len(a_batch)) + a_batch,
                                               (1,) * (len(a_batch) - len(b_batch)) + b_batch))
        if (1,) * (len(full) - len(a_batch)) + a_batch != full:
            a_buf = _expand_buf(L, a_id, full + (m, k))
        if (1,) * (len(full) - len(b_batch)) + b_batch != full:
            b_buf = _expand_buf(L, b_id, full + (k, n))
        a_bs, b_bs = m * k, k * n
    ep = L.fusions.epilogues.get(node.id)
    bias_id = node.inputs[2] if len(node.inputs) == 3 else ep.bias if ep else None
    act = ep.activation if ep else node.attrs.get("activation", "none")
    out = L.temp(out_shape, node.dtype)
    acc_t = "f32" if node.attrs.get("accumulate") == "float32" else L.T(node.dtype)
    if ep:
        L.values[ep.last] = out
    emit_matmul(L, a_buf, b_buf, L.buf(bias_id) if bias_id is not None else None, out,
                (m, n, k, batch), (a_bs, b_bs), node.dtype, acc_t, act)
    return out


def emit_matmul(L: EmitContext, a: Buf, b: Buf, bias: Buf | None, out: Buf,
                mnkb: tuple[int, int, int, int], batch_strides: tuple[int, int],
                dtype: dt.DType, acc_t: str, act: str = "none") -> None:
    """Emit out[z] = act(a[z] @ b[z] + bias) for z < batch: a [m, k], b [k, n] contiguous,
    batch z at element offsets z * batch_strides."""
    m, n, k, batch = mnkb
    t = L.T(dtype)
    overrides = {"HAS_BIAS": bias is not None, "ACT": ACTIVATIONS[act].code}
    params = {"M": m, "N": n, "K": k, "a_off": 0, "b_off": 0, "a_bs": batch_strides[0],
              "b_bs": batch_strides[1], "c_off": 0, "bias_off": 0}
    bindings = {"A": a, "B": b, "bias": bias if bias is not None else L.dummy(0), "C": out}
    if n % 4 == 0 and m <= GEMV_ROWS:
        L.emit(kernel("matmul/gemv", T=t), bindings, params, (-(-n // 32), 1, batch),
               {**overrides, "ROWS": m}, name="gemv")
    elif k % 4 == 0 and n % 4 == 0:     # register-tiled vec4: 128 or 64 square tiles
        tiles = {r: Variant.of("matmul_vec4" if r == 2 else "matmul_vec4_64",
                               kernel("matmul/matmul_tiled", T=t, C=acc_t, **tiled_slots(r)),
                               (-(-n // (64 * r)), -(-m // (64 * r)), batch), overrides)
                 for r in (2, 1)}
        # default: 128x128 (8x8 per thread) only when it still gives enough workgroups
        first = 2 if -(-m // 128) * -(-n // 128) * batch >= BIG_GRID else 1
        pick, other = tiles[first], tiles[3 - first]
        L.emit(kernel("matmul/matmul_tiled", T=t, C=acc_t, **tiled_slots(first)), bindings,
               params, pick.grid, overrides, name=pick.name, variants=[other],
               tune_key=f"matmul {acc_t}/{t} {m}x{n}x{k}x{batch}")
    else:
        L.emit(kernel("matmul/matmul", T=t), bindings, params,
               (-(-n // 64), -(-m // 64), batch), overrides, name="matmul")


def tiled_slots(r: int) -> dict[str, str]:
    """The unrolled FMA and store blocks of matmul_tiled for R x R blocks of 4x4 per thread:
    acc[(i*4 + c)*R + j] accumulates rows i*64 + ty*4 + c, column quad j*16 + tx."""
    fmas = [f"            let a{i} = As[k * Q + {16 * i}u + ty];" for i in range(r)]
    fmas += [f"            let b{j} = Bs[k * Q + {16 * j}u + tx];" for j in range(r)]
    fmas += [f"            acc[{(i * 4 + c) * r + j}] += a{i}.{'xyzw'[c]} * b{j};"
             for i in range(r) for c in range(4) for j in range(r)]
    stores = [f"    store(wid.z, row0 + {64 * i + c}u + ty * 4u, col0 / 4u + {16 * j}u + tx, "
              f"acc[{(i * 4 + c) * r + j}]);" for i in range(r) for c in range(4)
              for j in range(r)]
    return {"R": str(r), "FMAS": "\n".join(fmas), "STORES": "\n".join(stores)}


def _expand_buf(L: EmitContext, node_id: int, shape: tuple[int, ...]) -> Buf:
    leaves: list = []
    expr = L.leaves_into(node_id, shape, leaves)
    out = L.temp(shape, L.dtype(node_id))
    L.strided(expr, leaves, out, L.dtype(node_id), 0, strides_of(shape), shape, "expand")
    return out
