"""Attention-family rows: Attention (opsets 23-24: 3-D and 4-D inputs, grouped kv heads,
attn_mask bool/float, is_causal, scale, softcap, past/present key/value, nonpad_kv_seqlen, the
qk_matmul_output modes), RotaryEmbedding (cos/sin caches), TensorScatter (KV-cache writes),
CausalConvWithState, LinearAttention (linear/gated/delta/gated_delta recurrences) and
ai.onnx.preview FlexAttention (score_mod / prob_mod subgraphs inlined). Plain attention lowers
onto webrlx's fused attention op; the other forms are composed."""
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


@op("CausalConvWithState", since=27)
def causal_conv_with_state(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                           ) -> list[Any]:
    x, w = lift(ctx, ins[0], ins[1])
    bias, past = _opt(ins, 2), _opt(ins, 3)
    activation = attrs.get("activation", b"none").decode()
    if activation not in ("none", "silu", "swish"):
        raise OnnxImportError(f"CausalConvWithState: unknown activation {activation!r}")
    b, c, n = static_shape(ctx, x)
    k = static_shape(ctx, w)[2]
    xf = x.cast("float32")
    if past is not None:
        padded = wt.concat([ctx.tensor(past).cast("float32"), xf], 2)
    elif k > 1:
        padded = wt.concat([ctx.tensor(np.zeros((b, c, k - 1), np.float32)), xf], 2)
    else:
        padded = xf
    # a depthwise convolution (one group per channel) over the left-padded sequence
    y = nn.conv2d(padded.reshape((b, c, 1, n + k - 1)),
                  w.cast("float32").reshape((c, 1, 1, k)),
                  None if bias is None else ctx.tensor(bias).cast("float32"), groups=c)
    y = y.reshape((b, c, n))
    if activation != "none":
        y = y.silu()
    if k == 1:     # no state to keep: an empty (b, c, 0) array
        return [y.cast(x.dtype), np.zeros((b, c, 0), x.dtype.np_dtype)]
    return [y.cast(x.dtype), padded[:, :, n:].cast(x.dtype)]


def _step(x: Tensor, t: int) -> Tensor:
    """Time step t of (b, heads, time, d) -> (b, heads, d)."""
    return x[:, :, t, :]


@op("LinearAttention", since=27)
def linear_attention(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                     ) -> list[Any]:
    q0, k, v = lift(ctx, *ins[:3])
    q, k, v = (t.cast("float32") for t in (q0, k, v))     # the state accumulates in float32
    past, decay, beta = (_opt(ins, i) for i in (3, 4, 5))
    rule = attrs.get("update_rule", b"gated_delta").decode()
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise OnnxImportError(f"LinearAttention: unknown update_rule {rule!r}")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if (decay is not None) != gated or (beta is not None) != delta:
        raise OnnxImportError(f"LinearAttention: update_rule {rule!r} takes decay: {gated}, "
                              f"beta: {delta}")
    hq, hkv = attrs["q_num_heads"], attrs["kv_num_heads"]
    b, steps, _ = static_shape(ctx, q)
    q, k, v = _heads(ctx, q, hq), _heads(ctx, k, hkv), _heads(ctx, v, hkv)
    dk, dv = static_shape(ctx, k)[3], static_shape(ctx, v)[3]
    scale = float(attrs.get("scale", 0.0)) or 1.0 / math.sqrt(dk)
    if gated:     # exp(decay) per kv head (b, hkv, T, 1) or per key dim (b, hkv, T, dk)
        g = ctx.tensor(decay).cast("float32")
        last = static_shape(ctx, g)[2]
        g = _heads(ctx, g, hkv) if last != hkv else g.reshape((b, steps, hkv, 1)).permute(
            0, 2, 1, 3)
        g = g.exp()
    if delta:     # (b, hkv or 1, T, 1)
        bt = ctx.tensor(beta).cast("float32")
        bt = bt.reshape((b, steps, static_shape(ctx, bt)[2], 1)).permute(0, 2, 1, 3)
    state = ctx.tensor(past).cast("float32") if past is not None else ctx.tensor(
        np.zeros((b, hkv, dk, dv), np.float32))
    outs = []
    # the recurrence, one time step after the other (the graph grows with the sequence)
    for t in range(steps):
        k_t, v_t = _step(k, t), _step(v, t)
        if gated:
            state = state * _step(g, t).unsqueeze(-1)
        if delta:
            seen = (k_t.unsqueeze(2) @ state).reshape((b, hkv, dv))
            v_t = _step(bt, t) * (v_t - seen)
        state = state + k_t.unsqueeze(-1) * v_t.unsqueeze(2)
        q_t = _step(q, t).reshape((b, hkv, hq // hkv, dk))
        outs.append((q_t @ state).reshape((b, hq, 1, dv)) * scale)
    y = wt.concat(outs, 2).permute(0, 2, 1, 3).reshape((b, steps, hq * dv))
    state_dtype = ctx.tensor(past).dtype if past is not None else q0.dtype
    return [y.cast(q0.dtype), state.cast(state_dtype)]


@op("FlexAttention", domain="ai.onnx.preview", since=1)
def flex_attention(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                   ) -> list[Tensor]:
    q0, k, v = lift(ctx, *ins[:3])
    q, k, v = (t.cast("float32") for t in (q0, k, v))     # the softmax runs in float32
    hq, dk = static_shape(ctx, q)[1], static_shape(ctx, q)[3]
    hkv = static_shape(ctx, k)[1]
    if hq % hkv:
        raise OnnxImportError(f"FlexAttention: {hq} query heads are not a multiple of {hkv} "
                              "kv heads")
    k, v = _repeat_heads(k, hq // hkv), _repeat_heads(v, hq // hkv)
    scale = float(attrs.get("scale", 1.0 / math.sqrt(dk)))
    score_mod, prob_mod = attrs.get("score_mod"), attrs.get("prob_mod")
    if score_mod is None and prob_mod is None and static_shape(ctx, v)[3] == dk:
        return [nn.attention(q, k, v, scale=scale).cast(q0.dtype)]
    scores = (q @ k.transpose(-1, -2)) * scale
    if score_mod is not None:
        scores = ctx.tensor(ctx.inline(score_mod, [scores])[0])
    probs = scores.softmax(-1)
    if prob_mod is not None:
        probs = ctx.tensor(ctx.inline(prob_mod, [probs])[0])
    return [(probs @ v).cast(q0.dtype)]
