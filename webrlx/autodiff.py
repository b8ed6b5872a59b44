"""Reverse-mode autodiff on the graph: `grad(loss, wrt)` appends the gradient nodes of a scalar
loss and returns them as Tensors. One VJP rule per op lives in VJP (op -> rule), beside the op
table (ops.py), the reference rules (reference.py) and the lowerings (compiler/).

A rule gets the node, its inputs and output as Tensors and the gradient of the output, and
returns one gradient per input (None where none flows: integer inputs, indices, bools). Rules
are written with graph ops, so gradients compile, fuse and run on every backend like any other
graph. Broadcasting ops sum their gradients back over the broadcast axes (`unbroadcast`).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from .graph import Node
from .ops import COMPARE, OPS
from .shape import Shape
from .tensor import Tensor, concat, where

Rule = Callable[[Node, list[Tensor], Tensor, Tensor], list["Tensor | None"]]
VJP: dict[str, Rule] = {}

# ops no gradient passes through (their outputs are indices, masks or integers)
NOT_DIFFERENTIABLE = {*COMPARE, "argmax", "argtopk", "floor", "ceil", "round", "sample",
                      "qgather", "qmatmul", "scatter_set"}


class GradError(ValueError):
    """A gradient cannot be formed: the message names the op and why."""


def rule(*ops: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for op in ops:
            VJP[op] = fn
        return fn
    return register


# -- helpers ------------------------------------------------------------------------------------
def unbroadcast(g: Tensor, shape: Shape) -> Tensor:
    """Sum g over the axes that broadcasting added or stretched, back to `shape`."""
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, (d, s) in enumerate(zip(shape, g.shape)) if d == 1 and s != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g


def _expand_reduced(g: Tensor, x: Tensor, axes: tuple[int, ...], keepdims: bool) -> Tensor:
    """g of a reduction over axes, given back the reduced axes and broadcast to x's shape."""
    if not keepdims:
        for a in sorted(axes):
            g = g.unsqueeze(a)
    return g.expand(*x.shape)


def _axes(node: Node, x: Tensor) -> tuple[int, ...]:
    axes = node.attrs.get("axes")
    if axes is None:
        return tuple(range(x.ndim))
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    return tuple(sorted(a % x.ndim for a in axes))


def _count(x: Tensor, axes: tuple[int, ...]) -> Tensor | float:
    """How many values a reduction over axes averages: a number, or for symbolic dims a
    tensor computed at run time."""
    dims = [x.shape[a] for a in axes]
    if all(isinstance(d, int) for d in dims):
        return float(math.prod(dims))
    return (x * 0.0 + 1.0).sum(axis=axes, keepdims=True)


# -- elementwise --------------------------------------------------------------------------------
@rule("add")
def _add(n, ins, out, g):
    return [unbroadcast(g, ins[0].shape), unbroadcast(g, ins[1].shape)]


@rule("sub")
def _sub(n, ins, out, g):
    return [unbroadcast(g, ins[0].shape), unbroadcast(-g, ins[1].shape)]


@rule("mul")
def _mul(n, ins, out, g):
    a, b = ins
    return [unbroadcast(g * b, a.shape), unbroadcast(g * a, b.shape)]


@rule("div")
def _div(n, ins, out, g):
    a, b = ins
    return [unbroadcast(g / b, a.shape), unbroadcast(-g * out / b, b.shape)]


@rule("pow")
def _pow(n, ins, out, g):
    a, b = ins
    ga = unbroadcast(g * b * (a ** (b - 1.0)), a.shape)
    gb = unbroadcast(g * out * a.maximum(1e-30).log(), b.shape)   # (a > 0 where it matters)
    return [ga, gb]


@rule("maximum", "minimum")
def _extremum(n, ins, out, g):
    a, b = ins
    pick_a = (a >= b) if n.op == "maximum" else (a <= b)       # ties: the first operand
    return [unbroadcast(where(pick_a, g, 0.0), a.shape),
            unbroadcast(where(pick_a, 0.0, g), b.shape)]


