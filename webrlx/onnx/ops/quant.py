"""Quantization rows: QuantizeLinear / DequantizeLinear (per-tensor, per-axis, blocked),
DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv, BitCast; and the
rounding of values to ONNX's narrow element types (float8*, float4e2m1, float8e8m0, bfloat16,
int4/uint4, int2/uint2) that Cast uses. Such values live on the device as float32 / int32; the
rounding and saturation rules run in the graph (integer arithmetic on bitcast float32 bits)."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import tensor as wt
from ...tensor import Graph, Tensor
from ..context import Context, OnnxImportError
from ..tensors import ELEM_TYPES, NP_TO_ELEM, SMALL_FLOATS, elem_name, small_float_table
from .common import norm_axis, onnx_device_dtype, static_shape
from .nn import conv
from .registry import op

# integer quantized types: ONNX element type -> (lowest, highest)
INT_RANGES = {2: (0, 255), 3: (-128, 127), 4: (0, 65535), 5: (-32768, 32767), 21: (0, 15),
              22: (-8, 7), 25: (0, 3), 26: (-2, 1)}
NARROW_INTS = {21: 4, 22: 4, 25: 2, 26: 2}        # element type -> bits (Cast wraps to them)
BFLOAT16 = 16
E8M0 = 24
# element types whose Cast needs rounding or wrapping beyond a device dtype conversion
ROUNDED_CASTS = {BFLOAT16, *SMALL_FLOATS, *NARROW_INTS}
_MANT = 1 << 23                                    # float32: one unit of the exponent field


def elem_type_of(ctx: Context, name: str, value: Any) -> int | None:
    """The ONNX element type of a node input, where the import knows it."""
    if name in ctx.elem_types:
        return ctx.elem_types[name]
    if isinstance(value, np.ndarray):
        return NP_TO_ELEM.get(value.dtype)
    return None


# -- rounding to narrow types (float32 in, values of the type out) ----------------------------
def _pow2(k: Tensor) -> Tensor:
    """2**k for int32 k in [-126, 127], exact (built from the exponent field)."""
    return ((k + 127) * _MANT).bitcast("float32")


def _floordiv(u: Tensor, d: int) -> Tensor:
    """u // d for an int32 tensor u >= 0, a power of two d and u // d < 2**24 (webrlx's int
    `/` is true division): float32 may round u up across a multiple of d (those are exact),
    never down, so the quotient is at most one too high."""
    q = (u.cast("float32") * (1.0 / d)).floor().cast("int32")
    return q - (q * d > u).cast("int32")


def round_small_float(x: Tensor, elem_type: int, saturate: bool = True) -> Tensor:
    """x rounded to the nearest value of a float8 / float4 type (ties to even), as ml_dtypes
    converts: saturate clamps to the largest finite value; otherwise overflow is inf where the
    type has one, else NaN (float4e2m1 always saturates; its NaN is 0)."""
    _, mbits, bias, special = SMALL_FLOATS[elem_type]
    table = small_float_table(elem_type)
    top = float(np.max(table[np.isfinite(table)]))
    a = x.abs()
    field = _floordiv(a.bitcast("int32"), _MANT)           # biased exponent of |x|
    e = (field - 127).maximum(1 - bias).minimum(127)       # exponent of the quantum's octave
    y = (a * _pow2(mbits - e)).round() * _pow2(e - mbits)
    if saturate or special == "none":
        y = y.minimum(top)
    else:
        y = wt.where(y > top, math.inf if special == "ieee" else math.nan, y)
    y = wt.where(x < 0, -y, y)
    return wt.where(x != x, 0.0 if special == "none" else math.nan, y)


def round_bfloat16(x: Tensor) -> Tensor:
    """x rounded to bfloat16's 8 significant bits (ties to even); NaN stays NaN."""
    bits = x.abs().bitcast("int32")
    high = _floordiv(bits, 65536)
    odd = high - _floordiv(high, 2) * 2
    y = (_floordiv(bits + 32767 + odd, 65536) * 65536).bitcast("float32")
    return wt.where(x != x, x, wt.where(x < 0, -y, y))


