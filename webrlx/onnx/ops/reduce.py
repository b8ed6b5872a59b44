"""Reduction rows: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare (axes as an
attribute or, from the opset that moved them, an input; keepdims; noop_with_empty_axes) and
ArgMax/ArgMin (select_last_index)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...tensor import Tensor
from ..context import Context
from .common import lift, norm_axis, static_shape
from .registry import op

REDUCTIONS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def _axes(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any], rank: int
          ) -> tuple[int, ...] | None:
    """The reduced axes; None means all of them, () means none (noop_with_empty_axes)."""
    axes_v = ins[1] if len(ins) > 1 and ins[1] is not None else attrs.get("axes")
    axes = [int(a) for a in np.asarray(ctx.host(axes_v, "axes")).reshape(-1)] \
        if axes_v is not None else []
    if not axes:
        return () if attrs.get("noop_with_empty_axes", 0) else None
    return tuple(sorted(norm_axis(a, rank) for a in axes))


@op(*REDUCTIONS)
def reduce_(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    axes = _axes(ctx, node, ins, attrs, x.ndim)
    keep = bool(attrs.get("keepdims", 1))
    if axes == ():
        return [x]
    if axes is None:
        axes = tuple(range(x.ndim))
    t = node.op_type
    if any(x.shape[a] == 0 for a in axes):
        return [_empty_reduction(t, x, static_shape(ctx, x), axes, keep)]
    if x.dtype.name == "bool" and t in ("ReduceMax", "ReduceMin"):
        return [(x.cast("int32").max(axes, keep) if t == "ReduceMax"
                 else x.cast("int32").min(axes, keep)) != 0]
    if t == "ReduceMean" and not x.dtype.is_float:
        return [x.cast("float32").mean(axes, keep).cast(x.dtype)]
    fn = {
        "ReduceSum": lambda v: v.sum(axes, keep),
        "ReduceMean": lambda v: v.mean(axes, keep),
        "ReduceMax": lambda v: v.max(axes, keep),
        "ReduceMin": lambda v: v.min(axes, keep),
        "ReduceProd": lambda v: v.prod(axes, keep),
        "ReduceL1": lambda v: abs(v).sum(axes, keep),
        "ReduceL2": lambda v: (v * v).sum(axes, keep).sqrt(),
        "ReduceLogSum": lambda v: v.sum(axes, keep).log(),
        "ReduceSumSquare": lambda v: (v * v).sum(axes, keep),
        "ReduceLogSumExp": _logsumexp(axes, keep),
    }[t]
    if t == "ReduceL2" and not x.dtype.is_float:
        return [fn(x.cast("float32")).cast(x.dtype)]
    return [fn(x)]


def _empty_reduction(t: str, x: Tensor, src: tuple[int, ...], axes: tuple[int, ...],
                     keep: bool) -> np.ndarray:
    """A reduction over a zero-size axis: ONNX's identity element, known on the host."""
    shape = tuple(1 if i in axes else d for i, d in enumerate(src) if keep or i not in axes)
    np_dtype = x.dtype.np_dtype
    big = np.inf if x.dtype.is_float else np.iinfo(np_dtype).max
    fill = {"ReduceMax": -big, "ReduceMin": big, "ReduceLogSumExp": -np.inf,
            "ReduceLogSum": -np.inf, "ReduceProd": 1}.get(t, 0)
    return np.full(shape, fill, np_dtype)


def _logsumexp(axes: tuple[int, ...], keep: bool) -> Any:
    def fn(v: Tensor) -> Tensor:
        m = v.max(axes, True)
        out = (v - m).exp().sum(axes, True).log() + m
        return out if keep else out.reshape(tuple(d for i, d in enumerate(out.shape)
                                                  if i not in axes))
    return fn


@op("ArgMax", "ArgMin")
def arg(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    axis = norm_axis(attrs.get("axis", 0), x.ndim)
    keep = bool(attrs.get("keepdims", 1))
    v = -x if node.op_type == "ArgMin" else x
    if not attrs.get("select_last_index", 0):
        return [v.argmax(axis, keep)]
    n = static_shape(ctx, x)[axis]
    flipped = v.gather(np.arange(n - 1, -1, -1, dtype=np.int32), axis=axis)
    return [(n - 1) - flipped.argmax(axis, keep)]