@rule("neg")
def _neg(n, ins, out, g):
    return [-g]


@rule("abs")
def _abs(n, ins, out, g):
    x = ins[0]
    return [g * ((x > 0).cast("float32") - (x < 0).cast("float32")).cast(g.dtype)]


@rule("exp")
def _exp(n, ins, out, g):
    return [g * out]


@rule("log")
def _log(n, ins, out, g):
    return [g / ins[0]]


@rule("sqrt")
def _sqrt(n, ins, out, g):
    return [g * 0.5 / out]


@rule("rsqrt")
def _rsqrt(n, ins, out, g):
    return [g * -0.5 * out / ins[0]]


@rule("sin")
def _sin(n, ins, out, g):
    return [g * ins[0].cos()]


@rule("cos")
def _cos(n, ins, out, g):
    return [-g * ins[0].sin()]


@rule("tanh")
def _tanh(n, ins, out, g):
    return [g * (1.0 - out * out)]


@rule("sigmoid")
def _sigmoid(n, ins, out, g):
    return [g * out * (1.0 - out)]


@rule("relu")
def _relu(n, ins, out, g):
    return [where(ins[0] > 0, g, 0.0)]


@rule("silu")
def _silu(n, ins, out, g):
    s = ins[0].sigmoid()
    return [g * (s + ins[0] * s * (1.0 - s))]


@rule("erf")
def _erf(n, ins, out, g):
    x = ins[0]
    return [g * (2.0 / math.sqrt(math.pi)) * (-(x * x)).exp()]


@rule("gelu")
def _gelu(n, ins, out, g):
    x = ins[0]
    if n.attrs.get("approximate", "none") == "tanh":
        c = math.sqrt(2.0 / math.pi)
        u = c * (x + 0.044715 * x * x * x)
        t = u.tanh()
        du = c * (1.0 + 3 * 0.044715 * x * x)
        return [g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)]
    cdf = 0.5 * (1.0 + (x * (1.0 / math.sqrt(2.0))).erf())
    pdf = (-0.5 * x * x).exp() * (1.0 / math.sqrt(2.0 * math.pi))
    return [g * (cdf + x * pdf)]


@rule("where")
def _where(n, ins, out, g):
    c, a, b = ins
    return [None, unbroadcast(where(c, g, 0.0), a.shape), unbroadcast(where(c, 0.0, g), b.shape)]


@rule("cast")
def _cast(n, ins, out, g):
    x = ins[0]
    return [g.cast(x.dtype) if x.dtype.is_float else None]


@rule("clamp")
def _clamp(n, ins, out, g):
    x = ins[0]
    return [where(x >= n.attrs["lo"], where(x <= n.attrs["hi"], g, 0.0), 0.0)]


# -- reductions and rows ------------------------------------------------------------------------
@rule("sum")
def _sum(n, ins, out, g):
    x = ins[0]
    return [_expand_reduced(g, x, _axes(n, x), n.attrs["keepdims"])]


@rule("mean")
def _mean(n, ins, out, g):
    x = ins[0]
    axes = _axes(n, x)
    return [_expand_reduced(g, x, axes, n.attrs["keepdims"]) / _count(x, axes)]


@rule("max", "min")
def _max(n, ins, out, g):
    x = ins[0]
    axes, keep = _axes(n, x), n.attrs["keepdims"]
    hit = (x == _expand_reduced(out, x, axes, keep)).cast(x.dtype)
    ties = hit.sum(axis=axes, keepdims=True)                    # ties share the gradient
    return [_expand_reduced(g, x, axes, keep) * hit / ties]


@rule("prod")
def _prod(n, ins, out, g):
    x = ins[0]
    axes, keep = _axes(n, x), n.attrs["keepdims"]
    return [_expand_reduced(g * out, x, axes, keep) / x]       # (x != 0)


@rule("softmax")
def _softmax(n, ins, out, g):
    axis = n.attrs.get("axis", -1)
    return [out * (g - (g * out).sum(axis=axis, keepdims=True))]


