"""Elementwise rows: arithmetic, comparisons, logic, math functions, activations, Cast, Where,
Clip. Integer arithmetic with an ONNX twist (Div truncates, Mod's two forms) is composed."""
from __future__ import annotations

import operator
from collections.abc import Callable
from functools import reduce
from typing import Any

import numpy as np

from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context
from ..patterns import erf_gelu
from .common import lift, onnx_device_dtype, onnx_np_dtype, same_dtype, static_shape
from .quant import ROUNDED_CASTS, cast_to, elem_type_of, host_cast
from .registry import op


# -- host rules (numpy, ONNX's semantics: the reference evaluator's) ---------------------------
def _np_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        with np.errstate(all="ignore"):
            return np.trunc(a.astype(np.float64) / b).astype(a.dtype)
    return (a / b).astype(a.dtype)


def _np_mod(a: np.ndarray, b: np.ndarray, fmod: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        return (np.fmod(a, b) if fmod or a.dtype.kind == "f" else np.mod(a, b)).astype(a.dtype)


NP_BINARY: dict[str, Callable[..., Any]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": _np_div,
    "Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal, "And": np.logical_and, "Or": np.logical_or,
    "Xor": np.logical_xor, "BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
    "BitwiseXor": np.bitwise_xor,
}


def _host_binary(node: Any, ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    a, b = ins
    with np.errstate(all="ignore"):
        out = np.asarray(NP_BINARY[node.op_type](a, b))
    return [out if out.dtype == np.bool_ else out.astype(a.dtype)]


# -- binary arithmetic ---------------------------------------------------------------------
@op("Add", "Sub", "Mul", host=_host_binary)
def arith(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    a, b = same_dtype(*lift(ctx, *ins))
    gelu = erf_gelu(a, b) if node.op_type == "Mul" else None     # exports' erf GELU
    if gelu is not None:
        return [gelu]
    fn = {"Add": operator.add, "Sub": operator.sub, "Mul": operator.mul}[node.op_type]
    return [fn(a, b)]


@op("Div", host=_host_binary)
def div(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    a, b = same_dtype(*lift(ctx, *ins))
    q = a / b
    if a.dtype.is_float:
        return [q]
    return [_trunc(q).cast(a.dtype)]


def _trunc(x: Tensor) -> Tensor:
    return wt.where(x < 0, x.ceil(), x.floor())


@op("Mod", host=lambda node, ins, attrs: [_np_mod(ins[0], ins[1], attrs.get("fmod", 0))])
def mod(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    a, b = same_dtype(*lift(ctx, *ins))
    af, bf = a.cast("float32"), b.cast("float32")
    q = af / bf
    whole = _trunc(q) if attrs.get("fmod", 0) or a.dtype.is_float else q.floor()
    r = af - bf * whole
    return [r if a.dtype.is_float else r.cast(a.dtype)]


@op("Pow", host=lambda node, ins, attrs: [np.power(ins[0].astype(np.float64),
                                                   ins[1]).astype(ins[0].dtype)])
def pow_(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    a, b = lift(ctx, *ins)
    base = a if a.dtype.is_float else a.cast("float32")
    out = base ** b.cast(base.dtype)
    return [out if out.dtype == a.dtype else out.cast(a.dtype)]


@op("Max", "Min", "Sum", "Mean")
def variadic(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    ts = lift(ctx, *ins)
    ts = [ts[0]] + [same_dtype(ts[0], t)[1] for t in ts[1:]]
    fn = {"Max": Tensor.maximum, "Min": Tensor.minimum, "Sum": Tensor.__add__,
          "Mean": Tensor.__add__}[node.op_type]
    out = reduce(fn, ts)
    return [out / len(ts) if node.op_type == "Mean" else out]


# -- comparisons and logic -----------------------------------------------------------------
@op("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", host=_host_binary)
def compare(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    a, b = same_dtype(*lift(ctx, *ins))
    fn = {"Equal": operator.eq, "Less": operator.lt, "Greater": operator.gt,
          "LessOrEqual": operator.le, "GreaterOrEqual": operator.ge}[node.op_type]
    return [fn(a, b)]


@op("And", "Or", "Xor", host=_host_binary)
def logic(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    a, b = lift(ctx, *ins)
    fn = {"And": operator.mul, "Or": Tensor.maximum, "Xor": operator.ne}[node.op_type]
    return [fn(a, b)]


# bitwise: two's complement on the int32/uint32 the device holds (uint64 only below 2^32)
@op("BitwiseAnd", "BitwiseOr", "BitwiseXor", host=_host_binary)
def bitwise(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    a, b = same_dtype(*lift(ctx, *ins))
    fn = {"BitwiseAnd": operator.and_, "BitwiseOr": operator.or_,
          "BitwiseXor": operator.xor}[node.op_type]
    return [fn(a, b)]


@op("BitwiseNot", host=lambda node, ins, attrs: [np.invert(ins[0])])
def bitwise_not(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                ) -> list[Tensor]:
    (a,) = lift(ctx, *ins)
    return [~a]


def _left(attrs: dict[str, Any]) -> bool:
    return attrs["direction"] in (b"LEFT", "LEFT")


@op("BitShift", host=lambda node, ins, attrs: [
    (np.left_shift if _left(attrs) else np.right_shift)(ins[0], ins[1])])
def bit_shift(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    a, b = same_dtype(*lift(ctx, *ins))
    return [a << b if _left(attrs) else a >> b]


@op("Not", host=lambda node, ins, attrs: [np.logical_not(ins[0])])
def not_(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (a,) = lift(ctx, *ins)
    return [a == False]  # noqa: E712 - elementwise


# -- unary math ----------------------------------------------------------------------------
def _log1p(u: Tensor) -> Tensor:
    """log(1 + u) accurate for small u (Goldberg: log(w) * u / (w - 1), w = 1 + u)."""
    w = u + 1.0
    return wt.where(w == 1.0, u, w.log() * u / (w - 1.0))


def _softplus(x: Tensor) -> Tensor:
    return x.relu() + _log1p((-abs(x)).exp())


def _atan(x: Tensor) -> Tensor:
    """arctan to float32 precision (Cephes atanf): |x| reduced to [0, tan(pi/8)], odd poly."""
    t = abs(x)
    big, mid = t > 2.414213562373095, t > 0.4142135623730950
    r = wt.where(big, -1.0 / t, wt.where(mid, (t - 1.0) / (t + 1.0), t))
    base = wt.where(big, np.pi / 2, wt.where(mid, np.pi / 4, 0.0))
    z = r * r
    poly = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
            - 3.33329491539e-1) * z * r + r
    y = base + poly
    return wt.where(x < 0, -y, y)


def _asin(x: Tensor) -> Tensor:
    return _atan(x / ((1.0 - x) * (1.0 + x)).sqrt())


def _acos(x: Tensor) -> Tensor:
    """2 atan(sqrt((1 - x) / (1 + x))): no cancellation near x = 1, pi at x = -1."""
    return _atan(((1.0 - x) / (1.0 + x)).sqrt()) * 2.0


def _unary(fn: Any) -> Any:
    def build(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
        (x,) = lift(ctx, ins[0])
        return [fn(x, attrs)]
    return build


UNARY = {
    "Neg": lambda x, at: -x,
    "Abs": lambda x, at: abs(x),
    "Exp": lambda x, at: x.exp(),
    "Log": lambda x, at: x.log(),
    "Sqrt": lambda x, at: x.sqrt(),
    "Sin": lambda x, at: x.sin(),
    "Cos": lambda x, at: x.cos(),
    "Tan": lambda x, at: x.sin() / x.cos(),
    "Tanh": lambda x, at: x.tanh(),
    "Sigmoid": lambda x, at: x.sigmoid(),
    "Relu": lambda x, at: x.relu(),
    "Erf": lambda x, at: x.erf(),
    "Floor": lambda x, at: x.floor(),
    "Ceil": lambda x, at: x.ceil(),
    "Round": lambda x, at: x.round(),
    "Reciprocal": lambda x, at: 1.0 / x,
    "Sign": lambda x, at: (x > 0).cast(x.dtype) - (x < 0).cast(x.dtype),
    "Sinh": lambda x, at: (x.exp() - (-x).exp()) * 0.5,
    "Cosh": lambda x, at: (x.exp() + (-x).exp()) * 0.5,
    "Asinh": lambda x, at: (x + (x * x + 1.0).sqrt()).log(),
    "Acosh": lambda x, at: (x + (x * x - 1.0).sqrt()).log(),
    "Atanh": lambda x, at: ((1.0 + x) / (1.0 - x)).log() * 0.5,
    "Atan": lambda x, at: _atan(x),
    "Asin": lambda x, at: _asin(x),
    "Acos": lambda x, at: _acos(x),
    "IsNaN": lambda x, at: x != x,
    "Softplus": lambda x, at: _softplus(x),
    "Softsign": lambda x, at: x / (abs(x) + 1.0),
    "Elu": lambda x, at: wt.where(x > 0, x, ((x.minimum(0.0)).exp() - 1.0)
                                  * at.get("alpha", 1.0)),
    "Selu": lambda x, at: wt.where(x > 0, x, ((x.minimum(0.0)).exp() - 1.0)
                                   * at.get("alpha", 1.67326319217681884765625))
    * at.get("gamma", 1.05070102214813232421875),
    "Celu": lambda x, at: x.relu() + (((x / at.get("alpha", 1.0)).minimum(0.0)).exp() - 1.0)
    * at.get("alpha", 1.0),
    "LeakyRelu": lambda x, at: wt.where(x >= 0, x, x * at.get("alpha", 0.01)),
    "ThresholdedRelu": lambda x, at: wt.where(x > at.get("alpha", 1.0), x, x * 0.0),
    "HardSigmoid": lambda x, at: (x * at.get("alpha", 0.2) + at.get("beta", 0.5)).clamp(0, 1),
    "HardSwish": lambda x, at: x * (x * (1 / 6) + 0.5).clamp(0, 1),
    "Mish": lambda x, at: x * _softplus(x).tanh(),
    "Gelu": lambda x, at: x.gelu("tanh" if at.get("approximate", b"none") == b"tanh"
                                 else "none"),
    "Swish": lambda x, at: x * (x * at.get("alpha", 1.0)).sigmoid(),
}
NP_UNARY: dict[str, Callable[..., Any]] = {
    "Neg": np.negative, "Abs": np.abs, "Floor": np.floor,
    "Ceil": np.ceil, "Sqrt": np.sqrt, "Reciprocal": np.reciprocal}


def _host_unary(node: Any, ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.asarray(NP_UNARY[node.op_type](ins[0]))]


for _name, _fn in UNARY.items():
    op(_name, host=_host_unary if _name in NP_UNARY else None)(_unary(_fn))


@op("IsInf")
def isinf(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    if pos and neg:
        return [abs(x) == np.float32(np.inf)]
    if pos or neg:
        return [x == np.float32(np.inf if pos else -np.inf)]
    return [np.zeros(static_shape(ctx, x), np.bool_)]


@op("PRelu")
def prelu(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    x, slope = same_dtype(*lift(ctx, *ins))
    return [wt.where(x < 0, x * slope, x)]


@op("Shrink")
def shrink(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    lam, bias = attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
    zero = x * 0
    return [wt.where(x < -lam, x + bias, wt.where(x > lam, x - bias, zero))]


@op("Clip")
def clip(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    lo = ins[1] if len(ins) > 1 else attrs.get("min")
    hi = ins[2] if len(ins) > 2 else attrs.get("max")
    if lo is not None and not isinstance(lo, float):
        x = x.maximum(ctx.tensor(lo).cast(x.dtype))
    elif lo is not None:
        x = x.maximum(lo)
    if hi is not None and not isinstance(hi, float):
        x = x.minimum(ctx.tensor(hi).cast(x.dtype))
    elif hi is not None:
        x = x.minimum(hi)
    return [x]


# -- casts and selection -------------------------------------------------------------------
def _cast_mode(attrs: dict[str, Any]) -> tuple[bool, str]:
    """Cast's saturate and round_mode attributes (float8 and float8e8m0 targets)."""
    mode = attrs.get("round_mode", "up")
    return bool(attrs.get("saturate", 1)), mode.decode() if isinstance(mode, bytes) else mode


def _host_cast(node: Any, ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    if attrs["to"] in ROUNDED_CASTS:
        return [host_cast(ins[0], attrs["to"], *_cast_mode(attrs))]
    target = onnx_np_dtype(attrs["to"])
    x = ins[0]
    if x.dtype.kind == "f" and target.kind in "iu":
        with np.errstate(invalid="ignore"):
            return [np.trunc(x).astype(target)]
    return [x.astype(target)]


@op("Cast", host=_host_cast)
def cast(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    ctx.elem_types[node.outputs[0]] = attrs["to"]
    if attrs["to"] in ROUNDED_CASTS:
        return [cast_to(x, attrs["to"], *_cast_mode(attrs))]
    target = onnx_device_dtype(attrs["to"])
    if target == "bool":
        return [x != 0]
    return [x.cast(target)]


@op("CastLike", host=lambda node, ins, attrs: [ins[0].astype(ins[1].dtype)])
def cast_like(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    x, like = lift(ctx, *ins)
    to = elem_type_of(ctx, node.inputs[1], ins[1])
    if to in ROUNDED_CASTS:
        ctx.elem_types[node.outputs[0]] = to
        return [cast_to(x, to, *_cast_mode(attrs))]
    if like.dtype.name == "bool":
        return [x != 0]
    return [x.cast(like.dtype)]


@op("Where", host=lambda node, ins, attrs: [np.where(*ins)])
def where(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    c, a, b = lift(ctx, *ins)
    a, b = same_dtype(a, b)
    return [wt.where(c, a, b)]
