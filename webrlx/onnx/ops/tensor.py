"""Data-movement rows: Reshape, Transpose, Concat, Split, Slice, Gather, GatherElements,
Squeeze, Unsqueeze, Flatten, Expand, Tile, Shape, Size, Constant, ConstantOfShape, Range. Each
works out its parameters once (shapes, index lists) and applies them to a Tensor or, when every
input is host-known, to a numpy array."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .common import lift, norm_axis, static_shape
from .registry import op


def _ints(v: Any) -> list[int]:
    return [int(i) for i in np.asarray(v).reshape(-1)]


# -- Reshape / Flatten / Squeeze / Unsqueeze: all are reshapes -----------------------------
def _reshape_target(shape: Sequence[int], spec: Sequence[int], allowzero: int) -> tuple:
    out = [shape[i] if d == 0 and not allowzero else d for i, d in enumerate(spec)]
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        out[out.index(-1)] = math.prod(shape) // known if known else 0
    return tuple(out)


def _target(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> tuple:
    x = ins[0]
    t = node.op_type
    if t == "Reshape":
        spec = _ints(ctx.host(ins[1], "the shape")) if len(ins) > 1 else attrs["shape"]
        return _reshape_target(static_shape(ctx, x, "shape"), spec, attrs.get("allowzero", 0))
    if t == "Flatten":
        shape = static_shape(ctx, x, "shape")
        axis = attrs.get("axis", 1)
        axis = axis + len(shape) if axis < 0 else axis
        return (math.prod(shape[:axis]), math.prod(shape[axis:]))
    axes_v = ins[1] if len(ins) > 1 and ins[1] is not None else attrs.get("axes")
    axes = _ints(ctx.host(axes_v, "axes")) if axes_v is not None else None
    shape = tuple(x.shape)
    if t == "Squeeze":
        rank = len(shape)
        drop = {a % rank for a in axes} if axes is not None else \
            {i for i, d in enumerate(shape) if d == 1}
        for a in drop:
            if shape[a] != 1:
                raise OnnxImportError(f"Squeeze: dim {a} of {shape} is not 1")
        return tuple(d for i, d in enumerate(shape) if i not in drop)
    assert axes is not None, "Unsqueeze needs axes"
    rank = len(shape) + len(axes)
    new = sorted(a % rank for a in axes)
    out, it = [], iter(shape)
    for i in range(rank):
        out.append(1 if i in new else next(it))
    return tuple(out)


def _host_reshape(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [ins[0].reshape(_target(_HOST, node, ins, attrs))]


@op("Reshape", "Flatten", "Squeeze", "Unsqueeze", host=_host_reshape)
def reshape(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    return [x.reshape(_target(ctx, node, ins, attrs))]


class _HostContext(Context):
    """The context of host rules: every value is a numpy array, no graph is built."""

    def __init__(self) -> None:  # noqa: D107 - nothing of a graph import to set up
        self.node_name = "host rule"


_HOST = _HostContext()


# -- Transpose, Concat, Split --------------------------------------------------------------
def _perm(x: Any, attrs: dict[str, Any]) -> tuple[int, ...]:
    perm = attrs.get("perm")
    return tuple(perm) if perm else tuple(reversed(range(len(x.shape))))


@op("Transpose", host=lambda node, ins, attrs: [np.transpose(ins[0], _perm(ins[0], attrs))])
def transpose(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    return [x.permute(_perm(x, attrs))]


@op("Concat", host=lambda node, ins, attrs: [np.concatenate(ins, axis=attrs["axis"])])
def concat(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    ts = lift(ctx, *[x for x in ins if x is not None])
    axis = norm_axis(attrs["axis"], ts[0].ndim)
    keep = [t for t in ts if t.shape[axis] != 0] or ts[:1]
    keep = [t if t.dtype == keep[0].dtype else t.cast(keep[0].dtype) for t in keep]
    return [wt.concat(keep, axis)]


def _split_sizes(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                 ) -> tuple[int, list[int]]:
    x = ins[0]
    axis = norm_axis(attrs.get("axis", 0), len(x.shape))
    n = static_shape(ctx, x, "shape")[axis]
    split_v = ins[1] if len(ins) > 1 and ins[1] is not None else attrs.get("split")
    if split_v is not None and len(_ints(ctx.host(split_v, "split"))):
        return axis, _ints(ctx.host(split_v, "split"))
    parts = attrs.get("num_outputs", len(node.outputs))
    size = -(-n // parts)
    return axis, [min(size, n - i * size) for i in range(parts)]


def _host_split(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    axis, sizes = _split_sizes(_HOST, node, ins, attrs)
    return np.split(ins[0], np.cumsum(sizes)[:-1], axis=axis)


@op("Split", host=_host_split)
def split(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    axis, sizes = _split_sizes(ctx, node, ins, attrs)
    outs, start = [], 0
    for s in sizes:
        outs.append(x.narrow(axis, start, s))
        start += s
    return outs


# -- Slice ---------------------------------------------------------------------------------
def _slice_plan(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                ) -> list[range]:
    """One range of kept indices per dim."""
    x = ins[0]
    shape = static_shape(ctx, x, "shape")
    if len(ins) > 1:
        starts = _ints(ctx.host(ins[1], "starts"))
        ends = _ints(ctx.host(ins[2], "ends"))
        axes = _ints(ctx.host(ins[3], "axes")) if len(ins) > 3 and ins[3] is not None \
            else list(range(len(starts)))
        steps = _ints(ctx.host(ins[4], "steps")) if len(ins) > 4 and ins[4] is not None \
            else [1] * len(starts)
    else:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    plan = [range(d) for d in shape]
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = norm_axis(a, len(shape))
        plan[a] = range(*slice(s, e, st).indices(shape[a]))
    return plan


def _host_slice(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    plan = _slice_plan(_HOST, node, ins, attrs)
    return [ins[0][tuple(slice(r.start, r.stop if r.stop >= 0 else None, r.step)
                         for r in plan)]]


@op("Slice", host=_host_slice)
def slice_(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    plan = _slice_plan(ctx, node, ins, attrs)
    for axis, r in enumerate(plan):
        n = x.shape[axis]
        if r.step == 1 or len(r) <= 1:
            if len(r) != n:
                x = x.narrow(axis, r.start if len(r) else 0, len(r))
        else:
            x = x.gather(np.array(list(r), np.int32), axis=axis)
    return [x]


# -- Gather ----------------------------------------------------------------------------------
def _host_gather(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, idx = ins
    axis = attrs.get("axis", 0)
    return [np.take(x, idx.astype(np.intp), axis=axis)]      # intp: int32 in wasm32


def _indices(ctx: Context, idx: Any, n: int) -> Tensor:
    """Indices as int32, negatives counted from the end."""
    if isinstance(idx, np.ndarray):
        return ctx.tensor(np.where(idx < 0, idx + n, idx).astype(np.int32))
    i = idx.cast("int32")
    return wt.where(i < 0, i + n, i)


@op("Gather", host=_host_gather)
def gather(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    axis = norm_axis(attrs.get("axis", 0), x.ndim)
    return [x.gather(_indices(ctx, ins[1], static_shape(ctx, x)[axis]), axis=axis)]


@op("GatherElements")
def gather_elements(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                    ) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    axis = norm_axis(attrs.get("axis", 0), x.ndim)
    shape = static_shape(ctx, x)
    idx = _indices(ctx, ins[1], shape[axis])
    idx_shape = static_shape(ctx, idx, "indices' shape")
    for a in range(x.ndim):
        if a != axis and idx_shape[a] != shape[a]:
            x = x.narrow(a, 0, idx_shape[a])
    return [x.take_along_axis(idx, axis)]


# -- Expand / Tile -------------------------------------------------------------------------
def _expand_shape(ctx: Context, ins: list[Any]) -> tuple[int, ...]:
    shape = static_shape(ctx, ins[0], "shape")
    spec = _ints(ctx.host(ins[1], "the shape"))
    return tuple(int(d) for d in np.broadcast_shapes(shape, tuple(spec)))


@op("Expand", host=lambda node, ins, attrs: [
    np.broadcast_to(ins[0], _expand_shape(_HOST, ins)).copy()])
def expand(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    target = _expand_shape(ctx, ins)
    if x.ndim < len(target):
        x = x.reshape((1,) * (len(target) - x.ndim) + tuple(x.shape))
    return [x.expand(target)]


@op("Tile", host=lambda node, ins, attrs: [np.tile(ins[0], _ints(ins[1]))])
def tile(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    reps = _ints(ctx.host(ins[1], "repeats"))
    shape = static_shape(ctx, x, "shape")
    spread = tuple(v for d in shape for v in (1, d))
    big = tuple(v for r, d in zip(reps, shape) for v in (r, d))
    return [x.reshape(spread).expand(big).reshape(tuple(r * d for r, d in zip(reps, shape)))]


# -- shapes and constants: host only ---------------------------------------------------------
def _shape_of(ctx: Context, x: Any, attrs: dict[str, Any]) -> np.ndarray:
    shape = static_shape(ctx, x, "shape")
    start, end = attrs.get("start", 0), attrs.get("end")
    return np.array(shape[slice(start, end)], np.int64)


@op("Shape", host=lambda node, ins, attrs: [_shape_of(_HOST, ins[0], attrs)])
def shape(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return [_shape_of(ctx, ins[0], attrs)]


@op("Size", host=lambda node, ins, attrs: [np.array(ins[0].size, np.int64)])
def size(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return [np.array(math.prod(static_shape(ctx, ins[0], "size")), np.int64)]


def _constant(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    if "value" in attrs:
        return [attrs["value"]]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in attrs:
            return [np.array(attrs[key], dtype)]
    raise OnnxImportError(f"Constant: attribute {sorted(attrs)} is not supported "
                          "(strings and sparse values are not)")


@op("Constant", host=_constant)
def constant(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return _constant(node, ins, attrs)


def _constant_of_shape(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    value = attrs.get("value")
    fill = value.reshape(-1)[0] if value is not None else np.float32(0)
    return [np.full(_ints(ins[0]), fill, dtype=np.asarray(fill).dtype)]


@op("ConstantOfShape", host=_constant_of_shape)
def constant_of_shape(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                      ) -> list[Any]:
    return _constant_of_shape(node, [ctx.host(ins[0], "the shape")], attrs)


def _range(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in ins)
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return [(start + np.arange(n, dtype=np.float64) * delta).astype(start.dtype)
            if start.dtype.kind == "f" else
            (start + np.arange(n, dtype=np.int64) * delta).astype(start.dtype)]


@op("Range", host=_range)
def range_(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return _range(node, [ctx.host(v, "Range's inputs") for v in ins], attrs)
