"""com.microsoft contrib rows that onnxruntime's transformer optimizer and LLM exports emit:
fused norms and activations, Attention / MultiHeadAttention / GroupQueryAttention (on webrlx's
fused attention op where the mask is a key-padding mask, else composed), RotaryEmbedding,
EmbedLayerNormalization, and the block-quantized MatMulNBits / GatherBlockQuantized (4-bit
words unpacked and dequantized by integer ops on the device)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import nn
from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .attention import _heads, _repeat_heads, rotary_embedding
from .common import lift, norm_axis, static_shape
from .registry import op

MS = "com.microsoft"


def _opt(ins: list[Any], i: int) -> Any:
    return ins[i] if len(ins) > i else None


def _want(node: Any, i: int) -> bool:
    return len(node.outputs) > i and bool(node.outputs[i])


# -- norms -----------------------------------------------------------------------------------
def _stats(x: Tensor, eps: float, rms: bool) -> tuple[Tensor, Tensor]:
    """(mean, 1 / std) over the last axis with keepdims; RMS norms: (zeros, 1 / rms)."""
    mean = x.mean(-1, True)
    if rms:
        return mean * 0.0, ((x * x).mean(-1, True) + eps).rsqrt()
    c = x - mean
    return mean, ((c * c).mean(-1, True) + eps).rsqrt()


@op("SkipLayerNormalization", "SkipSimplifiedLayerNormalization", domain=MS)
def skip_layer_norm(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                    ) -> list[Any]:
    rms = node.op_type.startswith("SkipSimplified")
    x, skip = lift(ctx, ins[0], ins[1])
    gamma = ctx.tensor(ins[2]).cast(x.dtype)
    beta = None if rms else _opt(ins, 3)
    bias = _opt(ins, 3 if rms else 4)
    eps = float(attrs.get("epsilon", 1e-12 if not rms else 1e-6))
    s = x + skip.cast(x.dtype)
    if bias is not None:
        s = s + ctx.tensor(bias).cast(x.dtype)
    if rms:
        y = nn.rms_norm(s, gamma, eps)
    else:
        y = nn.layer_norm(s, gamma, ctx.tensor(beta).cast(x.dtype) if beta is not None
                          else None, eps)
    outs: list[Any] = [y, None, None, s]
    if _want(node, 1) or _want(node, 2):
        outs[1], outs[2] = _stats(s, eps, rms)
    return outs[:max(1, len(node.outputs))]


@op("SimplifiedLayerNormalization", domain=MS)
@op("SimplifiedLayerNormalization", since=1)
def simplified_layer_norm(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                          ) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    eps = float(attrs.get("epsilon", 1e-5))
    axis = norm_axis(attrs.get("axis", -1), x.ndim)
    scale = ctx.tensor(ins[1]).cast(x.dtype)
    shape = static_shape(ctx, x)
    flat = x.reshape(shape[:axis] + (math.prod(shape[axis:]),)) if axis != x.ndim - 1 else x
    inv = _stats(flat, eps, True)[1]
    if axis == x.ndim - 1 and tuple(scale.shape) == (shape[-1],):
        y = nn.rms_norm(x, scale, eps)
    else:
        y = (flat * inv).reshape(shape) * scale
    return [y, inv.reshape(shape[:axis] + (1,) * (len(shape) - axis))][:max(1, len(node.outputs))]


# -- activations -----------------------------------------------------------------------------
def _with_bias(ctx: Context, ins: list[Any]) -> Tensor:
    (x,) = lift(ctx, ins[0])
    b = _opt(ins, 1)
    return x + ctx.tensor(b).cast(x.dtype) if b is not None else x


@op("FastGelu", domain=MS)
def fast_gelu(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return [_with_bias(ctx, ins).gelu("tanh")]


@op("Gelu", "BiasGelu", domain=MS)
def gelu(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return [_with_bias(ctx, ins).gelu()]


@op("QuickGelu", domain=MS)
def quick_gelu(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    return [x * (x * float(attrs.get("alpha", 1.702))).sigmoid()]


@op("BiasAdd", domain=MS)
def bias_add(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    x, bias, skip = lift(ctx, *ins[:3])
    return [x + bias.cast(x.dtype) + skip.cast(x.dtype)]


# -- attention -------------------------------------------------------------------------------
def _attend(ctx: Context, q: Tensor, k: Tensor, v: Tensor, scale: float,
            keep: Tensor | None = None,
            causal: bool = False, qpos: Tensor | None = None, bias: Tensor | None = None,
            softcap: float = 0.0, window: int = -1, smooth: bool = False,
            filter_value: float = -10000.0) -> Tensor:
    """softmax(q k^T * scale (softcapped) + bias + masks) v over (b, h, s, d) q and (b, h, t, d)
    k, v. keep: (b, t) keys to attend (1) or not; causal: query i sees keys up to i + t - s,
    or up to qpos[b, i] where given (window: and after qpos - window); smooth: one extra zero
    logit in the softmax. The fused attention op runs what it can express."""
    b, h, s, d = static_shape(ctx, q)
    t = static_shape(ctx, k)[2]
    if bias is None and softcap == 0.0 and window < 0 and not smooth and qpos is None \
            and v.shape[3] == d:
        return nn.attention(q, k, v, mask=keep, scale=scale, causal=causal)
    scores = (q @ k.transpose(-1, -2)) * scale
    if softcap > 0.0:
        scores = (scores / softcap).tanh() * softcap
    if bias is not None:
        scores = scores + bias.cast(scores.dtype)
    if keep is not None:
        scores = wt.where(keep.reshape((b, 1, 1, t)) != 0, scores, filter_value)
    if causal or window >= 0:
        keys = ctx.tensor(np.arange(t, dtype=np.int32))
        pos = qpos.reshape((b, 1, s, 1)) if qpos is not None else \
            ctx.tensor((np.arange(s, dtype=np.int32) + t - s).reshape(s, 1))
        if causal:
            scores = wt.where(keys <= pos, scores, filter_value)
        if window >= 0:
            scores = wt.where(keys > pos - window, scores, filter_value)
    if smooth:
        zeros = (scores[..., :1] * 0.0)
        probs = wt.concat([scores, zeros], -1).softmax(-1)[..., :t]
    else:
        probs = scores.softmax(-1)
    return probs @ v


def _merge(y: Tensor) -> Tensor:
    """(b, h, s, d) -> (b, s, h * d)."""
    b, h, s, d = (int(n) for n in y.shape)
    return y.permute(0, 2, 1, 3).reshape((b, s, h * d))


def _keep_mask(ctx: Context, mask: Any, b: int, s: int, t: int) -> Tensor | None:
    """A mask_index / key_padding_mask as a (b, t) keep mask: 2-D raw 0/1, or 1-D end
    positions (right padding)."""
    if mask is None:
        return None
    m = ctx.tensor(mask).cast("int32")
    if m.ndim == 2 and tuple(m.shape) == (b, t):
        return m
    if m.ndim == 1 and m.shape[0] == b:
        keys = ctx.tensor(np.arange(t, dtype=np.int32))
        return (keys < m.reshape((b, 1))).cast("int32")
    raise OnnxImportError(f"{ctx.node_name}: mask of shape {tuple(m.shape)} is not supported "
                          f"(webrlx.onnx takes ({b}, {t}) 0/1 or ({b},) end positions)")


@op("Attention", domain=MS)
def ms_attention(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    x, w = lift(ctx, ins[0], ins[1])
    bias, mask, past, attn_bias = (_opt(ins, i) for i in (2, 3, 4, 5))
    heads = int(attrs["num_heads"])
    sizes = list(attrs.get("qkv_hidden_sizes", []))
    if attrs.get("do_rotary", 0):
        raise OnnxImportError(f"{ctx.node_name}: do_rotary is not supported")
    b, s, _ = static_shape(ctx, x)
    qkv = x.matmul(w.cast(x.dtype), bias=ctx.tensor(bias).cast(x.dtype)) if bias is not None \
        else x @ w.cast(x.dtype)
    hq = sizes[0] if sizes else static_shape(ctx, qkv)[-1] // 3
    hv = sizes[2] if sizes else hq
    q, k, v = (_heads(ctx, qkv[..., a:a + n], heads)
               for a, n in ((0, hq), (hq, hq), (2 * hq, hv)))
    p = 0
    if past is not None:
        pt = ctx.tensor(past).cast(x.dtype)
        p = static_shape(ctx, pt)[3]
        k, v = wt.concat([pt[0], k], 2), wt.concat([pt[1], v], 2)
    present = wt.concat([k.unsqueeze(0), v.unsqueeze(0)], 0)
    t = p + s
    scale = float(attrs.get("scale", 0.0)) or 1.0 / math.sqrt(hq // heads)
    keep = None
    if mask is not None and ctx.tensor(mask).ndim == 3:     # (b, s, t) per query
        m3 = ctx.tensor(mask).cast("int32")
        extra = wt.where(m3.reshape((b, 1, s, t)) != 0, 0.0, float(
            attrs.get("mask_filter_value", -10000.0)))
        attn_bias = extra if attn_bias is None else ctx.tensor(attn_bias) + extra
    else:
        keep = _keep_mask(ctx, mask, b, s, t)
    y = _attend(ctx, q, k, v, scale, keep, bool(attrs.get("unidirectional", 0)),
                bias=ctx.tensor(attn_bias) if attn_bias is not None else None,
                filter_value=float(attrs.get("mask_filter_value", -10000.0)))
    return [_merge(y), present][:max(1, len(node.outputs))]


@op("MultiHeadAttention", domain=MS)
def multi_head_attention(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                         ) -> list[Any]:
    (q,) = lift(ctx, ins[0])
    k_in, v_in, bias, kpm, attn_bias, past_k, past_v = (_opt(ins, i) for i in range(1, 8))
    heads = int(attrs["num_heads"])
    if k_in is None:
        raise OnnxImportError(f"{ctx.node_name}: packed QKV (no key input) is not supported")
    k, v = ctx.tensor(k_in).cast(q.dtype), ctx.tensor(v_in).cast(q.dtype)
    hq = static_shape(ctx, q)[-1]
    if bias is not None:
        bt = ctx.tensor(bias).cast(q.dtype)
        q = q + bt[:hq]
        if k.ndim == 3:
            hk = static_shape(ctx, k)[-1]
            k, v = k + bt[hq:hq + hk], v + bt[hq + hk:]
    b, s = static_shape(ctx, q)[:2]
    q = _heads(ctx, q, heads)
    if k.ndim == 3:                      # (b, l, hidden); 4-D: already (b, heads, l, d)
        k, v = _heads(ctx, k, heads), _heads(ctx, v, heads)
    if past_k is not None:
        k = wt.concat([ctx.tensor(past_k).cast(q.dtype), k], 2)
        v = wt.concat([ctx.tensor(past_v).cast(q.dtype), v], 2)
    t = static_shape(ctx, k)[2]
    scale = float(attrs.get("scale", 0.0)) or 1.0 / math.sqrt(static_shape(ctx, q)[-1])
    y = _attend(ctx, q, k, v, scale, _keep_mask(ctx, kpm, b, s, t),
                bool(attrs.get("unidirectional", 0)),
                bias=ctx.tensor(attn_bias) if attn_bias is not None else None,
                filter_value=float(attrs.get("mask_filter_value", -10000.0)))
    return [_merge(y), k, v][:max(1, len(node.outputs))]


def _rotate(ctx: Context, x: Tensor, cos: Any, sin: Any, pos: Tensor, interleaved: bool
            ) -> Tensor:
    """Rotary embedding of x (b, heads, s, d) at positions pos (b, s), caches (max, rot / 2)."""
    c = ctx.tensor(cos).cast(x.dtype)
    attrs = {"interleaved": int(interleaved), "rotary_embedding_dim": 2 * c.shape[-1]}
    return rotary_embedding(ctx, None, [x, c, ctx.tensor(sin).cast(x.dtype), pos], attrs)[0]


@op("GroupQueryAttention", domain=MS)
def group_query_attention(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                          ) -> list[Any]:
    (q,) = lift(ctx, ins[0])
    k_in, v_in, past_k, past_v, seqlens, _, cos, sin, pos_ids, attn_bias, sink = (
        _opt(ins, i) for i in range(1, 12))
    if sink is not None:
        raise OnnxImportError(f"{ctx.node_name}: head_sink is not supported")
    n, kvn = int(attrs["num_heads"]), int(attrs["kv_num_heads"])
    b, s, hidden = static_shape(ctx, q)
    if k_in is None:                     # packed (b, s, (n + 2 kvn) d)
        d = hidden // (n + 2 * kvn)
        k, v = q[..., n * d:(n + kvn) * d], q[..., (n + kvn) * d:]
        q = q[..., :n * d]
    else:
        k, v = ctx.tensor(k_in).cast(q.dtype), ctx.tensor(v_in).cast(q.dtype)
    q = _heads(ctx, q, n)
    k, v = _heads(ctx, k, kvn), _heads(ctx, v, kvn)
    d = static_shape(ctx, q)[-1]
    p = static_shape(ctx, past_k)[2] if past_k is not None else 0
    lens = ctx.tensor(seqlens).cast("int32").reshape((b, 1))          # total - 1 per row
    steps = ctx.tensor(np.arange(s, dtype=np.int32).reshape(1, s))
    # positions of the new rows: i in a first prompt (right padding), else after the past
    qpos = steps.expand(b, s) if p == 0 else lens + 1 - s + steps
    if pos_ids is not None:
        qpos = ctx.tensor(pos_ids).cast("int32").reshape((b, s))
    if attrs.get("do_rotary", 0):
        inter = bool(attrs.get("rotary_interleaved", 0))
        q, k = _rotate(ctx, q, cos, sin, qpos, inter), _rotate(ctx, k, cos, sin, qpos, inter)
    if past_k is not None:
        k = wt.concat([ctx.tensor(past_k).cast(q.dtype), k], 2)
        v = wt.concat([ctx.tensor(past_v).cast(q.dtype), v], 2)
    t = p + s
    keep = (ctx.tensor(np.arange(t, dtype=np.int32)) <= lens).cast("int32")
    scale = float(attrs.get("scale", 0.0)) or 1.0 / math.sqrt(d)
    exact_causal = p == 0 or s == 1        # the fused op aligns query i with key i + t - s
    y = _attend(ctx, q, _repeat_heads(k, n // kvn), _repeat_heads(v, n // kvn), scale, keep,
                causal=True, qpos=None if exact_causal else qpos,
                bias=ctx.tensor(attn_bias) if attn_bias is not None else None,
                softcap=float(attrs.get("softcap", 0.0)),
                window=int(attrs.get("local_window_size", -1)),
                smooth=bool(attrs.get("smooth_softmax", 0)), filter_value=-3.0e38)
    return [_merge(y), k, v][:max(1, len(node.outputs))]


@op("RotaryEmbedding", domain=MS)
def ms_rotary_embedding(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                        ) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    pos, cos, sin = ins[1], ins[2], ins[3]
    shape = static_shape(ctx, x)
    half = static_shape(ctx, ctx.tensor(cos))[-1]
    rot = int(attrs.get("rotary_embedding_dim", 0)) or 2 * half
    if x.ndim == 3:
        heads = int(attrs.get("num_heads", 0)) or shape[2] // rot
        x = x.reshape((shape[0], shape[1], heads, shape[2] // heads)).permute(0, 2, 1, 3)
    b, _, s, _ = static_shape(ctx, x)
    p = ctx.tensor(pos).cast("int32")
    if p.ndim == 1:                      # one start offset: positions offset + i
        p = p.reshape((1, 1)) + ctx.tensor(np.arange(s, dtype=np.int32).reshape(1, s))
    p = p.expand(b, s)
    c, sn = ctx.tensor(cos).cast(x.dtype), ctx.tensor(sin).cast(x.dtype)
    y = rotary_embedding(ctx, None, [x, c, sn, p], {
        "interleaved": int(attrs.get("interleaved", 0)), "rotary_embedding_dim": rot})[0]
    return [y.permute(0, 2, 1, 3).reshape(shape) if len(shape) == 3 else y]


@op("EmbedLayerNormalization", domain=MS)
def embed_layer_norm(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                     ) -> list[Any]:
    ids = ctx.tensor(ins[0]).cast("int32")
    seg, words, positions, seg_table, gamma, beta, mask, pos_ids = (
        _opt(ins, i) for i in range(1, 9))
    b, s = static_shape(ctx, ids)
    x = nn.embedding(ctx.tensor(words), ids)
    pos = ctx.tensor(pos_ids).cast("int32") if pos_ids is not None else \
        ctx.tensor(np.arange(s, dtype=np.int32).reshape(1, s))
    x = x + nn.embedding(ctx.tensor(positions), pos.expand(b, s)).cast(x.dtype)
    if seg is not None and seg_table is not None:
        x = x + nn.embedding(ctx.tensor(seg_table), ctx.tensor(seg).cast("int32"))
    y = nn.layer_norm(x, ctx.tensor(gamma).cast(x.dtype), ctx.tensor(beta).cast(x.dtype)
                      if beta is not None else None, float(attrs.get("epsilon", 1e-12)))
    if mask is not None:
        mask_index = ctx.tensor(mask).cast("int32").sum(-1)
    else:
        mask_index = ctx.tensor(np.zeros(b, np.int32))
    return [y, mask_index, x][:max(1, len(node.outputs))]


# -- block-quantized weights ------------------------------------------------------------------
def _words(packed: np.ndarray) -> np.ndarray:
    """Rows of packed bytes (rows, nbytes) as little-endian uint32 words (rows, ceil(n / 4)):
    a layout change of the quantized data, the values stay packed."""
    rows = packed.reshape(packed.shape[0], -1).astype(np.uint8)
    pad = -rows.shape[1] % 4
    if pad:
        rows = np.concatenate([rows, np.zeros((rows.shape[0], pad), np.uint8)], 1)
    return np.ascontiguousarray(rows).view("<u4")


def _unpack(ctx: Context, words: Tensor, bits: int, axis: int = -1) -> Tensor:
    """uint32 words -> float32 codes, low bits first, 32 / bits codes per word along axis
    (-1: (..., w) -> (..., w * per); 0: (w, n) -> (w * per, n))."""
    per = 32 // bits
    shifts = np.arange(0, 32, bits, dtype=np.uint32)
    low = ctx.tensor(np.uint32((1 << bits) - 1))
    if axis == 0:
        codes = (words.unsqueeze(1) >> ctx.tensor(shifts.reshape(per, 1))) & low
        shape = (words.shape[0] * per,) + tuple(words.shape[1:])
    else:
        codes = (words.unsqueeze(-1) >> ctx.tensor(shifts)) & low
        shape = tuple(words.shape[:-1]) + (words.shape[-1] * per,)
    return codes.reshape(shape).cast("float32")


def _host_zero_points(zp: Any, rows: int, blocks: int, bits: int) -> np.ndarray:
    """Zero points (rows, blocks) as floats: packed uint8 codes are unpacked (low bits
    first), float ones kept."""
    z = np.asarray(zp)
    if z.dtype.kind == "f":
        return z.reshape(rows, blocks).astype(np.float32)
    per = 8 // bits
    b = z.reshape(rows, -1).astype(np.uint8)
    if b.shape[1] * per >= blocks and b.shape[1] != blocks:
        codes = np.stack([(b >> (bits * i)) & ((1 << bits) - 1) for i in range(per)], -1)
        b = codes.reshape(rows, -1)
    return b[:, :blocks].astype(np.float32)


def _bits(ctx: Context, attrs: dict[str, Any]) -> int:
    bits = int(attrs.get("bits", 4))
    if bits not in (2, 4, 8):
        raise OnnxImportError(f"{ctx.node_name}: bits={bits} is not supported (2, 4, 8)")
    return bits


@op("MatMulNBits", domain=MS)
def matmul_nbits(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                 ) -> list[Any]:
    (a,) = lift(ctx, ins[0])
    bits, kk, nn_ = _bits(ctx, attrs), int(attrs["K"]), int(attrs["N"])
    block = int(attrs["block_size"])
    blocks = -(-kk // block)
    if _opt(ins, 4) is not None:
        raise OnnxImportError(f"{ctx.node_name}: g_idx is not supported")
    packed = ctx.host(ins[1], "MatMulNBits' packed weight B")
    # the weight is dequantized straight into (k, n), the layout a @ w reads: the words go up
    # transposed, (words, n), so word r of every row unpacks into rows r * per ... of w
    words = ctx.tensor(np.ascontiguousarray(_words(packed.reshape(nn_, -1)).T))
    codes = _unpack(ctx, words, bits, axis=0)[:blocks * block]                # (k_pad, n)
    scales = ctx.tensor(ins[2]).cast("float32").reshape((nn_, blocks)).permute(1, 0)
    zp = _opt(ins, 3)
    zero: Any = float(1 << (bits - 1))
    if zp is not None:
        zh = _host_zero_points(ctx.host(zp, "MatMulNBits' zero points"), nn_, blocks, bits)
        zero = ctx.tensor(np.ascontiguousarray(zh.T).reshape(blocks, 1, nn_))
    w = (codes.reshape((blocks, block, nn_)) - zero) * scales.reshape((blocks, 1, nn_))
    w = w.reshape((blocks * block, nn_))[:kk].cast(a.dtype)                    # (k, n)
    bias = _opt(ins, 5)
    if bias is not None:
        return [a.matmul(w, bias=ctx.tensor(bias).cast(a.dtype))]
    return [a @ w]


@op("GatherBlockQuantized", domain=MS)
def gather_block_quantized(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                           ) -> list[Any]:
    data = ctx.host(ins[0], "GatherBlockQuantized's data")
    elem = ctx.elem_types.get(node.inputs[0], 2)
    bits = _bits(ctx, attrs)
    block = int(attrs.get("block_size", 128))
    if int(attrs.get("gather_axis", 0)) != 0 or data.ndim != 2 or \
            norm_axis(int(attrs.get("quantize_axis", -1)), data.ndim) != 1:
        raise OnnxImportError(f"{ctx.node_name}: only 2-D data with gather_axis 0 and "
                              "quantize_axis 1 is supported")
    rows = data.shape[0]
    signed = elem == 22                                   # int4: values in [-8, 7]
    if elem in (21, 22):                                  # decoded 4-bit values: repack
        v = (data.astype(np.int16) & 0xF).astype(np.uint8)
        v = np.concatenate([v, np.zeros((rows, v.shape[1] % 2), np.uint8)], 1)
        data = v[:, 0::2] | (v[:, 1::2] << 4)
        cols = ctx.shape(ins[0])[1]
    else:
        cols = data.shape[1] * 8 // bits
    blocks = -(-cols // block)
    idx = ctx.tensor(ins[1]).cast("int32")
    idx = wt.where(idx < 0, idx + rows, idx)
    words = ctx.tensor(_words(data)).gather(idx, axis=0)                      # (..., w)
    codes = _unpack(ctx, words, bits)[..., :cols]
    if signed:
        codes = codes - wt.where(codes >= 8.0, 16.0, 0.0)
    lead = tuple(idx.shape)
    pad = blocks * block - cols
    if pad:
        codes = wt.concat([codes, codes[..., :pad] * 0.0], -1)
    codes = codes.reshape(lead + (blocks, block))
    st = ctx.tensor(ins[2])
    scales = st.cast("float32").reshape((rows, blocks))
    zp = _opt(ins, 3)
    zero: Any = 0.0 if signed else float(1 << (bits - 1))
    if zp is not None:
        zh = _host_zero_points(ctx.host(zp, "GatherBlockQuantized's zero points"), rows,
                               blocks, bits)
        zero = ctx.tensor(zh).gather(idx, axis=0).reshape(lead + (blocks, 1))
    y = (codes - zero) * scales.gather(idx, axis=0).reshape(lead + (blocks, 1))
    y = y.reshape(lead + (blocks * block,))[..., :cols]
    return [y.cast(st.dtype)]
