"""Neural-network rows: MatMul, Gemm, Softmax/LogSoftmax, LayerNormalization,
BatchNormalization, InstanceNormalization, GroupNormalization, RMSNormalization,
MeanVarianceNormalization, LpNormalization, LRN, Hardmax, Dropout, Conv and ConvTranspose
(1-D, 2-D, 3-D), Col2Im. Pooling rows live in pool.py."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import nn
from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from ..patterns import fused_attention
from .common import lift, norm_axis, same_dtype, static_shape
from .pool import Windows, conv_pads
from .registry import op


# -- matmul ----------------------------------------------------------------------------------
def _float_matmul(a: Tensor, b: Tensor) -> Tensor:
    if a.dtype.is_float:
        return a @ b.cast(a.dtype)
    return (a.cast("float32") @ b.cast("float32")).cast(a.dtype)


@op("MatMul", host=lambda node, ins, attrs: [np.matmul(*ins)])
def matmul(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    w = ins[1]
    if ctx.is_host(w) and w.ndim == 2 and w.shape[1] % 4 and w.shape[1] > 4 and \
            w.dtype.kind == "f" and not ctx.is_host(ins[0]):
        return [_padded_matmul(ctx, lift(ctx, ins[0])[0], w)]
    a, b = lift(ctx, *ins)
    fused = fused_attention(a, b)       # softmax(q k^T * s + mask) @ v: the attention op
    return [fused if fused is not None else _float_matmul(a, b)]


def _padded_matmul(ctx: Context, a: Tensor, w: np.ndarray) -> Tensor:
    """a @ w for a constant weight whose column count n is no multiple of 4 (a vocabulary
    projection: Whisper's 51,865 tokens): the vec4 kernels (GEMV, register tiles) need one, the
    scalar tiled kernel is some 100x slower at one row; so w gets zero columns up to a multiple
    of 4 (a param of its own, shared by a session's plans) and the product is cut back to n."""
    n = w.shape[1]

    def pad(w: np.ndarray) -> np.ndarray:
        return np.pad(w, ((0, 0), (0, (-n) % 4)))
    y = _float_matmul(a, ctx.param_from(w, pad, "pad4"))
    return y.narrow(y.ndim - 1, 0, n)


@op("Gemm")
def gemm(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    a, b = lift(ctx, ins[0], ins[1])
    if attrs.get("transA", 0):
        a = a.transpose()
    if attrs.get("transB", 0):
        b = b.transpose()
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    c = ins[2] if len(ins) > 2 and ins[2] is not None else None
    n = b.shape[1]
    if c is not None and alpha == 1.0 and beta == 1.0 and tuple(c.shape) == (n,) \
            and a.dtype.is_float:
        return [a.matmul(b.cast(a.dtype), bias=ctx.tensor(c).cast(a.dtype))]
    y = _float_matmul(a, b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None:
        ct = ctx.tensor(c).cast(y.dtype)
        y = y + (ct * beta if beta != 1.0 else ct)
    return [y]


# -- softmax ---------------------------------------------------------------------------------
@op("Softmax", "LogSoftmax")
def softmax(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    version = ctx.opsets.get("", 0)
    log = node.op_type == "LogSoftmax"
    if version >= 13:
        axis = norm_axis(attrs.get("axis", -1), x.ndim)
        return [x.log_softmax(axis) if log else x.softmax(axis)]
    axis = norm_axis(attrs.get("axis", 1), x.ndim)       # coerced to 2-D at axis
    shape = static_shape(ctx, x)
    flat = x.reshape((math.prod(shape[:axis]), math.prod(shape[axis:])))
    out = flat.log_softmax(-1) if log else flat.softmax(-1)
    return [out.reshape(shape)]


# -- normalization ---------------------------------------------------------------------------
@op("LayerNormalization")
def layer_norm(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    scale = ins[1]
    bias = ins[2] if len(ins) > 2 else None
    eps = attrs.get("epsilon", 1e-5)
    axis = norm_axis(attrs.get("axis", -1), x.ndim)
    shape = static_shape(ctx, x)
    inner = math.prod(shape[axis:])
    xf = x if x.dtype.is_float else x.cast("float32")
    flat = xf.reshape((math.prod(shape[:axis]), inner)) if axis != x.ndim - 1 else xf
    fused = axis == x.ndim - 1 and tuple(scale.shape) == (inner,) and \
        (bias is None or tuple(bias.shape) == (inner,))
    if fused:
        w = ctx.tensor(scale).cast(xf.dtype)
        b = ctx.tensor(bias).cast(xf.dtype) if bias is not None else None
        y = nn.layer_norm(flat, w, b, eps)
    else:
        y = nn.layer_norm(flat, None, None, eps).reshape(shape) * ctx.tensor(scale).cast(
            xf.dtype)
        if bias is not None:
            y = y + ctx.tensor(bias).cast(xf.dtype)
    outs: list[Any] = [y]
    if len(node.outputs) > 1:
        mean = flat.mean(-1, True)
        var = ((flat - mean) * (flat - mean)).mean(-1, True)
        stat_shape = shape[:axis] + (1,) * (len(shape) - axis)
        outs += [mean.reshape(stat_shape), (var + eps).rsqrt().reshape(stat_shape)]
    return outs


@op("BatchNormalization")
def batch_norm(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    x, scale, b, mean, var = lift(ctx, *ins[:5])
    bshape = (1, -1) + (1,) * (x.ndim - 2)
    eps = attrs.get("epsilon", 1e-5)
    training = attrs.get("training_mode", 0) or (len(node.outputs) > 1 and
                                                  ctx.opsets.get("", 0) < 14)
    if not training:
        inv = (var.reshape(bshape) + eps).rsqrt() * scale.reshape(bshape)
        return [(x - mean.reshape(bshape)) * inv + b.reshape(bshape)]
    axes = (0,) + tuple(range(2, x.ndim))            # statistics of this batch
    batch_mean = x.mean(axes, True)
    centered = x - batch_mean
    batch_var = (centered * centered).mean(axes, True)
    y = centered * (batch_var + eps).rsqrt() * scale.reshape(bshape) + b.reshape(bshape)
    momentum = attrs.get("momentum", 0.9)
    saved_mean, saved_var = batch_mean.reshape((-1,)), batch_var.reshape((-1,))
    outs = [y, mean * momentum + saved_mean * (1 - momentum),
            var * momentum + saved_var * (1 - momentum), saved_mean, saved_var]
    return outs[:len(node.outputs)]


@op("InstanceNormalization")
def instance_norm(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    x, scale, b = lift(ctx, *ins)
    n, c = static_shape(ctx, x)[:2]
    flat = x.reshape((n * c, -1))
    y = nn.layer_norm(flat, None, None, attrs.get("epsilon", 1e-5)).reshape(x.shape)
    bshape = (1, c) + (1,) * (x.ndim - 2)
    return [y * scale.reshape(bshape) + b.reshape(bshape)]


@op("Dropout")
def dropout(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    """Identity at inference; in training mode the mask is drawn on the host from numpy's
    RandomState(seed) (the onnx reference evaluator's generator), so a seed is required."""
    training = ins[2] if len(ins) > 2 else None
    ratio = float(ctx.host(ins[1], "Dropout ratio")) if len(ins) > 1 and ins[1] is not None \
        else float(attrs.get("ratio", 0.5))
    shape = ctx.shape(ins[0])
    keep = np.ones(shape, np.bool_)
    y = ins[0]
    if training is not None and bool(np.asarray(ctx.host(training, "training_mode"))) \
            and ratio > 0:
        if "seed" not in attrs:
            raise OnnxImportError(f"{ctx.node_name}: Dropout in training mode needs the seed "
                                  "attribute (webrlx draws the mask once, on the host)")
        keep = np.random.RandomState(attrs["seed"]).uniform(0, 1.0, shape) >= ratio
        (x,) = lift(ctx, ins[0])
        y = x * ctx.tensor((keep / (1.0 - ratio)).astype(x.dtype.np_dtype))
    return [y, keep][:len(node.outputs)]


# -- convolution and pooling ------------------------------------------------------------------
def _pad_zeros(ctx: Context, x: Tensor, pads: list[int]) -> Tensor:
    """Zero-pad the two trailing dims by (top, left, bottom, right)."""
    top, left, bottom, right = pads
    for axis, lo, hi in ((2, top, bottom), (3, left, right)):
        parts = []
        for n in (lo, hi):
            shape = list(static_shape(ctx, x))
            shape[axis] = n
            parts.append(ctx.tensor(np.zeros(shape, x.dtype.np_dtype)) if n else None)
        pieces = [p for p in (parts[0], x, parts[1]) if p is not None]
        x = wt.concat(pieces, axis) if len(pieces) > 1 else x
    return x


def _conv_windows(ctx: Context, x: Tensor, w: Tensor, bias: Tensor | None,
                  attrs: dict[str, Any]) -> Tensor:
    """An N-D convolution (3-D and up) as window gathers (im2col) and one grouped matmul."""
    xs, ws = static_shape(ctx, x), static_shape(ctx, w)
    n, c, spatial = xs[0], xs[1], xs[2:]
    cout, kernel = ws[0], ws[2:]
    g = int(attrs.get("group", 1))
    strides = tuple(int(s) for s in attrs.get("strides", [1] * len(spatial)))
    dil = tuple(int(d) for d in attrs.get("dilations", [1] * len(spatial)))
    win = Windows(spatial, kernel, strides, dil, conv_pads(attrs, spatial, kernel, strides, dil),
                  False)
    n_out, taps = win.index.shape
    cols = win.gather(ctx, x, 0.0).reshape((n, g, c // g, n_out, taps)).permute(0, 1, 3, 2, 4)
    cols = cols.reshape((n, g, n_out, c // g * taps))
    wg = w.reshape((1, g, cout // g, c // g * taps)).permute(0, 1, 3, 2)
    y = (cols @ wg).permute(0, 1, 3, 2).reshape((n, cout) + tuple(win.out))
    return y if bias is None else y + bias.reshape((1, cout) + (1,) * len(spatial))


@op("Conv")
def conv(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    x, w = same_dtype(*lift(ctx, ins[0], ins[1]))
    bias = ctx.tensor(ins[2]).cast(x.dtype) if len(ins) > 2 and ins[2] is not None else None
    if x.ndim > 4:
        return [_conv_windows(ctx, x, w, bias, attrs)]
    one_d = x.ndim == 3
    if one_d:
        x = x.reshape(x.shape[:2] + (1,) + x.shape[2:])
    if one_d:
        w = w.reshape(w.shape[:2] + (1,) + w.shape[2:])
    kernel = static_shape(ctx, w)[2:]
    strides = tuple(attrs.get("strides", [1] * (2 - one_d)))
    dil = tuple(attrs.get("dilations", [1] * (2 - one_d)))
    pads = conv_pads(attrs, static_shape(ctx, x)[2 + one_d:], kernel[one_d:], strides, dil)
    if one_d:
        strides, dil, pads = (1,) + strides, (1,) + dil, [0, pads[0], 0, pads[1]]
    if pads[0] != pads[2] or pads[1] != pads[3]:
        x, pad = _pad_zeros(ctx, x, pads), (0, 0)
    else:
        pad = (pads[0], pads[1])
    y = nn.conv2d(x, w, bias, stride=strides, padding=pad, dilation=dil,
                  groups=attrs.get("group", 1))
    return [y.reshape(y.shape[:2] + y.shape[3:]) if one_d else y]


# -- more normalizations ---------------------------------------------------------------------
def _flat_from(ctx: Context, x: Tensor, axis: int) -> tuple[Tensor, tuple[int, ...]]:
    """x as (prod(dims before axis), prod(dims from axis)), and x's shape."""
    shape = static_shape(ctx, x)
    return x.reshape((math.prod(shape[:axis]), math.prod(shape[axis:]))), shape


@op("RMSNormalization")
def rms_normalization(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                      ) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    axis = norm_axis(attrs.get("axis", -1), x.ndim)
    flat, shape = _flat_from(ctx, x, axis)
    y = nn.rms_norm(flat, None, attrs.get("epsilon", 1e-5)).reshape(shape)
    return [y * ctx.tensor(ins[1]).cast(x.dtype)]


@op("GroupNormalization")
def group_norm(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    x, scale, bias = lift(ctx, *ins[:3])
    shape = static_shape(ctx, x)
    groups = int(attrs["num_groups"])
    n, c = shape[:2]
    y = nn.layer_norm(x.reshape((n * groups, -1)), None, None, attrs.get("epsilon", 1e-5))
    if math.prod(static_shape(ctx, scale)) != c:        # opset 18: one scale per group
        scale = scale.reshape((groups, 1)).expand((groups, c // groups)).reshape((c,))
        bias = bias.reshape((groups, 1)).expand((groups, c // groups)).reshape((c,))
    bshape = (1, c) + (1,) * (len(shape) - 2)
    return [y.reshape(shape) * scale.cast(x.dtype).reshape(bshape)
            + bias.cast(x.dtype).reshape(bshape)]


@op("MeanVarianceNormalization")
def mvn(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    axes = tuple(norm_axis(a, x.ndim) for a in attrs.get("axes", [0, 2, 3]))
    centered = x - x.mean(axes, True)
    std = (centered * centered).mean(axes, True).sqrt()
    return [centered / (std + 1e-9)]


@op("LpNormalization")
def lp_normalization(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                     ) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    axis = norm_axis(attrs.get("axis", -1), x.ndim)
    p = int(attrs.get("p", 2))
    if p not in (1, 2):
        raise OnnxImportError(f"LpNormalization: p must be 1 or 2, got {p}")
    norm = x.abs().sum(axis, True) if p == 1 else (x * x).sum(axis, True).sqrt()
    return [x / wt.where(norm == 0, 1.0, norm)]        # an all-zero slice stays zero


@op("LRN")
def lrn(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    size = int(attrs["size"])
    c = static_shape(ctx, x)[1]
    lo, hi = (size - 1) // 2, -(-(size - 1) // 2)
    band = np.zeros((c, c), x.dtype.np_dtype)      # band[j, i]: channel j in channel i's window
    for i in range(c):
        band[max(0, i - lo):min(c, i + hi + 1), i] = 1
    last = (0,) + tuple(range(2, x.ndim)) + (1,)
    back = (0, x.ndim - 1) + tuple(range(1, x.ndim - 1))
    square_sum = ((x * x).permute(last) @ ctx.tensor(band)).permute(back)
    alpha, beta = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75)
    return [x / (square_sum * (alpha / size) + attrs.get("bias", 1.0)) ** beta]


@op("Hardmax")
def hardmax(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    shape = static_shape(ctx, x)
    if ctx.opsets.get("", 0) >= 13:
        axis = norm_axis(attrs.get("axis", -1), x.ndim)
        flat = x
    else:                                           # coerced to 2-D at axis
        axis = norm_axis(attrs.get("axis", 1), x.ndim)
        flat = x.reshape((math.prod(shape[:axis]), math.prod(shape[axis:])))
        axis = 1
    n = static_shape(ctx, flat)[axis]
    at = [1] * flat.ndim
    at[axis] = n
    slots = ctx.tensor(np.arange(n, dtype=np.int32).reshape(at))
    hot = slots == flat.argmax(axis, True).cast("int32")
    return [hot.cast(x.dtype).reshape(shape)]


# -- transposed convolution and Col2Im ---------------------------------------------------------
def _col2im(ctx: Context, cols: Tensor, blocks: tuple[int, ...], kernel: tuple[int, ...],
            strides: tuple[int, ...], dil: tuple[int, ...], pads_begin: tuple[int, ...],
            out: tuple[int, ...]) -> Tensor:
    """Sum columns (B, C, taps * blocks), tap-major, into images (B, C, *out): tap t of block l
    lands at l * stride + t * dilation - pad_begin along each dim (outside: dropped). The
    host tables list, per output position, the columns landing on it."""
    k = len(out)
    taps = np.indices(kernel).reshape(k, -1)                    # (k, n_taps)
    starts = np.indices(blocks).reshape(k, -1)                  # (k, n_blocks)
    pos = (starts[:, None, :] * np.array(strides)[:, None, None]
           + taps[:, :, None] * np.array(dil)[:, None, None]
           - np.array(pads_begin)[:, None, None])               # (k, n_taps, n_blocks)
    inside = np.all((pos >= 0) & (pos < np.array(out)[:, None, None]), axis=0).reshape(-1)
    flat_out = np.ravel_multi_index(tuple(np.where(inside, p.reshape(-1), 0) for p in pos),
                                    out) if k else np.zeros(inside.shape, np.int64)
    source = np.nonzero(inside)[0]
    dest = flat_out[source]
    order = np.argsort(dest, kind="stable")
    source, dest = source[order], dest[order]
    n_out = math.prod(out)
    counts = np.bincount(dest, minlength=n_out)
    width = max(int(counts.max(initial=0)), 1)
    rank = np.arange(len(dest)) - np.repeat(np.cumsum(counts) - counts, counts)
    table = np.zeros((n_out, width), np.int32)
    valid = np.zeros((n_out, width), bool)
    table[dest, rank] = source
    valid[dest, rank] = True
    b, c = static_shape(ctx, cols)[:2]
    picked = cols.gather(table.reshape(-1), axis=2).reshape((b, c, n_out, width))
    if not valid.all():
        picked = wt.where(ctx.tensor(valid), picked, 0.0)
    return picked.sum(-1).reshape((b, c) + out)


@op("ConvTranspose")
def conv_transpose(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                   ) -> list[Tensor]:
    x, w = same_dtype(*lift(ctx, ins[0], ins[1]))
    xs, ws = static_shape(ctx, x), static_shape(ctx, w)
    k = len(xs) - 2
    spatial, kernel = xs[2:], ws[2:]
    g = int(attrs.get("group", 1))
    strides = tuple(int(s) for s in attrs.get("strides", [1] * k))
    dil = tuple(int(d) for d in attrs.get("dilations", [1] * k))
    out_pad = [int(p) for p in attrs.get("output_padding", [0] * k)]
    full = [strides[i] * (spatial[i] - 1) + out_pad[i] + (kernel[i] - 1) * dil[i] + 1
            for i in range(k)]
    auto = attrs.get("auto_pad", b"NOTSET")
    shape_attr = [int(d) for d in attrs.get("output_shape", [])][-k:] if \
        "output_shape" in attrs else None
    if "pads" not in attrs and auto in (b"SAME_UPPER", b"SAME_LOWER"):
        out = shape_attr or [spatial[i] * strides[i] for i in range(k)]
        total = [full[i] - out[i] for i in range(k)]
        small = [t // 2 for t in total]
        begin = small if auto == b"SAME_UPPER" else [t - s for t, s in zip(total, small)]
    else:
        pads = [int(p) for p in attrs.get("pads", [0] * (2 * k))]
        begin = pads[:k]
        out = shape_attr or [full[i] - pads[i] - pads[i + k] for i in range(k)]
    cin, cout_g = ws[0], ws[1]
    n, taps, blocks = xs[0], math.prod(kernel), math.prod(spatial)
    wg = w.reshape((g, cin // g, cout_g * taps)).permute(0, 2, 1)        # (G, Cout/G*K, Cin/G)
    cols = wg @ x.reshape((n, g, cin // g, blocks))                      # (N, G, Cout/G*K, L)
    cols = cols.reshape((n, g * cout_g, taps * blocks))
    y = _col2im(ctx, cols, spatial, kernel, strides, dil, tuple(begin), tuple(out))
    if len(ins) > 2 and ins[2] is not None:
        y = y + ctx.tensor(ins[2]).cast(y.dtype).reshape((1, -1) + (1,) * k)
    return [y]


@op("Col2Im")
def col2im(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    image = tuple(int(d) for d in ctx.host(ins[1], "Col2Im image_shape"))
    block = tuple(int(d) for d in ctx.host(ins[2], "Col2Im block_shape"))
    k = len(image)
    strides = tuple(int(s) for s in attrs.get("strides", [1] * k))
    dil = tuple(int(d) for d in attrs.get("dilations", [1] * k))
    pads = [int(p) for p in attrs.get("pads", [0] * (2 * k))]
    blocks = tuple((image[i] + pads[i] + pads[i + k] - dil[i] * (block[i] - 1) - 1)
                   // strides[i] + 1 for i in range(k))
    n, ck, length = static_shape(ctx, x)
    if length != math.prod(blocks):
        raise OnnxImportError(f"{ctx.node_name}: Col2Im input has {length} blocks, the image, "
                              f"block and attributes give {blocks} = {math.prod(blocks)}")
    c = ck // math.prod(block)
    cols = x.reshape((n, c, math.prod(block) * length))
    return [_col2im(ctx, cols, blocks, block, strides, dil, tuple(pads[:k]), image)]