@rule("log_softmax")
def _log_softmax(n, ins, out, g):
    axis = n.attrs.get("axis", -1)
    return [g - out.exp() * g.sum(axis=axis, keepdims=True)]


@rule("cumsum")
def _cumsum(n, ins, out, g):
    axis = n.attrs["axis"] % ins[0].ndim
    # the sum of g over positions >= i: a reversed cumsum, as total - cumsum + g
    return [g.sum(axis=axis, keepdims=True) - g.cumsum(axis=axis) + g]


@rule("layer_norm", "rms_norm")
def _norm(n, ins, out, g):
    """dx in one fused kernel per row (layer_norm_grad / rms_norm_grad); the weight and bias
    gradients are column sums of g * y_hat (y_hat: the same norm without weight and bias, one
    forward kernel) and of g."""
    x, extra = ins[0], ins[1:]
    eps = n.attrs["eps"]
    grads: list[Tensor | None] = [x._op(f"{n.op}_grad", g, *extra[:1], eps=eps)]
    if extra:
        grads.append(unbroadcast(g * x._op(n.op, eps=eps), extra[0].shape))
    if len(extra) > 1:
        grads.append(unbroadcast(g, extra[1].shape))
    return grads


# -- matmul ---------------------------------------------------------------------------------------
def _mT(t: Tensor) -> Tensor:
    axes = list(range(t.ndim))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return t.permute(*axes)


@rule("matmul")
def _matmul(n, ins, out, g):
    a, b = ins[0], ins[1]
    bias = ins[2] if len(ins) == 3 else None
    act = n.attrs.get("activation", "none")
    if act != "none":                       # through the fused activation: recompute its input
        pre = a.matmul(b, bias=bias)
        post = pre._op(_ACT_OP[act], **({"approximate": "tanh"} if act == "gelu_tanh" else {}))
        g = VJP[post.node.op](post.node, [pre], post, g)[0]
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = g2.unsqueeze(-2)
    if b.ndim == 1:
        g2 = g2.unsqueeze(-1)
    ga = unbroadcast(g2.matmul(_mT(b2)), a2.shape)
    gb = unbroadcast(_mT(a2).matmul(g2), b2.shape)
    if a.ndim == 1:
        ga = ga.squeeze(0)
    if b.ndim == 1:
        gb = gb.squeeze(-1)
    grads: list[Tensor | None] = [ga, gb]
    if bias is not None:
        grads.append(unbroadcast(g, bias.shape))
    return grads


_ACT_OP = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu", "silu": "silu",
           "sigmoid": "sigmoid", "tanh": "tanh"}


# -- convolution and pooling ----------------------------------------------------------------------
@rule("conv2d")
def _conv2d(n, ins, out, g):
    x, w = ins[0], ins[1]
    at = {k: n.attrs[k] for k in ("stride", "padding", "dilation", "groups")}
    gx = g._op("conv2d_grad_input", w, input_size=tuple(x.shape[2:]), **at)
    gw = g._op("conv2d_grad_weight", x, kernel=tuple(w.shape[2:]), **at)
    grads: list[Tensor | None] = [gx, gw]
    if len(ins) == 3:
        grads.append(g.sum(axis=(0, 2, 3)))
    return grads


@rule("max_pool2d", "avg_pool2d")
def _pool2d(n, ins, out, g):
    at = {k: n.attrs[k] for k in ("kernel", "stride", "padding")}
    return [g._op(f"{n.op}_grad", ins[0], **at)]


