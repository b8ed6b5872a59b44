"""Attention-family rows: Attention (opsets 23-24: 3-D and 4-D inputs, grouped kv heads,
attn_mask bool/float, is_causal, scale, softcap, past/present key/value, nonpad_kv_seqlen, the
qk_matmul_output modes), RotaryEmbedding (cos/sin caches) and TensorScatter (KV-cache writes).
Plain attention lowers onto webrlx's fused attention op; the other forms are composed."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import nn
from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .common import lift, norm_axis, static_shape
from .registry import op


def _opt(ins: list[Any], i: int) -> Any:
    """Optional input i (None when omitted)."""
    return ins[i] if len(ins) > i else None


def _wanted(node: Any, i: int) -> bool:
    """Whether optional output i is requested."""
    return len(node.outputs) > i and bool(node.outputs[i])


def _heads(ctx: Context, x: Tensor, heads: int) -> Tensor:
    """(batch, seq, heads * d) -> (batch, heads, seq, d)."""
    b, s, hidden = static_shape(ctx, x)
    return x.reshape((b, s, heads, hidden // heads)).permute(0, 2, 1, 3)


def _repeat_heads(x: Tensor, reps: int) -> Tensor:
    """(b, kv_heads, s, d) -> (b, kv_heads * reps, s, d), each kv head repeated in place."""
    if reps == 1:
        return x
    b, h, s, d = (int(n) for n in x.shape)
    return x.unsqueeze(2).expand((b, h, reps, s, d)).reshape((b, h * reps, s, d))


def _bias(ctx: Context, mask: Any, dtype: Any, q_len: int, total: int, past: int,
          causal: bool, nonpad: Any) -> Tensor | None:
    """The additive score bias (broadcastable to (b, h, q_len, total)): attn_mask (bool: False
    = -inf; float: added), padded with -inf up to total keys, the causal triangle (key j is
    visible to query i when j <= past + i) and the keys past nonpad_kv_seqlen."""
    bias = None
    if mask is not None:
        m = ctx.tensor(mask)
        bias = wt.where(m, 0.0, -np.inf).cast(dtype) if m.dtype.name == "bool" else m.cast(
            dtype)
        mshape = static_shape(ctx, bias)
        if mshape[-1] < total:
            fill = np.full(mshape[:-1] + (total - mshape[-1],), -np.inf, np.float32)
            bias = wt.concat([bias, ctx.tensor(fill).cast(dtype)], -1)
    if causal:
        tri = np.triu(np.ones((q_len, total), bool), past + 1)
        c = ctx.tensor(np.where(tri, -np.inf, 0.0).astype(np.float32)).cast(dtype)
        bias = c if bias is None else bias + c
    if nonpad is not None:
        lens = ctx.tensor(nonpad).cast("int32")
        keys = ctx.tensor(np.arange(total, dtype=np.int32))
        unpadded = wt.where(keys < lens.reshape((-1, 1)), 0.0, -np.inf).cast(dtype)
        unpadded = unpadded.reshape((-1, 1, 1, total))
        bias = unpadded if bias is None else bias + unpadded
    return bias


@op("Attention", since=23)
def attention(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    q, k, v = lift(ctx, *ins[:3])
    mask, past_k, past_v, nonpad = (_opt(ins, i) for i in (3, 4, 5, 6))
    three_d = q.ndim == 3
    if three_d:
        if "q_num_heads" not in attrs or "kv_num_heads" not in attrs:
            raise OnnxImportError("Attention: 3-D inputs need q_num_heads and kv_num_heads")
        q = _heads(ctx, q, attrs["q_num_heads"])
        k, v = (_heads(ctx, t, attrs["kv_num_heads"]) for t in (k, v))
    if q.ndim != 4:
        raise OnnxImportError(f"Attention: Q must be 3-D or 4-D, got shape {q.shape}")
    k, v = k.cast(q.dtype), v.cast(q.dtype)
    past = 0
    if past_k is not None:
        past = static_shape(ctx, past_k)[2]
        k = wt.concat([ctx.tensor(past_k).cast(q.dtype), k], 2)
    if past_v is not None:
        v = wt.concat([ctx.tensor(past_v).cast(q.dtype), v], 2)
    present_k, present_v = k, v
    b, hq, lq, dk = static_shape(ctx, q)
    hkv, total = static_shape(ctx, k)[1:3]
    if hq % hkv:
        raise OnnxImportError(f"Attention: {hq} query heads are not a multiple of {hkv} kv "
                              "heads")
    k, v = _repeat_heads(k, hq // hkv), _repeat_heads(v, hq // hkv)
    scale = float(attrs.get("scale", 1.0 / math.sqrt(dk)))
    softcap = float(attrs.get("softcap", 0.0))
    causal = bool(attrs.get("is_causal", 0))
    mode = int(attrs.get("qk_matmul_output_mode", 0))
    want_qk = _wanted(node, 3)
    # webrlx's attention: a key-padding mask only, causal aligned to the last query row
    fused = mask is None and softcap == 0.0 and not want_qk and \
        static_shape(ctx, v)[3] == dk and (not causal or total - lq == past)
    if fused:
        pad = None
        if nonpad is not None:
            keys = ctx.tensor(np.arange(total, dtype=np.int32))
            pad = keys < ctx.tensor(nonpad).cast("int32").reshape((-1, 1))
        y = nn.attention(q, k, v, mask=pad, scale=scale, causal=causal)
    else:
        scores = (q @ k.transpose(-1, -2)) * scale
        if softcap > 0.0:        # before the mask, so masked keys stay at -inf
            scores = (scores / softcap).tanh() * softcap
        qk = scores
        bias = _bias(ctx, mask, q.dtype, lq, total, past, causal, nonpad)
        if bias is not None:
            scores = scores + bias
        probs = scores.softmax(-1)
        if mode == 2:
            qk = scores
        elif mode == 3:
            qk = probs
        y = probs @ v
    if three_d:
        y = y.permute(0, 2, 1, 3).reshape((b, lq, -1))
    outs: list[Any] = [y, present_k, present_v]
    return outs + [qk] if want_qk else outs


@op("RotaryEmbedding", since=23)
def rotary_embedding(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                     ) -> list[Tensor]:
    x, cos, sin = lift(ctx, *ins[:3])
    positions = _opt(ins, 3)
    shape = static_shape(ctx, x)
    if x.ndim == 4:                       # (b, heads, s, d) -> (b, s, heads, d)
        x = x.permute(0, 2, 1, 3)
    else:
        heads = attrs.get("num_heads", 0)
        if not heads:
            raise OnnxImportError("RotaryEmbedding: 3-D input needs num_heads")
        x = x.reshape((shape[0], shape[1], heads, shape[2] // heads))
    b, s, h, d = static_shape(ctx, x)
    rot = attrs.get("rotary_embedding_dim", 0) or d
    half = rot // 2
    if positions is not None:
        idx = ctx.tensor(positions).cast("int32")
        cos, sin = cos.gather(idx, axis=0), sin.gather(idx, axis=0)
    cos = cos.cast(x.dtype).reshape((b, s, 1, half))
    sin = sin.cast(x.dtype).reshape((b, s, 1, half))
    xr = x[:, :, :, :rot] if rot < d else x
    if attrs.get("interleaved", 0):
        pairs = xr.reshape((b, s, h, half, 2))
        x1, x2 = pairs[:, :, :, :, 0], pairs[:, :, :, :, 1]
    else:
        x1, x2 = xr[:, :, :, :half], xr[:, :, :, half:]
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if attrs.get("interleaved", 0):
        out = wt.concat([real.unsqueeze(-1), imag.unsqueeze(-1)], -1).reshape((b, s, h, rot))
    else:
        out = wt.concat([real, imag], -1)
    if rot < d:
        out = wt.concat([out, x[:, :, :, rot:]], -1)
    if len(shape) == 4:
        return [out.permute(0, 2, 1, 3)]
    return [out.reshape(shape)]


@op("TensorScatter", since=24)
def tensor_scatter(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                   ) -> list[Tensor]:
    cache, update = lift(ctx, ins[0], ins[1])
    update = update.cast(cache.dtype)
    shape = static_shape(ctx, cache)
    axis = norm_axis(attrs.get("axis", -2), len(shape))
    if axis == 0:
        raise OnnxImportError("TensorScatter: axis must not be the batch axis 0")
    size, seq = shape[axis], static_shape(ctx, update)[axis]
    mode = attrs.get("mode", b"linear").decode()
    if mode not in ("linear", "circular"):
        raise OnnxImportError(f"TensorScatter: unknown mode {mode!r}")
    where_ = _opt(ins, 2)
    # cache row j of batch n takes update row (j - write_indices[n]) (mod size when circular)
    # when that is in [0, seq)
    rows = ctx.tensor(np.arange(size, dtype=np.int32)).reshape((1, size))
    src = rows if where_ is None else rows - ctx.tensor(where_).cast("int32").reshape((-1, 1))
    if mode == "circular":
        src = src - (src.cast("float32") / size).floor().cast("int32") * size
    bshape = (src.shape[0],) + (1,) * (axis - 1) + (size,) + (1,) * (len(shape) - axis - 1)
    src = src.reshape(bshape)
    inside = wt.where(src >= 0, src, seq) < seq
    safe = wt.where(inside, src, 0).expand(shape[:axis] + (size,) + shape[axis + 1:])
    return [wt.where(inside, update.take_along_axis(safe, axis), cache)]
