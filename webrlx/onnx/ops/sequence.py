"""Sequence and optional rows: a sequence is a host-side list of values (SeqValue), an optional
a host-side box (OptValue); their elements stay graph Tensors or host arrays, so these rows
only move references, and splitting / concatenating runs as webrlx slice and concat ops."""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import tensor as wt
from ..context import Context, OnnxImportError, OptValue, SeqValue
from .common import norm_axis, same_dtype, static_shape
from .registry import op


def _seq(ctx: Context, v: Any) -> SeqValue:
    if not isinstance(v, SeqValue):
        raise OnnxImportError(f"{ctx.node_name}: expected a sequence, got {type(v).__name__}")
    return v


def _position(ctx: Context, pos: Any, n: int, default: int, inserting: bool = False) -> int:
    """A host-known position in [-n, n) (or [-n, n] when inserting) as an index."""
    if pos is None:
        return default
    p = int(ctx.host(pos, "the position").reshape(-1)[0])
    if not -n <= p < n + int(inserting):
        raise OnnxImportError(f"{ctx.node_name}: position {p} is out of range for a sequence "
                              f"of {n}")
    return p % (n + int(inserting)) if p < 0 else p


@op("Identity")
def identity(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return [ins[0]]


@op("SequenceEmpty")
def sequence_empty(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                   ) -> list[Any]:
    return [SeqValue()]


@op("SequenceConstruct")
def sequence_construct(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                       ) -> list[Any]:
    return [SeqValue(ins)]


@op("SequenceAt")
def sequence_at(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    s = _seq(ctx, ins[0])
    return [s[_position(ctx, ins[1], len(s), 0)]]


@op("SequenceInsert")
def sequence_insert(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                    ) -> list[Any]:
    s = _seq(ctx, ins[0])
    pos = _position(ctx, ins[2] if len(ins) > 2 else None, len(s), len(s), inserting=True)
    return [SeqValue(s[:pos] + [ins[1]] + s[pos:])]


@op("SequenceErase")
def sequence_erase(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                   ) -> list[Any]:
    s = _seq(ctx, ins[0])
    pos = _position(ctx, ins[1] if len(ins) > 1 else None, len(s), len(s) - 1)
    return [SeqValue(s[:pos] + s[pos + 1:])]


@op("SequenceLength")
def sequence_length(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                    ) -> list[Any]:
    return [np.array(len(_seq(ctx, ins[0])), np.int64)]


@op("SplitToSequence")
def split_to_sequence(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                      ) -> list[Any]:
    x = ins[0]
    split = ins[1] if len(ins) > 1 else None
    shape = static_shape(ctx, x)
    axis = norm_axis(attrs.get("axis", 0), len(shape))
    dim = shape[axis]
    if split is None:
        sizes = [1] * dim
    else:
        sp = ctx.host(split, "split").astype(np.int64)
        if sp.ndim == 0:
            size = int(sp)
            sizes = [size] * (dim // size) + ([dim % size] if dim % size else [])
        else:
            sizes = [int(v) for v in sp]
    if sum(sizes) != dim:
        raise OnnxImportError(f"{ctx.node_name}: split sizes {sizes} do not add up to {dim}")
    squeeze = split is None and not attrs.get("keepdims", 1)
    out, start = SeqValue(), 0
    for size in sizes:
        if ctx.is_host(x):
            part = np.take(x, range(start, start + size), axis=axis)
            out.append(part.squeeze(axis) if squeeze else part)
        else:
            part = x.narrow(axis, start, size)
            out.append(part.squeeze(axis) if squeeze else part)
        start += size
    return [out]


@op("ConcatFromSequence")
def concat_from_sequence(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                         ) -> list[Any]:
    s = _seq(ctx, ins[0])
    if not s:
        raise OnnxImportError(f"{ctx.node_name}: the sequence is empty")
    new_axis = attrs.get("new_axis", 0)
    rank = len(ctx.shape(s[0])) + int(bool(new_axis))
    axis = norm_axis(attrs["axis"], rank)
    if all(ctx.is_host(v) for v in s):
        return [np.stack(s, axis) if new_axis else np.concatenate(s, axis)]
    first = ctx.tensor(s[0])
    parts = [first] + [same_dtype(first, ctx.tensor(v))[1] for v in s[1:]]
    if new_axis:
        parts = [p.unsqueeze(axis) for p in parts]
    return [wt.concat(parts, axis)]


@op("SequenceMap")
def sequence_map(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    n = len(_seq(ctx, ins[0]))
    body = attrs["body"]
    outs: list[SeqValue] = [SeqValue() for _ in body.outputs]
    for i in range(n):
        args = [v[i] if isinstance(v, SeqValue) else v for v in ins]
        for acc, v in zip(outs, ctx.inline(body, args)):
            acc.append(v)
    return outs


@op("Optional")
def optional(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return [OptValue(ins[0] if ins else None)]


@op("OptionalHasElement")
def optional_has_element(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                         ) -> list[Any]:
    v = ins[0] if ins else None
    has = v is not None and not (isinstance(v, OptValue) and v.value is None)
    return [np.array(has)]


@op("OptionalGetElement")
def optional_get_element(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                         ) -> list[Any]:
    v = ins[0]
    if isinstance(v, OptValue):
        if v.value is None:
            raise OnnxImportError(f"{ctx.node_name}: the optional is empty")
        return [v.value]
    return [v]
