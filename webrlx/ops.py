"""The op table: one entry per op with its shape/dtype rule (the language-model ops' rules are
in ops_decoder.py, registered here). Reference and lowering rules live
in backends/reference.py (REFERENCE) and compiler/lower.py (LOWERINGS), keyed the same way."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import dtype as dt
from . import ops_decoder
from .shape import (
    Dim,
    Shape,
    ShapeError,
    broadcast_shapes,
    mul_dims,
    normalize_axes,
    normalize_axis,
    numel,
)

Infer = Callable[[list[Shape], list[dt.DType], dict[str, Any]], tuple[Shape, dt.DType]]


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: str        # "source", "elementwise", "reduce", "layout", "other"
    infer: Infer


OPS: dict[str, OpDef] = {}


def _register(name: str, kind: str, infer: Infer) -> None:
    OPS[name] = OpDef(name, kind, infer)


def _source(shapes, dtypes, attrs):  # noqa: ANN001 - sources are created by Graph directly
    raise AssertionError("sources are added by Graph.input/param/constant")


for _s in ("input", "param", "constant", "state"):
    _register(_s, "source", _source)

# ops that write into their input (by index) in place on GPUs; on a state input the written
# value persists to the next run (the reference device stores the op's result back)
UPDATES_INPUT: dict[str, int] = {}

# -- elementwise --------------------------------------------------------------------------
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "bitwise_and", "bitwise_or",
          "bitwise_xor", "shl", "shr")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
UNARY = ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
         "gelu", "silu", "erf", "floor", "ceil", "round", "bitwise_not")
FLOAT_ONLY = {"exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "gelu", "silu",
              "erf", "floor", "ceil", "round"}
# two's complement bit ops on int32/uint32; shift counts are taken mod 32 (as WGSL does)
INT_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "shl", "shr", "bitwise_not"}


def _binary(op: str) -> Infer:
    def infer(shapes, dtypes, attrs):
        shape = broadcast_shapes(*shapes, op=op)
        d = dt.result_dtype(*dtypes)
        if d == dt.bool_ and op not in ("maximum", "minimum", "mul"):
            raise ShapeError(f"{op}: not defined for bool operands; cast to int32 or float32")
        if op in INT_ONLY and not d.is_int:
            raise ShapeError(f"{op}: needs int32/uint32 operands, got {d}")
        if op == "div" and not d.is_float:
            d = dt.float32   # true division, as numpy
        return shape, d
    return infer


def _compare(op: str) -> Infer:
    def infer(shapes, dtypes, attrs):
        dt.result_dtype(*dtypes)
        return broadcast_shapes(*shapes, op=op), dt.bool_
    return infer


def _unary(op: str) -> Infer:
    def infer(shapes, dtypes, attrs):
        (d,) = dtypes
        if op in FLOAT_ONLY and not d.is_float:
            raise ShapeError(f"{op}: needs a float32/float16 operand, got {d}; cast it first")
        if op in INT_ONLY and not d.is_int:
            raise ShapeError(f"{op}: needs an int32/uint32 operand, got {d}")
        if op in ("neg", "abs") and d == dt.bool_:
            raise ShapeError(f"{op}: not defined for bool; cast to int32 first")
        if op == "gelu" and attrs.get("approximate", "none") not in ("none", "tanh"):
            raise ShapeError("gelu: approximate must be 'none' (erf) or 'tanh'")
        return shapes[0], d
    return infer


for _op in BINARY:
    _register(_op, "elementwise", _binary(_op))
for _op in COMPARE:
    _register(_op, "elementwise", _compare(_op))
for _op in UNARY:
    _register(_op, "elementwise", _unary(_op))


def _where(shapes, dtypes, attrs):
    if dtypes[0] != dt.bool_:
        raise ShapeError(f"where: condition must be bool, got {dtypes[0]}; compare first")
    return broadcast_shapes(*shapes, op="where"), dt.result_dtype(dtypes[1], dtypes[2])


def _cast(shapes, dtypes, attrs):
    return shapes[0], dt.as_dtype(attrs["dtype"])


def _bitcast(shapes, dtypes, attrs):
    d = dt.as_dtype(attrs["dtype"])
    words = {dt.float32, dt.int32, dt.uint32}
    if dtypes[0] not in words or d not in words:
        raise ShapeError(f"bitcast: reinterprets 32-bit words (float32, int32, uint32), got "
                         f"{dtypes[0]} -> {d}")
    return shapes[0], d


def _clamp(shapes, dtypes, attrs):
    if not dtypes[0].is_float or not attrs["lo"] <= attrs["hi"]:
        raise ShapeError(f"clamp: needs a float operand and lo <= hi, got {dtypes[0]}, "
                         f"lo={attrs['lo']}, hi={attrs['hi']}")
    return shapes[0], dtypes[0]


_register("clamp", "other", _clamp)
_register("where", "elementwise", _where)
_register("cast", "elementwise", _cast)
_register("bitcast", "elementwise", _bitcast)


# -- reductions ---------------------------------------------------------------------------
def _reduce_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    return tuple((1 if i in axes else d) for i, d in enumerate(shape)
                 if keepdims or i not in axes)


def _reduce(op: str) -> Infer:
    def infer(shapes, dtypes, attrs):
        (shape,), (d,) = shapes, dtypes
        axes = normalize_axes(attrs["axes"], len(shape), op)
        if d == dt.bool_:
            raise ShapeError(f"{op}: cast the bool operand to int32 or float32 first")
        if op == "mean" and not d.is_float:
            raise ShapeError(f"mean: needs a float operand, got {d}; cast it first")
        if any(shape[a] == 0 for a in axes) and op in ("max", "min"):
            raise ShapeError(f"{op}: zero-size reduction axis in shape {shape}")
        return _reduce_shape(shape, axes, attrs["keepdims"]), d
    return infer


for _op in ("sum", "mean", "max", "min", "prod"):
    _register(_op, "reduce", _reduce(_op))


def _argmax(shapes, dtypes, attrs):
    (shape,) = shapes
    axis = normalize_axis(attrs["axis"], len(shape), "argmax")
    return _reduce_shape(shape, (axis,), attrs["keepdims"]), dt.int32


_register("argmax", "reduce", _argmax)


def _rowwise(op: str) -> Infer:
    def infer(shapes, dtypes, attrs):
        if not dtypes[0].is_float:
            raise ShapeError(f"{op}: needs a float operand, got {dtypes[0]}")
        normalize_axis(attrs.get("axis", -1), len(shapes[0]), op)
        return shapes[0], dtypes[0]
    return infer


_register("softmax", "other", _rowwise("softmax"))
_register("log_softmax", "other", _rowwise("log_softmax"))


def _norm(op: str) -> Infer:
    def infer(shapes, dtypes, attrs):
        x = shapes[0]
        if not dtypes[0].is_float:
            raise ShapeError(f"{op}: needs a float operand, got {dtypes[0]}")
        if not x:
            raise ShapeError(f"{op}: needs at least one dim")
        for s, d in zip(shapes[1:], dtypes[1:]):
            if tuple(s) != (x[-1],):
                raise ShapeError(f"{op}: weight/bias must have shape ({x[-1]},), got {s}")
            if d != dtypes[0]:
                raise ShapeError(f"{op}: weight/bias dtype {d} must match input {dtypes[0]}")
        return x, dtypes[0]
    return infer


_register("layer_norm", "other", _norm("layer_norm"))
_register("rms_norm", "other", _norm("rms_norm"))


def _norm_grad(op: str) -> Infer:
    def infer(shapes, dtypes, attrs):
        x, dy = shapes[0], shapes[1]
        if tuple(dy) != tuple(x) or dtypes[1] != dtypes[0]:
            raise ShapeError(f"{op}: the output gradient {dtypes[1]}{list(dy)} must match the "
                             f"input {dtypes[0]}{list(x)}")
        return _norm(op)([x, *shapes[2:]], [dtypes[0], *dtypes[2:]], attrs)
    return infer


# d(norm(x) * w)/dx in one kernel per row: inputs (x, dy[, w]), attrs eps
_register("layer_norm_grad", "other", _norm_grad("layer_norm_grad"))
_register("rms_norm_grad", "other", _norm_grad("rms_norm_grad"))


def _cumsum(shapes, dtypes, attrs):
    normalize_axis(attrs["axis"], len(shapes[0]), "cumsum")
    if dtypes[0] == dt.bool_:
        raise ShapeError("cumsum: cast the bool operand to int32 first")
    return shapes[0], dtypes[0]


_register("cumsum", "other", _cumsum)


def _argtopk(shapes, dtypes, attrs):
    (shape,) = shapes
    axis = normalize_axis(attrs["axis"], len(shape), "topk")
    k, n = attrs["k"], shape[axis]
    if not isinstance(k, int) or k < 1 or (isinstance(n, int) and k > n):
        raise ShapeError(f"topk: k={k} must be in [1, {n}] for shape {shape} axis {axis}")
    return shape[:axis] + (k,) + shape[axis + 1:], dt.int32


_register("argtopk", "other", _argtopk)


# -- matmul -------------------------------------------------------------------------------
ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh")


def _matmul(shapes, dtypes, attrs):
    a, b = shapes[0], shapes[1]
    if len(a) < 1 or len(b) < 1:
        raise ShapeError(f"matmul: operands must have rank >= 1, got {a} and {b}")
    if not dtypes[0].is_float or dtypes[0] != dtypes[1]:
        raise ShapeError(f"matmul: operands must share a float dtype, got {dtypes[0]} and "
                         f"{dtypes[1]}; cast one of them")
    a2 = a if len(a) > 1 else (1,) + a
    b2 = b if len(b) > 1 else b + (1,)
    if a2[-1] != b2[-2]:
        raise ShapeError(f"matmul: inner dims differ: {a} @ {b} ({a2[-1]} vs {b2[-2]}); "
                         f"transpose one operand")
    batch = broadcast_shapes(a2[:-2], b2[:-2], op="matmul (batch dims)")
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    if len(shapes) == 3 and tuple(shapes[2]) != (b2[-1],):
        raise ShapeError(f"matmul: bias must have shape ({b2[-1]},), got {shapes[2]}")
    if attrs.get("activation", "none") not in ACTIVATIONS:
        raise ShapeError(f"matmul: activation must be one of {ACTIVATIONS}")
    if attrs.get("accumulate", "float32") != "float32":
        raise ShapeError("matmul: accumulate must be 'float32' (or omitted)")
    return out, dtypes[0]


_register("matmul", "other", _matmul)


# -- layout -------------------------------------------------------------------------------
def _reshape(shapes, dtypes, attrs):
    (src,) = shapes
    target = list(attrs["shape"])
    n = numel(src)
    if target.count(-1) > 1:
        raise ShapeError(f"reshape: at most one -1 in {tuple(target)}")
    if -1 in target:
        known: Dim = 1
        for d in target:
            if d != -1:
                known = mul_dims(known, d)
        target[target.index(-1)] = _div_dim(n, known, src, tuple(attrs["shape"]))
    if _sym_key(numel(tuple(target))) != _sym_key(n):
        raise ShapeError(f"reshape: {src} -> {tuple(target)} changes the element count "
                         f"({n} vs {numel(tuple(target))})")
    return tuple(target), dtypes[0]


def _sym_key(d: Dim) -> tuple:
    if isinstance(d, int):
        return (d,)
    parts = d.split("*")
    k = 1
    for p in parts:
        if p.isdigit():
            k *= int(p)
    return (k, *sorted(p for p in parts if not p.isdigit()))


def _div_dim(n: Dim, d: Dim, src: Shape, target: tuple) -> Dim:
    if isinstance(n, int) and isinstance(d, int):
        if d == 0 or n % d:
            raise ShapeError(f"reshape: cannot reshape {src} ({n} elements) to {target}")
        return n // d
    nk, dk = _sym_key(n), _sym_key(d)
    names = list(nk[1:])
    for s in dk[1:]:
        if s not in names:
            raise ShapeError(f"reshape: cannot infer -1 in {target} from {src}")
        names.remove(s)
    if nk[0] % dk[0]:
        raise ShapeError(f"reshape: cannot infer -1 in {target} from {src}")
    k = nk[0] // dk[0]
    if not names:
        return k
    return "*".join(([str(k)] if k != 1 else []) + names)


def _permute(shapes, dtypes, attrs):
    (src,) = shapes
    axes = tuple(attrs["axes"])
    if sorted(axes) != list(range(len(src))):
        raise ShapeError(f"permute: axes {axes} are not a permutation of range({len(src)})")
    return tuple(src[a] for a in axes), dtypes[0]


def _expand(shapes, dtypes, attrs):
    (src,) = shapes
    target = tuple(attrs["shape"])
    if len(target) < len(src) or broadcast_shapes(src, target, op="expand") != target:
        raise ShapeError(f"expand: cannot broadcast {src} to {target}")
    return target, dtypes[0]


def _slice(shapes, dtypes, attrs):
    (src,) = shapes
    starts, stops = attrs["starts"], attrs["stops"]
    out = []
    for d, a, b in zip(src, starts, stops):
        if isinstance(d, str):
            if (a, b) != (0, None):
                raise ShapeError(f"slice: cannot slice the symbolic dim {d!r}")
            out.append(d)
            continue
        b = d if b is None else b
        if not 0 <= a <= b <= d:
            raise ShapeError(f"slice: range [{a}:{b}] is out of bounds for dim {d} of {src}")
        out.append(b - a)
    return tuple(out), dtypes[0]


def _concat(shapes, dtypes, attrs):
    rank = len(shapes[0])
    axis = normalize_axis(attrs["axis"], rank, "concat")
    total: Dim = 0
    for s, d in zip(shapes, dtypes):
        if len(s) != rank or any(s[i] != shapes[0][i] for i in range(rank) if i != axis):
            raise ShapeError(f"concat: shapes {shapes} differ outside axis {axis}")
        if d != dtypes[0]:
            raise ShapeError(f"concat: dtypes differ ({d} vs {dtypes[0]}); cast first")
        if isinstance(s[axis], str):
            raise ShapeError(f"concat: cannot concatenate along the symbolic dim {s[axis]!r}")
        total += s[axis]
    return shapes[0][:axis] + (total,) + shapes[0][axis + 1:], dtypes[0]


def _gather(shapes, dtypes, attrs):
    x, idx = shapes
    if dtypes[1] not in (dt.int32, dt.uint32):
        raise ShapeError(f"gather: indices must be int32/uint32, got {dtypes[1]}")
    axis = normalize_axis(attrs["axis"], len(x), "gather")
    return x[:axis] + tuple(idx) + x[axis + 1:], dtypes[0]


def _take_along_axis(shapes, dtypes, attrs):
    x, idx = shapes
    axis = normalize_axis(attrs["axis"], len(x), "take_along_axis")
    if dtypes[1] not in (dt.int32, dt.uint32):
        raise ShapeError(f"take_along_axis: indices must be int32/uint32, got {dtypes[1]}")
    if len(idx) != len(x) or any(idx[i] != x[i] for i in range(len(x)) if i != axis):
        raise ShapeError(f"take_along_axis: indices {idx} must match {x} outside axis {axis}")
    return tuple(idx), dtypes[0]


_register("reshape", "layout", _reshape)
_register("permute", "layout", _permute)
_register("expand", "layout", _expand)
_register("slice", "layout", _slice)
_register("concat", "layout", _concat)
def _scatter_set(shapes, dtypes, attrs):
    target, idx, vals = shapes
    if len(target) != 1 or len(idx) != 1 or tuple(vals) != tuple(idx):
        raise ShapeError(f"scatter_set: target must be 1-D and indices/values 1-D of one "
                         f"length, got {shapes}")
    if dtypes[1] != dt.int32 or dtypes[2] != dtypes[0]:
        raise ShapeError(f"scatter_set: indices must be int32 and values {dtypes[0]}, got "
                         f"{dtypes[1]}, {dtypes[2]}")
    return shapes[0], dtypes[0]


_register("scatter_set", "other", _scatter_set)
UPDATES_INPUT["scatter_set"] = 0


def _scatter_add(shapes, dtypes, attrs):
    target, idx, vals = shapes
    if len(idx) != 1 or len(target) < 1 or tuple(vals) != tuple(idx) + tuple(target[1:]):
        raise ShapeError(f"scatter_add: needs target (n, ...), indices (m,) and values "
                         f"(m, ...) with target's trailing dims, got {shapes}")
    if dtypes[1] != dt.int32 or dtypes[0] != dt.float32 or dtypes[2] != dt.float32:
        raise ShapeError(f"scatter_add: indices must be int32 and target/values float32, got "
                         f"{dtypes}")
    return shapes[0], dtypes[0]


# out = target with values[i] added at row indices[i] (duplicates sum): gather's gradient
_register("scatter_add", "other", _scatter_add)


def _assign(shapes, dtypes, attrs):
    if tuple(shapes[0]) != tuple(shapes[1]) or dtypes[0] != dtypes[1]:
        raise ShapeError(f"assign: the value must have the target's shape and dtype "
                         f"{shapes[0]} {dtypes[0]}, got {shapes[1]} {dtypes[1]}")
    return shapes[0], dtypes[0]


# target = value, in place: the optimizers' update of a param or state (train_step)
_register("assign", "other", _assign)
UPDATES_INPUT["assign"] = 0
_register("gather", "other", _gather)
_register("take_along_axis", "other", _take_along_axis)


# -- convolution and pooling (NCHW) ---------------------------------------------------------
def _conv_out(size: Dim, k: int, stride: int, pad: int, dil: int, op: str) -> int:
    if not isinstance(size, int):
        raise ShapeError(f"{op}: spatial dims must be static, got {size!r}")
    out = (size + 2 * pad - dil * (k - 1) - 1) // stride + 1
    if out < 1:
        raise ShapeError(f"{op}: kernel {k} (dilation {dil}) does not fit input {size} "
                         f"with padding {pad}")
    return out


def _conv2d(shapes, dtypes, attrs):
    x, w = shapes[0], shapes[1]
    if len(x) != 4 or len(w) != 4:
        raise ShapeError(f"conv2d: input (N,C,H,W) and weight (O,C/groups,KH,KW), got {x}, {w}")
    g = attrs["groups"]
    if x[1] != w[1] * g or w[0] % g:
        raise ShapeError(f"conv2d: channels {x[1]} vs weight {w} with groups={g} do not match")
    if len(shapes) == 3 and tuple(shapes[2]) != (w[0],):
        raise ShapeError(f"conv2d: bias must have shape ({w[0]},), got {shapes[2]}")
    if not dtypes[0].is_float or dtypes[1] != dtypes[0]:
        raise ShapeError(f"conv2d: needs float operands of one dtype, got {dtypes}")
    (sh, sw), (ph, pw), (dh, dw) = attrs["stride"], attrs["padding"], attrs["dilation"]
    oh = _conv_out(x[2], w[2], sh, ph, dh, "conv2d")
    ow = _conv_out(x[3], w[3], sw, pw, dw, "conv2d")
    return (x[0], w[0], oh, ow), dtypes[0]


def _conv2d_grad_input(shapes, dtypes, attrs):
    dy, w = shapes
    n, _, oh, ow = dy
    h, wd = attrs["input_size"]
    return (n, w[1] * attrs["groups"], h, wd), _f32_only("conv2d_grad_input", dtypes)


def _conv2d_grad_weight(shapes, dtypes, attrs):
    dy, x = shapes
    kh, kw = attrs["kernel"]
    return (dy[1], x[1] // attrs["groups"], kh, kw), _f32_only("conv2d_grad_weight", dtypes)


def _pool2d_grad(shapes, dtypes, attrs):
    return shapes[1], _f32_only("pool2d_grad", dtypes)


def _f32_only(op: str, dtypes: list[dt.DType]) -> dt.DType:
    if any(d != dt.float32 for d in dtypes):
        raise ShapeError(f"{op}: float32 operands only, got {dtypes}")
    return dt.float32


# gradients of conv2d (input: a transposed convolution; weight) and of pooling (autodiff.py)
_register("conv2d_grad_input", "other", _conv2d_grad_input)
_register("conv2d_grad_weight", "other", _conv2d_grad_weight)
_register("max_pool2d_grad", "other", _pool2d_grad)
_register("avg_pool2d_grad", "other", _pool2d_grad)


def _pool2d(op: str) -> Infer:
    def infer(shapes, dtypes, attrs):
        (x,) = shapes
        if len(x) != 4:
            raise ShapeError(f"{op}: input must be (N,C,H,W), got {x}")
        (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
        if ph > kh // 2 or pw > kw // 2:
            raise ShapeError(f"{op}: padding {attrs['padding']} must be at most half the kernel")
        return (x[0], x[1], _conv_out(x[2], kh, sh, ph, 1, op),
                _conv_out(x[3], kw, sw, pw, 1, op)), dtypes[0]
    return infer


_register("conv2d", "other", _conv2d)
_register("max_pool2d", "other", _pool2d("max_pool2d"))
_register("avg_pool2d", "other", _pool2d("avg_pool2d"))


# -- fused attention ------------------------------------------------------------------------
def _attention(shapes, dtypes, attrs):
    q, k, v = shapes[:3]
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise ShapeError(f"attention: q, k, v must be (batch, heads, seq, head_dim), "
                         f"got {q}, {k}, {v}")
    if k != v or q[:2] != k[:2] or q[3] != k[3]:
        raise ShapeError(f"attention: incompatible q {q}, k {k}, v {v}")
    if len(shapes) == 4 and (len(shapes[3]) != 2 or shapes[3][0] != q[0]
                             or shapes[3][1] != k[2]):
        raise ShapeError(f"attention: mask must be (batch, kv_seq) = ({q[0]}, {k[2]}), "
                         f"got {shapes[3]}")
    if not dtypes[0].is_float:
        raise ShapeError("attention: needs float q/k/v")
    return q, dtypes[0]


_register("attention", "other", _attention)


# the language-model ops: quantized weights, rope, KV cache, sampling (ops_decoder.py)
for _name, _kind, _infer in ops_decoder.RULES:
    _register(_name, _kind, _infer)
UPDATES_INPUT.update(ops_decoder.UPDATES)
