"""The user-facing builder: Graph (declare inputs, params, constants) and Tensor, whose
numpy-like methods record nodes in the graph IR (graph.py)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import numpy as np

from . import dtype as dt
from . import graph as ir
from .shape import Dim, Shape, ShapeError, normalize_axis


class Graph(ir.Graph):
    """A tensor graph: declare inputs, params and constants, then build with Tensor methods."""

    def input(self, name: str, shape: Iterable[Dim] | Dim, dtype: Any = "float32") -> Tensor:
        """Declare a run-time input; string dims are symbols bound from the fed arrays.

        Args:
            name: the key of this input in `run` feeds.
            shape: ints and symbol names, e.g. ("batch", 784).
            dtype: float32 (default), float16, int32, uint32 or bool.
        """
        return Tensor(self, self.add_input(name, shape, dtype).id)

    def param(self, name: str, shape: Iterable[Dim] | Dim, dtype: Any = "float32") -> Tensor:
        """Declare a weight set once with `Executable.set_params` and kept on the device.

        Args:
            name: the key of this param in `set_params`.
            shape: static ints (params cannot have symbolic dims).
            dtype: float32 (default), float16, int32, uint32 or bool.
        """
        return Tensor(self, self.add_param(name, shape, dtype).id)

    def state(self, name: str, shape: Iterable[Dim] | Dim, dtype: Any = "float32") -> Tensor:
        """Declare a state: a device buffer kept across runs (zeros until written), updated in
        place by ops like nn.cache_write. Read it with `Executable.read_state`.

        Args:
            name: the state's name.
            shape: static ints.
            dtype: float32 (default), float16, int32, uint32 or bool.
        """
        return Tensor(self, self.add_state(name, shape, dtype).id)

    def constant(self, value: Any, dtype: Any = None) -> Tensor:
        """Embed a numpy array (or scalar) in the graph."""
        return Tensor(self, self.add_constant(value, dtype).id)



class Tensor:
    """A value in a Graph; operations on it append nodes and return new Tensors."""

    __array_priority__ = 100   # numpy scalars/arrays defer to our reflected operators

    def __init__(self, graph: ir.Graph, node_id: int) -> None:
        self.graph = graph
        self.id = node_id

    # -- metadata ---------------------------------------------------------------------------
    @property
    def node(self):  # noqa: ANN201
        """The graph Node this tensor is the output of."""
        return self.graph.nodes[self.id]

    @property
    def shape(self) -> Shape:
        """The shape: ints and symbolic dim names."""
        return self.node.shape

    @property
    def dtype(self) -> dt.DType:
        """The element type."""
        return self.node.dtype

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Tensor(%{self.id} {self.node.op}, shape={self.shape}, dtype={self.dtype})"

    __hash__ = object.__hash__

    # -- helpers ------------------------------------------------------------------------------
    def _op(self, op: str, *others: Tensor, **attrs: Any) -> Tensor:
        node = self.graph.add(op, (self.id, *(o.id for o in others)), **attrs)
        return Tensor(self.graph, node.id)

    def _lift(self, x: Any, op: str = "operand") -> Tensor:
        """Turn a Python/numpy scalar or array into a constant matching our dtype family."""
        if isinstance(x, Tensor):
            if x.graph is not self.graph:
                raise ValueError("webrlx: tensors from different graphs cannot be combined")
            return x
        try:
            arr = np.asarray(x)
        except ValueError as e:      # ragged nested lists
            raise TypeError(f"{op}: operand {x!r} is not a Tensor, a number or a "
                            f"rectangular numeric array ({e})") from None
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"{op}: operand {x!r} ({type(x).__name__}) is not a Tensor, a "
                            f"number or a numeric array")
        if arr.dtype == np.bool_:
            target = dt.bool_
        elif arr.dtype.kind == "f" or self.dtype.is_float:
            target = self.dtype if self.dtype.is_float else dt.float32
        else:
            target = self.dtype if self.dtype.is_int else dt.int32
        return _constant(self.graph, arr.astype(target.np_dtype))

    def _binary(self, op: str, other: Any, reverse: bool = False) -> Tensor:
        o = self._lift(other, op)
        return o._op(op, self) if reverse else self._op(op, o)

    # -- arithmetic ---------------------------------------------------------------------------
    def __add__(self, o: Any) -> Tensor: return self._binary("add", o)
    def __radd__(self, o: Any) -> Tensor: return self._binary("add", o, True)
    def __sub__(self, o: Any) -> Tensor: return self._binary("sub", o)
    def __rsub__(self, o: Any) -> Tensor: return self._binary("sub", o, True)
    def __mul__(self, o: Any) -> Tensor: return self._binary("mul", o)
    def __rmul__(self, o: Any) -> Tensor: return self._binary("mul", o, True)
    def __truediv__(self, o: Any) -> Tensor: return self._binary("div", o)
    def __rtruediv__(self, o: Any) -> Tensor: return self._binary("div", o, True)
    def __pow__(self, o: Any) -> Tensor: return self._binary("pow", o)
    def __rpow__(self, o: Any) -> Tensor: return self._binary("pow", o, True)
    def __neg__(self) -> Tensor: return self._op("neg")
    def __abs__(self) -> Tensor: return self._op("abs")
    def __and__(self, o: Any) -> Tensor: return self._binary("bitwise_and", o)
    def __rand__(self, o: Any) -> Tensor: return self._binary("bitwise_and", o, True)
    def __or__(self, o: Any) -> Tensor: return self._binary("bitwise_or", o)
    def __ror__(self, o: Any) -> Tensor: return self._binary("bitwise_or", o, True)
    def __xor__(self, o: Any) -> Tensor: return self._binary("bitwise_xor", o)
    def __rxor__(self, o: Any) -> Tensor: return self._binary("bitwise_xor", o, True)
    def __lshift__(self, o: Any) -> Tensor: return self._binary("shl", o)
    def __rshift__(self, o: Any) -> Tensor: return self._binary("shr", o)
    def __invert__(self) -> Tensor: return self._op("bitwise_not")
    def __matmul__(self, o: Any) -> Tensor: return self.matmul(o)
    def __rmatmul__(self, o: Any) -> Tensor: return self._lift(o, "matmul").matmul(self)

    def maximum(self, o: Any) -> Tensor:
        """Elementwise maximum with another tensor or scalar (broadcasting)."""
        return self._binary("maximum", o)
    def minimum(self, o: Any) -> Tensor:
        """Elementwise minimum with another tensor or scalar (broadcasting)."""
        return self._binary("minimum", o)

    # -- comparisons (elementwise, like numpy) --------------------------------------------------
    def __eq__(self, o: Any) -> Tensor: return self._binary("eq", o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Tensor: return self._binary("ne", o)  # type: ignore[override]
    def __lt__(self, o: Any) -> Tensor: return self._binary("lt", o)
    def __le__(self, o: Any) -> Tensor: return self._binary("le", o)
    def __gt__(self, o: Any) -> Tensor: return self._binary("gt", o)
    def __ge__(self, o: Any) -> Tensor: return self._binary("ge", o)

    def __bool__(self) -> bool:
        raise TypeError("webrlx: a Tensor has no truth value while the graph is being built; "
                        "use wr.where(cond, a, b) for a data-dependent choice")

    # -- unary --------------------------------------------------------------------------------
    def exp(self) -> Tensor:
        """Elementwise e ** x."""
        return self._op("exp")
    def log(self) -> Tensor:
        """Elementwise natural logarithm."""
        return self._op("log")
    def sqrt(self) -> Tensor:
        """Elementwise square root."""
        return self._op("sqrt")
    def rsqrt(self) -> Tensor:
        """Elementwise 1 / sqrt(x)."""
        return self._op("rsqrt")
    def sin(self) -> Tensor:
        """Elementwise sine."""
        return self._op("sin")
    def cos(self) -> Tensor:
        """Elementwise cosine."""
        return self._op("cos")
    def tanh(self) -> Tensor:
        """Elementwise hyperbolic tangent."""
        return self._op("tanh")
    def sigmoid(self) -> Tensor:
        """Elementwise 1 / (1 + e ** -x)."""
        return self._op("sigmoid")
    def relu(self) -> Tensor:
        """Elementwise max(x, 0)."""
        return self._op("relu")
    def silu(self) -> Tensor:
        """Elementwise x * sigmoid(x)."""
        return self._op("silu")
    def erf(self) -> Tensor:
        """Elementwise error function."""
        return self._op("erf")
    def floor(self) -> Tensor:
        """Elementwise floor."""
        return self._op("floor")
    def ceil(self) -> Tensor:
        """Elementwise ceiling."""
        return self._op("ceil")
    def round(self) -> Tensor:
        """Elementwise round half to even (as numpy)."""
        return self._op("round")
    def abs(self) -> Tensor:
        """Elementwise absolute value."""
        return self._op("abs")
    def neg(self) -> Tensor:
        """Elementwise negation."""
        return self._op("neg")

    def gelu(self, approximate: str = "none") -> Tensor:
        """GELU with the exact erf form ("none") or the tanh approximation ("tanh")."""
        return self._op("gelu", approximate=approximate)

    def clamp(self, lo: float, hi: float) -> Tensor:
        """Elementwise numpy.clip(x, lo, hi) with scalar bounds (NaN stays NaN)."""
        for name, v in (("lo", lo), ("hi", hi)):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise TypeError(f"clamp: {name} must be a number, got {type(v).__name__} {v!r}")
        return self._op("clamp", lo=float(lo), hi=float(hi))

    def cast(self, dtype: Any) -> Tensor:
        """Convert to dtype (float -> int truncates toward zero, like numpy astype)."""
        d = dt.as_dtype(dtype)
        return self if d == self.dtype else self._op("cast", dtype=d.name)

    astype = cast

    def bitcast(self, dtype: Any) -> Tensor:
        """Reinterpret the bits of each 32-bit element as dtype (float32, int32, uint32)."""
        d = dt.as_dtype(dtype)
        return self if d == self.dtype else self._op("bitcast", dtype=d.name)

    # -- reductions ---------------------------------------------------------------------------
    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Sum over axis (all axes when None), as numpy.sum."""
        return self._op("sum", axes=_axes(axis), keepdims=keepdims)

    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Mean over axis (all axes when None), as numpy.mean."""
        return self._op("mean", axes=_axes(axis), keepdims=keepdims)

    def max(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Maximum over axis (all axes when None), as numpy.max."""
        return self._op("max", axes=_axes(axis), keepdims=keepdims)

    def min(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Minimum over axis (all axes when None), as numpy.min."""
        return self._op("min", axes=_axes(axis), keepdims=keepdims)

    def prod(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """Product over axis (all axes when None), as numpy.prod."""
        return self._op("prod", axes=_axes(axis), keepdims=keepdims)

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """Index of the first maximum along axis (None: over the flattened tensor)."""
        if axis is None:
            return self.reshape((-1,))._op("argmax", axis=0, keepdims=False)
        return self._op("argmax", axis=axis, keepdims=keepdims)

    def softmax(self, axis: int = -1) -> Tensor:
        """Softmax over axis: exp(x - max) / sum."""
        return self._op("softmax", axis=axis)

    def log_softmax(self, axis: int = -1) -> Tensor:
        """Log-softmax over axis: x - max - log(sum(exp(x - max)))."""
        return self._op("log_softmax", axis=axis)

    def cumsum(self, axis: int = -1) -> Tensor:
        """Cumulative sum along axis, as numpy.cumsum."""
        return self._op("cumsum", axis=axis)

    def topk(self, k: int, axis: int = -1) -> tuple[Tensor, Tensor]:
        """Return (values, indices) of the k largest along axis, largest first."""
        idx = self._op("argtopk", k=k, axis=axis)
        return self.take_along_axis(idx, axis), idx

    # -- matmul -------------------------------------------------------------------------------
    def matmul(self, other: Any, bias: Tensor | None = None, activation: str = "none",
               accumulate: str | None = None) -> Tensor:
        """[..., M, K] @ [..., K, N] with broadcast batch dims; optional fused bias + activation.

        accumulate="float32" sums float16 products in float32 (slower, more accurate);
        by default float16 operands accumulate in float16 where the device has shader-f16.
        """
        o = self._lift(other, "matmul")
        extra = (bias,) if bias is not None else ()
        attrs = {"accumulate": accumulate} if accumulate else {}
        return self._op("matmul", o, *extra, activation=activation, **attrs)

    # -- layout -------------------------------------------------------------------------------
    def reshape(self, *shape: Any) -> Tensor:
        """A view with another shape of the same size (one dim may be -1)."""
        target = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        if tuple(target) == self.shape:
            return self
        return self._op("reshape", shape=tuple(target))

    def permute(self, *axes: Any) -> Tensor:
        """Reorder the dims: result dim i is this tensor's dim axes[i]."""
        given = axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes
        axes = tuple(normalize_axis(a, self.ndim, "permute") for a in given)
        if axes == tuple(range(self.ndim)):
            return self
        return self._op("permute", axes=axes)

    def transpose(self, *axes: Any) -> Tensor:
        """Reverse the axes (no args), swap two axes (two ints), or permute (a full tuple)."""
        if not axes:
            return self.permute(tuple(reversed(range(self.ndim))))
        if len(axes) == 2 and all(isinstance(a, int) for a in axes) and self.ndim != 2:
            perm = list(range(self.ndim))
            a, b = (normalize_axis(x, self.ndim, "transpose") for x in axes)
            perm[a], perm[b] = perm[b], perm[a]
            return self.permute(tuple(perm))
        return self.permute(*axes)

    @property
    def T(self) -> Tensor:  # noqa: N802 - numpy's name
        """The transpose: all dims reversed, as numpy's .T."""
        return self.transpose()

    def expand(self, *shape: Any) -> Tensor:
        """Broadcast to a larger shape (numpy.broadcast_to); size-1 dims repeat."""
        target = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        target = tuple(self.shape[i - len(target) + self.ndim] if d == -1 else d
                       for i, d in enumerate(target))
        if target == self.shape:
            return self
        return self._op("expand", shape=target)

    broadcast_to = expand

    def unsqueeze(self, axis: int) -> Tensor:
        """Insert a size-1 dim at axis."""
        axis = axis % (self.ndim + 1)
        return self.reshape(self.shape[:axis] + (1,) + self.shape[axis:])

    def squeeze(self, axis: int) -> Tensor:
        """Remove the size-1 dim at axis."""
        axis = normalize_axis(axis, self.ndim, "squeeze")
        if self.shape[axis] != 1:
            raise ShapeError(f"squeeze: axis {axis} of {self.shape} is not 1")
        return self.reshape(self.shape[:axis] + self.shape[axis + 1:])

    def narrow(self, axis: int, start: int, length: int) -> Tensor:
        """Return elements [start, start + length) along axis."""
        axis = normalize_axis(axis, self.ndim, "narrow")
        starts = [0] * self.ndim
        stops: list[int | None] = [None] * self.ndim
        starts[axis], stops[axis] = start, start + length
        return self._op("slice", starts=tuple(starts), stops=tuple(stops))

    def __getitem__(self, key: Any) -> Tensor:
        """Basic indexing with ints, slices of step 1, None and Ellipsis."""
        key = key if isinstance(key, tuple) else (key,)
        if Ellipsis in key:
            i = key.index(Ellipsis)
            fill = self.ndim - (len(key) - 1 - key.count(None))
            key = key[:i] + (slice(None),) * fill + key[i + 1:]
        starts: list[int] = []
        stops: list[int | None] = []
        out_shape: list[Dim] = []
        dim = 0
        for k in key:
            if k is None:
                out_shape.append(1)
                continue
            if dim >= self.ndim:
                raise ShapeError(f"getitem: too many indices for shape {self.shape}")
            n = self.shape[dim]
            if isinstance(k, (int, np.integer)):
                if not isinstance(n, int):
                    raise ShapeError(f"getitem: cannot index the symbolic dim {n!r}")
                i = int(k) + n if k < 0 else int(k)
                if not 0 <= i < n:
                    raise ShapeError(f"getitem: index {k} is out of range for dim {n}")
                starts.append(i)
                stops.append(i + 1)
            elif isinstance(k, slice):
                if k.step not in (None, 1):
                    raise ShapeError("getitem: only step 1 slices are supported")
                if isinstance(n, str):
                    if (k.start, k.stop) not in ((None, None), (0, None)):
                        raise ShapeError(f"getitem: cannot slice the symbolic dim {n!r}")
                    starts.append(0)
                    stops.append(None)
                    out_shape.append(n)
                else:
                    a, b, _ = k.indices(n)
                    b = max(a, b)
                    starts.append(a)
                    stops.append(b)
                    out_shape.append(b - a)
            else:
                raise TypeError(f"getitem: unsupported index {k!r}; use gather for tensors")
            dim += 1
        starts += [0] * (self.ndim - dim)
        stops += [None] * (self.ndim - dim)
        out_shape += list(self.shape[dim:])
        t = self
        if any(a != 0 for a in starts) or any(b is not None and b != n
                                              for b, n in zip(stops, self.shape)):
            t = self._op("slice", starts=tuple(starts), stops=tuple(stops))
        return t.reshape(tuple(out_shape))

    def gather(self, indices: Any, axis: int = 0) -> Tensor:
        """np.take(x, indices, axis): rows picked by an int32 index tensor (embedding lookup)."""
        idx = indices if isinstance(indices, Tensor) else \
            _constant(self.graph, np.asarray(indices, np.int32))
        return self._op("gather", idx, axis=axis)

    take = gather

    def scatter_set(self, indices: Tensor, values: Tensor) -> Tensor:
        """self[indices] = values for a 1-D tensor, IN PLACE on GPUs (use it on a state:
        nothing may read the old value afterwards); out-of-range indices are skipped."""
        return self._op("scatter_set", indices, values)

    def scatter_add(self, indices: Tensor, values: Tensor) -> Tensor:
        """A copy of self (n, ...) with values[i] added to row indices[i] (duplicates sum;
        out-of-range indices skipped): the gradient of gather. float32."""
        return self._op("scatter_add", indices, values)

    def assign(self, value: Any) -> Tensor:
        """self = value IN PLACE, for a param or a state (what optimizers do to weights): the
        value persists to the next run. Nothing may read the old value afterwards; value has
        self's shape and dtype."""
        src = self.node
        if src.op not in ("param", "state"):
            raise ValueError(f"assign: the target must be a param or a state, got "
                             f"%{src.id} {src.op}")
        return self._op("assign", self._lift(value, "assign"))

    def take_along_axis(self, indices: Tensor, axis: int) -> Tensor:
        """numpy.take_along_axis: pick along axis by an index tensor of the same rank."""
        return self._op("take_along_axis", indices, axis=axis)


def _constant(graph: ir.Graph, value: Any) -> Tensor:
    return Tensor(graph, graph.add_constant(value).id)


def _axes(axis: int | Sequence[int] | None) -> tuple[int, ...] | None:
    if axis is None:
        return None
    if isinstance(axis, Iterable) and not isinstance(axis, (str, bytes)):
        return tuple(axis)
    return (cast(int, axis),)   # one axis (the op checks that it is an int and in range)



def where(cond: Tensor, a: Any, b: Any) -> Tensor:
    """Elementwise cond ? a : b with numpy broadcasting."""
    if not isinstance(cond, Tensor):
        raise TypeError("where: cond must be a Tensor")
    ta = a if isinstance(a, Tensor) else None
    tb = b if isinstance(b, Tensor) else None
    ref = ta if ta is not None else tb
    if ref is None:
        ta = _constant(cond.graph, np.float32(a))
        tb = _constant(cond.graph, np.float32(b))
    else:
        ta = ref._lift(a, "where")
        tb = ref._lift(b, "where")
    return cond._op("where", ta, tb)


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis."""
    if not tensors:
        raise ValueError("concat: needs at least one tensor")
    if len(tensors) == 1:
        return tensors[0]
    return tensors[0]._op("concat", *tensors[1:], axis=axis)
