"""Lowering rules of elementwise ops and views. Both stay lazy while their single consumer
inlines them, so chains of arithmetic, broadcasts, permutes, expands and slices fuse into one
generated kernel (codegen.py); reshape aliases a contiguous buffer; concat writes each piece
through strides into one output."""
from __future__ import annotations

import math
from typing import Callable

from ..codegen import Expr
from ..graph import Node
from ..kernels import kernel
from ..ops import BINARY, COMPARE, UNARY
from ..shape import broadcast_strides, strides_of
from .emit import EmitContext, Lazy
from .program import Buf
from .registry import lowering

ELEMENTWISE = (*BINARY, *COMPARE, *UNARY, "where", "cast")


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


@lowering("reshape")
def _reshape(L: EmitContext, node: Node) -> Buf:
    return L.buf(node.inputs[0])


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