def to_e8m0(x: Tensor, saturate: bool = True, round_mode: str = "up") -> Tensor:
    """float8e8m0 (a power of two 2**(code-127), 255 = NaN) of |x|, by round_mode (up, down,
    nearest) on the float32 exponent, as onnx.numpy_helper.to_float8e8m0."""
    bits = x.abs().bitcast("int32")
    field = _floordiv(bits, _MANT)
    mant = bits - field * _MANT
    if round_mode not in ("up", "down", "nearest"):
        raise OnnxImportError(f"Cast: round_mode {round_mode!r} is not up, down or nearest")
    code = field
    if round_mode != "down":               # bool `*` is and, `maximum` is or
        half = 1 << 22
        up = (mant > 0) if round_mode == "up" else \
            (mant >= half) * ((mant - _floordiv(mant, half) * half > 0).maximum(field > 0))
        if saturate:
            up = up * (field < 254)
        code = wt.where(field == 255, field, field + up.cast("int32"))
    value = wt.where(code == 0, 1 << 22, code * _MANT).bitcast("float32")   # 0: 2**-127
    return wt.where(code == 255, math.nan, value)


def wrap_int(x: Tensor, elem_type: int) -> Tensor:
    """x (integers as float32 or int32) wrapped to the 2- or 4-bit type, two's complement."""
    span = 1 << NARROW_INTS[elem_type]
    lo = INT_RANGES[elem_type][0]
    v = x.cast("float32")
    return (v - ((v - lo) / span).floor() * span).cast("int32")


def cast_to(x: Tensor, elem_type: int, saturate: bool = True, round_mode: str = "up"
            ) -> Tensor:
    """Cast x to a narrow element type (ROUNDED_CASTS): its values in its device dtype."""
    if elem_type in NARROW_INTS:
        return wrap_int(x.cast("int32") if x.dtype.is_float else x, elem_type)
    xf = x.cast("float32")
    if elem_type == BFLOAT16:
        return round_bfloat16(xf)
    if elem_type == E8M0:
        return to_e8m0(xf, saturate, round_mode)
    return round_small_float(xf, elem_type, saturate)


def host_cast(x: np.ndarray, elem_type: int, saturate: bool = True, round_mode: str = "up"
              ) -> np.ndarray:
    """cast_to for a host-known array: the same graph, folded on the numpy reference."""
    from ...runtime.executable import compile as compile_graph
    g = Graph()
    y = cast_to(g.constant(x, onnx_device_dtype(NP_TO_ELEM.get(x.dtype, 1))), elem_type,
                saturate, round_mode)
    (out,) = compile_graph(g, [y], device="reference").run({})
    return np.asarray(out).astype(ELEM_TYPES[elem_type][1])


# -- QuantizeLinear / DequantizeLinear -------------------------------------------------------
def _per_axis(ctx: Context, p: Any, shape: tuple[int, ...], axis: int, block: int) -> Tensor:
    """A scale or zero point as float32, broadcastable to shape: one value, one per index of
    axis (1-D), or one per block of `block` indices along axis (blocked: x's rank)."""
    t = ctx.tensor(p).cast("float32")
    dims = static_shape(ctx, t, "quantization parameter shape")
    if math.prod(dims) == 1:
        return t.reshape(())
    axis = norm_axis(axis, len(shape))
    if not block:
        return t.reshape(tuple(dims[0] if i == axis else 1 for i in range(len(shape))))
    t = t.unsqueeze(axis + 1).expand(dims[:axis + 1] + (block,) + dims[axis + 1:])
    t = t.reshape(dims[:axis] + (dims[axis] * block,) + dims[axis + 1:])
    return t.narrow(axis, 0, shape[axis])


def quantize(y: Tensor, elem_type: int, zero: Tensor | None, saturate: bool = True) -> Tensor:
    """x / scale (float32) as values of the quantized type: integers round half to even, add
    the zero point and saturate; float8 / float4 round to the type (float4 adds the zero
    point first; float8's must be 0)."""
    if elem_type in INT_RANGES:
        y = y.round()
        if zero is not None:
            y = y + zero
        return y.clamp(*INT_RANGES[elem_type]).cast("int32")
    if elem_type not in SMALL_FLOATS or elem_type == E8M0:
        raise OnnxImportError(f"QuantizeLinear: output type {elem_name(elem_type)} is not a "
                              "quantized type")
    if zero is not None and elem_type == 23:
        y = y + zero
    return round_small_float(y, elem_type, saturate)


