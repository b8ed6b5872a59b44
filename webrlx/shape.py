"""Shapes: static ints and symbolic dims (strings), broadcasting, and binding symbols at run time.

A symbolic dim is a name ("batch") or a product of names and ints ("batch*seq", "2*n").
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

Dim = int | str
Shape = tuple[Dim, ...]


class ShapeError(ValueError):
    """A shape or dtype rule failed while building a graph."""


def as_shape(shape: Iterable[Dim] | Dim) -> Shape:
    """Return shape as a tuple of ints and symbol strings, checking each dim."""
    if isinstance(shape, (int, str)):
        shape = (shape,)
    out: list[Dim] = []
    for d in shape:
        if isinstance(d, bool):
            raise ShapeError(f"shape {tuple(shape)!r}: dims must be ints or symbol names")
        if isinstance(d, int) or (hasattr(d, "__index__") and not isinstance(d, str)):
            d = int(d)
            if d < 0:
                raise ShapeError(f"shape {tuple(shape)!r}: negative dim {d}")
        elif not (isinstance(d, str) and d):
            raise ShapeError(f"shape {tuple(shape)!r}: dims must be ints or symbol names")
        out.append(d)
    return tuple(out)


def is_static(shape: Shape) -> bool:
    return all(isinstance(d, int) for d in shape)


def symbols(shape: Shape) -> set[str]:
    """Return the symbol names used in shape."""
    names: set[str] = set()
    for d in shape:
        if isinstance(d, str):
            names.update(t for t in d.split("*") if not t.isdigit())
    return names


def eval_dim(d: Dim, env: Mapping[str, int]) -> int:
    """Return the int value of dim d under the symbol binding env."""
    if isinstance(d, int):
        return d
    value = 1
    for t in d.split("*"):
        if t.isdigit():
            value *= int(t)
        elif t in env:
            value *= env[t]
        else:
            raise ShapeError(f"symbolic dim {d!r}: symbol {t!r} is not bound")
    return value


def bind(shape: Shape, env: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(eval_dim(d, env) for d in shape)


def mul_dims(a: Dim, b: Dim) -> Dim:
    """Return the product of two dims, kept symbolic when either one is."""
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if a == 1:
        return b
    if b == 1:
        return a
    terms = sorted(str(a).split("*") + str(b).split("*"))
    ints = [int(t) for t in terms if t.isdigit()]
    names = [t for t in terms if not t.isdigit()]
    k = math.prod(ints)
    return "*".join(([str(k)] if k != 1 else []) + names)


def numel(shape: Shape) -> Dim:
    n: Dim = 1
    for d in shape:
        n = mul_dims(n, d)
    return n


def broadcast_shapes(*shapes: Shape, op: str = "broadcast") -> Shape:
    """Return the numpy broadcast of shapes (symbols broadcast only with 1 or themselves)."""
    rank = max(len(s) for s in shapes)
    out: list[Dim] = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0}
        dims.discard(1)
        if len(dims) > 1:
            raise ShapeError(f"{op}: shapes {', '.join(map(str, shapes))} do not broadcast "
                             f"(axis {i - rank}: {sorted(map(str, dims))}); "
                             f"reshape or expand one operand first")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def normalize_axis(axis: int, rank: int, op: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"{op}: axis must be an int, got {type(axis).__name__} {axis!r}")
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{op}: axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def normalize_axes(axes: int | Iterable[int] | None, rank: int, op: str) -> tuple[int, ...]:
    """Return sorted, unique, non-negative axes (None means all)."""
    if axes is None:
        return tuple(range(rank))
    given: tuple[Any, ...] = tuple(axes) if isinstance(axes, Iterable) and \
        not isinstance(axes, str) else (axes,)
    listed = [normalize_axis(a, rank, op) for a in given]
    if len(set(listed)) != len(listed):
        raise ShapeError(f"{op}: axes {given} name an axis twice (numpy: duplicate value "
                         f"in 'axis')")
    return tuple(sorted(listed))


def strides_of(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Return the C-contiguous element strides of a static shape."""
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


def broadcast_strides(shape: tuple[int, ...], strides: tuple[int, ...],
                      out_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides over out_shape of a view of `shape` broadcast to it (numpy rules)."""
    pad = len(out_shape) - len(shape)
    return tuple(0 if i < pad or shape[i - pad] == 1 else strides[i - pad]
                 for i in range(len(out_shape)))
