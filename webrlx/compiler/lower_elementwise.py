"""Lowering rules of elementwise ops and views. Both stay lazy while their single consumer
inlines them, so chains of arithmetic, broadcasts, permutes, expands and slices fuse into one
generated kernel (codegen.py); reshape aliases a materialized buffer and restrides a lazy
view where it can; concat writes each piece
through strides into one output."""
from __future__ import annotations

import math
from collections.abc import Callable

from ..codegen import Expr
from ..graph import Node
from ..kernels import kernel
from ..ops import BINARY, COMPARE, UNARY
from ..shape import broadcast_strides, strides_of
from .emit import EmitContext, Lazy
from .program import Buf
from .registry import lowering

ELEMENTWISE = (*BINARY, *COMPARE, *UNARY, "where", "cast", "bitcast")


@lowering(*ELEMENTWISE, inlines=True)
def _elementwise(L: EmitContext, node: Node) -> Buf | None:
    shape = L.shape(node.id)
    leaves: list = []
    args = tuple(L.leaves_into(i, shape, leaves) for i in node.inputs)
    attrs = tuple(sorted((k, v) for k, v in node.attrs.items() if k in ("approximate", "dtype")))
    return L.settle(node.id, Lazy(Expr(node.op, args, node.dtype, attrs), leaves, shape,
                                  node.dtype))


@lowering("clamp")
def _clamp(L: EmitContext, node: Node) -> Buf:
    n = math.prod(L.shape(node.id))
    out = L.temp(L.shape(node.id), node.dtype)
    L.emit(kernel("elementwise/clamp", T=L.T(node.dtype)), {"x": L.buf(node.inputs[0]),
                                                            "out": out},
           {"n": n, "lo": node.attrs["lo"], "hi": node.attrs["hi"]}, L.grid(n), name="clamp")
    return out


@lowering("reshape", inlines=True)
def _reshape(L: EmitContext, node: Node) -> Buf | None:
    """A materialized input: the same buffer. A lazy one (a view, e.g. a head split of a slice
    of a fused QKV projection, or an elementwise chain) stays lazy where every leaf's strides
    can take the new shape without a copy (reshape_strides), else it is materialized."""
    src = node.inputs[0]
    lz = L.lazy.get(src)
    if lz is not None:
        new = L.shape(node.id)
        strided = [st for _, _, _, old in lz.leaves
                   if (st := reshape_strides(lz.shape, old, new)) is not None]
        if len(strided) == len(lz.leaves):
            L.lazy.pop(src)
            leaves = [(b, d, off, st) for (b, d, off, _), st in zip(lz.leaves, strided)]
            return L.settle(node.id, Lazy(lz.expr, leaves, new, node.dtype))
    return L.buf(src)


def reshape_strides(shape: tuple[int, ...], strides: tuple[int, ...], new: tuple[int, ...]
                    ) -> tuple[int, ...] | None:
    """Strides that walk a strided view of `shape` in row-major order as shape `new`, or None
    when the view needs a copy (numpy's no-copy reshape rule): each run of old dims that
    becomes a run of new dims must be contiguous within itself."""
    old = [(n, st) for n, st in zip(shape, strides) if n != 1]
    dims = new
    if math.prod(new) == 0:
        return strides_of(new)
    out = [0] * len(dims)
    i = j = 0                       # next old dim, next new dim
    while j < len(dims) and dims[j] == 1:
        j += 1
    while i < len(old) and j < len(dims):
        i0, j0 = i, j
        po, pn = old[i][0], dims[j]
        while po != pn:             # grow the shorter side until both runs hold as many
            if po < pn:
                i += 1
                po *= old[i][0]
            else:
                j += 1
                pn *= dims[j]
        for k in range(i0, i):      # the old run must be contiguous within itself
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        st = old[i][1]              # new dims of the run, innermost first
        for k in range(j, j0 - 1, -1):
            out[k] = st
            st *= dims[k]
        i, j = i + 1, j + 1
        while j < len(dims) and dims[j] == 1:
            j += 1
    return tuple(out)


def _restrided(L: EmitContext, node: Node, fn: Callable) -> Buf | None:
    """A view op: the input's leaves get new (offset, strides) over this node's shape."""
    src = node.inputs[0]
    lz = L.as_lazy(src)
    L.lazy.pop(src, None)
    leaves = [(b, d, *fn(off, st)) for b, d, off, st in lz.leaves]
    return L.settle(node.id, Lazy(lz.expr, leaves, L.shape(node.id), node.dtype))


@lowering("permute", inlines=True)
def _permute(L: EmitContext, node: Node) -> Buf | None:
    if node.id in L.prelowered:
        return L.prelowered.pop(node.id)
    axes = tuple(node.attrs["axes"])
    return _restrided(L, node, lambda off, st: (off, tuple(st[a] for a in axes)))


@lowering("expand", inlines=True)
def _expand(L: EmitContext, node: Node) -> Buf | None:
    src_shape, shape = L.shape(node.inputs[0]), L.shape(node.id)
    return _restrided(L, node, lambda off, st: (off, broadcast_strides(src_shape, st, shape)))


@lowering("slice", inlines=True)
def _slice(L: EmitContext, node: Node) -> Buf | None:
    starts = node.attrs["starts"]
    return _restrided(L, node, lambda off, st: (off + sum(a * s for a, s in zip(starts, st)),
                                                st))


@lowering("concat", inlines=True)
def _concat(L: EmitContext, node: Node) -> Buf:
    shape = L.shape(node.id)
    axis = node.attrs["axis"] % len(shape)
    ost = strides_of(shape)
    out = L.temp(shape, node.dtype)
    at = 0
    for i in node.inputs:
        lz = L.as_lazy(i)
        L.lazy.pop(i, None)
        L.strided(lz.expr, lz.leaves, out, node.dtype, at * ost[axis], ost, lz.shape, "concat")
        at += lz.shape[axis]
    return out


@lowering("assign")
def _assign(L: EmitContext, node: Node) -> Buf:
    """In place: the value is computed into a buffer of its own (a fused elementwise chain
    reading the target, w - lr * g, runs there), then copied into the target param/state.
    One kernel cannot do both: WebGPU forbids binding one buffer twice when a binding is
    writable, and the emitter would bind a copy as the output instead."""
    target, value = node.inputs
    dst, src = L.buf(target), L.buf(value)
    if src is not dst:
        shape = L.shape(node.id)
        L.strided(Expr("load", (0,), node.dtype), [(src, node.dtype, 0, strides_of(shape))],
                  dst, node.dtype, 0, strides_of(shape), shape, "assign")
    return dst