@rule("attention")
def _attention(n, ins, out, g):
    # recompute the probabilities P = softmax(q k^T * scale + masks) with graph ops, then
    # dV = P^T g, dS = P * (g V^T - rowsum(g V^T * P)), dQ = dS K * scale, dK = dS^T Q * scale
    q, k, v = ins[:3]
    scale = n.attrs["scale"]
    s = q.matmul(_mT(k)) * scale
    if len(ins) == 4:                       # (batch, kv) int32, 0 = ignore that key
        keep = ins[3].unsqueeze(1).unsqueeze(1) != 0
        s = where(keep, s, float("-inf"))
    if n.attrs.get("causal"):
        qn, kn = q.shape[2], k.shape[2]
        if not isinstance(qn, int) or not isinstance(kn, int):
            raise GradError("grad: causal attention's rule needs static sequence lengths, got "
                            f"q {q.shape}, k {k.shape}")
        allowed = np.tril(np.ones((qn, kn), bool), kn - qn)
        s = where(Tensor(q.graph, q.graph.add_constant(allowed).id), s, float("-inf"))
    p = s.softmax(axis=-1)
    dp = g.matmul(_mT(v))
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    grads: list[Tensor | None] = [ds.matmul(k) * scale, _mT(ds).matmul(q) * scale,
                                  _mT(p).matmul(g)]
    if len(ins) == 4:
        grads.append(None)
    return grads


@rule("rope")
def _rope(n, ins, out, g):
    # a rotation's transpose is the rotation by -angle, and R(-a) = S R(a) S with S negating the
    # second element of each pair: so the gradient is the same rope op between two sign flips
    x, pos = ins
    half = x.shape[-1] // 2
    sign = np.tile([1.0, -1.0], half) if n.attrs["interleaved"] else np.repeat([1.0, -1.0], half)
    s = Tensor(x.graph, x.graph.add_constant(sign.astype(np.float32)).id)
    return [(g * s)._op("rope", pos, **n.attrs) * s, None]


# -- layout -------------------------------------------------------------------------------------
@rule("reshape")
def _reshape(n, ins, out, g):
    return [g.reshape(*ins[0].shape)]


@rule("permute")
def _permute(n, ins, out, g):
    axes = [a % ins[0].ndim for a in n.attrs["axes"]]
    inverse = [axes.index(i) for i in range(len(axes))]
    return [g.permute(*inverse)]


@rule("expand")
def _expand(n, ins, out, g):
    return [unbroadcast(g, ins[0].shape)]


@rule("slice")
def _slice(n, ins, out, g):
    x = ins[0]
    for axis, (a, b, d) in enumerate(zip(n.attrs["starts"], n.attrs["stops"], x.shape)):
        b = d if b is None else b
        if (a, b) == (0, d):
            continue
        zero = g.narrow(axis, 0, 1) * 0.0            # (a slice is never empty along axis)
        parts = []
        for size in (a, None, d - b):
            if size is None:
                parts.append(g)
            elif size:
                shape = list(g.shape)
                shape[axis] = size
                parts.append(zero.expand(*shape))
        g = concat(parts, axis=axis)
    return [g]


@rule("gather")
def _gather(n, ins, out, g):
    x, idx = ins
    axis = n.attrs["axis"] % x.ndim
    if axis != 0 or any(not isinstance(d, int) for d in (*x.shape, *idx.shape)):
        raise GradError(f"grad: gather's rule covers axis 0 of static shapes (embedding "
                        f"rows), got axis {axis} of {x.shape} by {idx.shape}")
    m = math.prod(idx.shape)
    rows = g.reshape(m, *x.shape[1:])
    return [(x * 0.0).scatter_add(idx.reshape(m), rows), None]


@rule("take_along_axis")
def _take_along_axis(n, ins, out, g):
    # dx[..., j] = sum over k of g[..., k] where idx[..., k] == j (the picked axis moved last):
    # a one-hot comparison with an iota of the axis, no scatter (deterministic)
    x, idx = ins
    axis = n.attrs["axis"] % x.ndim
    d = x.shape[axis]
    if not isinstance(d, int):
        raise GradError(f"grad: take_along_axis's rule needs a static axis, got {x.shape}")
    last = [a for a in range(x.ndim) if a != axis] + [axis]
    gl, il = g.permute(*last), idx.permute(*last)
    iota = Tensor(x.graph, x.graph.add_constant(np.arange(d, dtype=np.int32)).id)
    hit = il.unsqueeze(-1) == iota                     # (..., k, d)
    dx = where(hit, gl.unsqueeze(-1), 0.0).sum(axis=-2)
    back = [last.index(a) for a in range(x.ndim)]
    return [dx.permute(*back), None]


