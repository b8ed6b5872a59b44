"""Neural-network rows: MatMul, Gemm, Softmax/LogSoftmax, LayerNormalization,
BatchNormalization, InstanceNormalization, Dropout (inference), Conv (1-D and 2-D). Pooling rows
live in pool.py."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import nn
from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .common import lift, norm_axis, same_dtype, static_shape
from .pool import conv_pads
from .registry import op


# -- matmul ----------------------------------------------------------------------------------
def _float_matmul(a: Tensor, b: Tensor) -> Tensor:
    if a.dtype.is_float:
        return a @ b.cast(a.dtype)
    return (a.cast("float32") @ b.cast("float32")).cast(a.dtype)


@op("MatMul", host=lambda node, ins, attrs: [np.matmul(*ins)])
def matmul(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    a, b = lift(ctx, *ins)
    return [_float_matmul(a, b)]


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
    if attrs.get("training_mode", 0):
        raise OnnxImportError("BatchNormalization: training_mode=1 is not supported")
    x, scale, b, mean, var = lift(ctx, *ins[:5])
    bshape = (1, -1) + (1,) * (x.ndim - 2)
    eps = attrs.get("epsilon", 1e-5)
    inv = (var.reshape(bshape) + eps).rsqrt() * scale.reshape(bshape)
    return [(x - mean.reshape(bshape)) * inv + b.reshape(bshape)]


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
    training = ins[2] if len(ins) > 2 else None
    if training is not None and bool(np.asarray(ctx.host(training, "training_mode"))):
        raise OnnxImportError("Dropout: training_mode=True is not supported (inference only)")
    outs: list[Any] = [ins[0]]
    if len(node.outputs) > 1:
        outs.append(np.ones(ctx.shape(ins[0]), np.bool_))
    return outs


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


def _as_2d(x: Tensor) -> tuple[Tensor, bool]:
    if x.ndim == 3:
        return x.reshape(x.shape[:2] + (1,) + x.shape[2:]), True
    if x.ndim != 4:
        raise OnnxImportError(f"only 1-D and 2-D convolution/pooling are supported, got an "
                              f"input of rank {x.ndim}")
    return x, False


@op("Conv")
def conv(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    x, w = same_dtype(*lift(ctx, ins[0], ins[1]))
    bias = ctx.tensor(ins[2]).cast(x.dtype) if len(ins) > 2 and ins[2] is not None else None
    x, one_d = _as_2d(x)
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