def _zero_type(ctx: Context, node: Any, ins: list[Any], i: int, default: int) -> int:
    """The element type of the zero point ins[i] (the output type), else default."""
    if len(ins) > i and ins[i] is not None:
        et = elem_type_of(ctx, node.inputs[i], ins[i])
        if et is None:
            raise OnnxImportError(f"{ctx.node_name}: the element type of the zero point "
                                  f"{node.inputs[i]!r} is not known at import")
        return et
    return default


@op("QuantizeLinear", since=10)
def quantize_linear(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                    ) -> list[Tensor]:
    if attrs.get("precision", 1) not in (0, 1):
        raise OnnxImportError(f"{ctx.node_name}: precision {elem_name(attrs['precision'])} "
                              "is not supported (x / y_scale is computed in float32)")
    x = ctx.tensor(ins[0]).cast("float32")
    shape = static_shape(ctx, x)
    et = _zero_type(ctx, node, ins, 2, attrs.get("output_dtype") or 2)
    ctx.elem_types[node.outputs[0]] = et
    axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
    zero = _per_axis(ctx, ins[2], shape, axis, block) if len(ins) > 2 and ins[2] is not None \
        else None
    y = x / _per_axis(ctx, ins[1], shape, axis, block)
    return [quantize(y, et, zero, bool(attrs.get("saturate", 1)))]


@op("DequantizeLinear", since=10)
def dequantize_linear(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                      ) -> list[Tensor]:
    x = ctx.tensor(ins[0]).cast("float32")
    shape = static_shape(ctx, x)
    scale = ctx.tensor(ins[1])
    out = onnx_device_dtype(attrs["output_dtype"]) if attrs.get("output_dtype") else scale.dtype
    axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
    if len(ins) > 2 and ins[2] is not None and \
            elem_type_of(ctx, node.inputs[0], ins[0]) not in SMALL_FLOATS:
        x = x - _per_axis(ctx, ins[2], shape, axis, block)
    return [(x * _per_axis(ctx, scale, shape, axis, block)).cast(out)]


@op("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                            ) -> list[Tensor]:
    x = ctx.tensor(ins[0]).cast("float32")
    hi, lo = x.max().maximum(0.0), x.min().minimum(0.0)
    span = hi - lo
    scale = wt.where(span == 0, 1.0, span) / 255.0
    zero = (0.0 - lo / scale).clamp(0, 255).round()
    for name in node.outputs[::2]:
        ctx.elem_types[name] = 2
    y = ((x / scale).round() + zero).clamp(0, 255).cast("int32")
    return [y, scale, zero.cast("int32")]


# -- integer matmul and convolution ----------------------------------------------------------
def _minus_zero(x: Tensor, ctx: Context, zero: Any, per_dim: tuple[int, int] | None) -> Tensor:
    """x - zero; a zero point with more than one value lies along dim per_dim[0] of a rank
    per_dim[1] operand."""
    if zero is None:
        return x
    z = ctx.tensor(zero).cast("float32")
    n = math.prod(static_shape(ctx, z, "zero point shape"))
    if n == 1:
        return x - z.reshape(())
    if per_dim is None:
        return x - z
    dim, rank = per_dim
    return x - z.reshape(tuple(n if i == dim else 1 for i in range(rank)))


def _opt(ins: list[Any], i: int) -> Any:
    return ins[i] if len(ins) > i else None


def _int_matmul(ctx: Context, ins: list[Any], a: int, b: int, za: int, zb: int) -> Tensor:
    """(A - a_zero) @ (B - b_zero) in float32 (exact below 2**24); A's zero point may be per
    row, B's per column."""
    x, w = (ctx.tensor(ins[i]).cast("float32") for i in (a, b))
    x = _minus_zero(x, ctx, _opt(ins, za), (x.ndim - 2, x.ndim) if x.ndim >= 2 else None)
    w = _minus_zero(w, ctx, _opt(ins, zb), None)
    return (x @ w).round()


def _int_conv(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any], x: int, w: int,
              zx: int, zw: int, bias: Any = None) -> Tensor:
    """Conv of (X - x_zero) and (W - w_zero, per output channel) in float32, plus bias."""
    xs, ws = (ctx.tensor(ins[i]).cast("float32") for i in (x, w))
    xs = _minus_zero(xs, ctx, _opt(ins, zx), None)
    ws = _minus_zero(ws, ctx, _opt(ins, zw), (0, ws.ndim))
    extra = [ctx.tensor(bias).cast("float32")] if bias is not None else []
    return conv(ctx, node, [xs, ws, *extra], attrs)[0].round()