@rule("concat")
def _concat(n, ins, out, g):
    axis = n.attrs["axis"] % out.ndim
    grads, start = [], 0
    for t in ins:
        grads.append(g.narrow(axis, start, t.shape[axis]))
        start += t.shape[axis]
    return grads


# -- the transform --------------------------------------------------------------------------------
def grad(loss: Tensor, wrt: Sequence[Tensor]) -> list[Tensor]:
    """Gradients of a scalar loss with respect to each tensor of wrt (params or inputs):
    gradient nodes appended to loss's graph, returned in wrt's order (zeros where loss does
    not depend on one). Raises GradError naming the op where a gradient cannot pass."""
    if not isinstance(loss, Tensor):
        raise TypeError(f"grad: loss must be a Tensor, got {type(loss).__name__}")
    if not loss.dtype.is_float or any(d != 1 for d in loss.shape):
        raise GradError(f"grad: loss must be a float scalar (or one element), got shape "
                        f"{loss.shape} {loss.dtype}")
    wrt = list(wrt)
    for i, w in enumerate(wrt):
        if not isinstance(w, Tensor) or w.graph is not loss.graph:
            raise TypeError(f"grad: wrt[{i}] must be a Tensor of loss's graph")
        if not w.dtype.is_float:
            raise GradError(f"grad: wrt[{i}] (%{w.id} {w.node.op}) is {w.dtype}; gradients "
                            "exist only for float tensors")
    graph = loss.graph
    # nodes on a path from some wrt to the loss
    wanted = {w.id for w in wrt}
    reaches: set[int] = set()
    for node in graph.nodes[:loss.id + 1]:
        if node.id in wanted or any(i in reaches for i in node.inputs):
            reaches.add(node.id)
    grads: dict[int, Tensor] = {loss.id: Tensor(graph, graph.add_constant(1.0).id)
                                if not loss.shape else
                                loss * 0.0 + 1.0}
    dropped: list[tuple[Node, Node]] = []
    for node in reversed(graph.nodes[:loss.id + 1]):
        g = grads.get(node.id)
        if g is None or node.id not in reaches or not node.inputs:
            continue
        needs = [i for i in node.inputs if i in reaches]
        if not needs:
            continue
        if node.op in NOT_DIFFERENTIABLE or node.op not in VJP:
            why = "is not differentiable" if node.op in NOT_DIFFERENTIABLE or \
                node.op not in OPS else "has no gradient rule yet"
            raise GradError(f"grad: the loss depends on %{needs[0]} through %{node.id} "
                            f"{node.op}, which {why}")
        ins = [Tensor(graph, i) for i in node.inputs]
        parts = VJP[node.op](node, ins, Tensor(graph, node.id), g)
        for i, part in zip(node.inputs, parts):
            if i not in reaches:
                continue
            if part is None:                     # an index, mask or integer: no gradient
                dropped.append((graph.nodes[i], node))
                continue
            if tuple(part.shape) != tuple(graph.nodes[i].shape):
                raise GradError(f"grad: the rule of {node.op} gave a gradient of shape "
                                f"{part.shape} for %{i} of shape {graph.nodes[i].shape}")
            grads[i] = part if i not in grads else grads[i] + part
    depends: set[int] = {loss.id}
    for node in reversed(graph.nodes[:loss.id + 1]):
        if node.id in depends:
            depends.update(node.inputs)
    out = []
    for k, w in enumerate(wrt):
        got = grads.get(w.id)
        if got is None and w.id in depends and dropped:
            src, user = dropped[0]
            raise GradError(f"grad: the loss depends on wrt[{k}] (%{w.id}) only through ops "
                            f"no gradient passes: %{src.id} {src.op} ({src.dtype}) into "
                            f"%{user.id} {user.op}; {src.op} is not differentiable")
        out.append(got if got is not None else w * 0.0)
    return out