@op("MatMulInteger", since=10)
def matmul_integer(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                   ) -> list[Tensor]:
    return [_int_matmul(ctx, ins, 0, 1, 2, 3).cast("int32")]


@op("ConvInteger", since=10)
def conv_integer(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                 ) -> list[Tensor]:
    return [_int_conv(ctx, node, ins, attrs, 0, 1, 2, 3).cast("int32")]


def _requantize(ctx: Context, node: Any, acc: Tensor, scale: Tensor, ins: list[Any], zy: int,
                x_index: int) -> Tensor:
    """acc * scale + y_zero, rounded half to even and saturated to the output's type."""
    et = _zero_type(ctx, node, ins, zy, elem_type_of(ctx, node.inputs[x_index], ins[x_index])
                    or 2)
    ctx.elem_types[node.outputs[0]] = et
    y = acc * scale
    if _opt(ins, zy) is not None:
        y = y + ctx.tensor(ins[zy]).cast("float32").reshape(())
    return y.clamp(*INT_RANGES[et]).round().cast("int32")


def _scale(ctx: Context, v: Any, dim: int, rank: int) -> Tensor:
    """A scale as float32: one value, or one per index of dim of a rank-`rank` result."""
    t = ctx.tensor(v).cast("float32")
    n = math.prod(static_shape(ctx, t, "scale shape"))
    return t.reshape(()) if n == 1 else t.reshape(tuple(n if i == dim else 1
                                                        for i in range(rank)))


@op("QLinearMatMul", since=10)
def qlinear_matmul(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                   ) -> list[Tensor]:
    acc = _int_matmul(ctx, ins, 0, 3, 2, 5)
    r = acc.ndim            # A's scale per row, B's per column
    scale = _scale(ctx, ins[1], r - 2, r) * _scale(ctx, ins[4], r - 1, r) / \
        _scale(ctx, ins[6], 0, 0)
    return [_requantize(ctx, node, acc, scale, ins, 7, 0)]


@op("QLinearConv", since=10)
def qlinear_conv(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                 ) -> list[Tensor]:
    acc = _int_conv(ctx, node, ins, attrs, 0, 3, 2, 5, _opt(ins, 8))
    scale = _scale(ctx, ins[1], 0, 0) * _scale(ctx, ins[4], 1, acc.ndim) / \
        _scale(ctx, ins[6], 0, 0)                   # W's scale per output channel
    return [_requantize(ctx, node, acc, scale, ins, 7, 0)]


# -- BitCast ---------------------------------------------------------------------------------
_WIDTH = {1: 32, 6: 32, 12: 32, 2: 8, 3: 8, 9: 8, 4: 16, 5: 16, 10: 16, 7: 64, 11: 64, 13: 64}


def _host_bitcast(node: Any, ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.ascontiguousarray(ins[0]).view(ELEM_TYPES[attrs["to"]][1])]


@op("BitCast", since=26, host=_host_bitcast)
def bitcast(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    x = ctx.tensor(ins[0])
    src, dst = elem_type_of(ctx, node.inputs[0], ins[0]), attrs["to"]
    width = _WIDTH.get(src or 0)
    if width is None or width != _WIDTH.get(dst) or width == 64 or 10 in (src, dst):
        raise OnnxImportError(f"BitCast: {elem_name(src or 0)} -> {elem_name(dst)} is not "
                              "supported on the device (32-bit words, and 8/16-bit integers "
                              "and bool; float64/int64 are held as 32-bit values there)")
    ctx.elem_types[node.outputs[0]] = dst
    if width == 32:
        return [x.bitcast(onnx_device_dtype(dst))]
    if dst == 9:
        return [x != 0]
    v = x.cast("int32")                          # 8/16-bit integers: wrap into dst's range
    lo, hi = INT_RANGES[dst]
    return [wt.where(v > hi, v - (1 << width), wt.where(v < lo, v + (1 << width), v))]
