"""Indexing rows: GatherND, the Scatter family, Pad, DepthToSpace, SpaceToDepth, Trilu, OneHot,
TopK, Compress, CumSum, CumProd, ReverseSequence, EyeLike. Index arithmetic that depends only on
shapes runs on the host once; everything that reads tensor values is composed of webrlx ops."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .common import lift, norm_axis, onnx_np_dtype, static_shape
from .registry import op


def _ints(v: Any) -> list[int]:
    return [int(i) for i in np.asarray(v).reshape(-1)]


def _scalar_int(ctx: Context, v: Any, what: str) -> int:
    return int(ctx.host(v, what).reshape(-1)[0])


def _empty(x: Tensor, shape: Sequence[int]) -> np.ndarray:
    """A zero-size result (no element to compute): a host constant of x's dtype."""
    return np.zeros(tuple(shape), x.dtype.np_dtype)


def _index(ctx: Context, idx: Any, n: Any) -> Tensor:
    """Indices as int32 with negatives counted from the end of a dim of size n."""
    i = ctx.tensor(idx).cast("int32")
    return wt.where(i < 0, i + n, i)


def _flip(x: Tensor, axis: int, n: int) -> Tensor:
    return x.gather(np.arange(n - 1, -1, -1, dtype=np.int32), axis=axis)


def _fill(ctx: Context, x: Tensor, shape: Sequence[int], value: Any) -> Tensor:
    """A block of shape filled with value (a Python scalar or a one-element Tensor)."""
    if isinstance(value, Tensor):
        return value.reshape((1,) * len(shape)).cast(x.dtype).expand(tuple(shape))
    return ctx.tensor(np.full(tuple(shape), value, x.dtype.np_dtype))


# -- GatherND / ScatterND / ScatterElements --------------------------------------------------
def _flat_nd(ctx: Context, idx: Tensor, dims: Sequence[int]) -> Tensor:
    """Row-major offsets of the index tuples in idx's last dim into a block of shape dims."""
    m = len(dims)
    strides = [math.prod(dims[j + 1:]) for j in range(m)]
    dims_t = ctx.tensor(np.array(dims, np.int32))
    i = wt.where(idx < 0, idx + dims_t, idx)
    return (i * ctx.tensor(np.array(strides, np.int32))).sum(axis=-1)


@op("GatherND")
def gather_nd(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    x, idx = lift(ctx, *ins)
    idx = idx.cast("int32")
    b = attrs.get("batch_dims", 0)
    shape, ishape = static_shape(ctx, x), static_shape(ctx, idx, "indices' shape")
    m = ishape[-1]
    block = math.prod(shape[b:b + m])
    flat = _flat_nd(ctx, idx, shape[b:b + m])
    batch = math.prod(shape[:b])
    if b:
        offs = np.arange(batch, dtype=np.int32).reshape(ishape[:b] + (1,) * (len(ishape) - 1 - b))
        flat = flat + ctx.tensor(offs * block)
    rows = x.reshape((batch * block,) + shape[b + m:])
    return [rows.gather(flat, axis=0)]


def _scatter(ctx: Context, data: Tensor, flat: Tensor, upd: Tensor, reduction: str) -> Tensor:
    """data (P, ...) with rows flat[i] (N,) combined with upd[i] (N, ...) by reduction."""
    shape = static_shape(ctx, data)
    p, n = shape[0], static_shape(ctx, flat)[0]
    rest = shape[1:]
    if reduction == "none":     # which update lands on each row (1-based, 0: none), then gather
        which = ctx.tensor(np.zeros((p,), np.float32)).scatter_add(
            flat, ctx.tensor(np.arange(1, n + 1, dtype=np.float32)))
        j = which.cast("int32") - 1
        picked = upd.gather(j.maximum(0).minimum(n - 1), axis=0)
        return wt.where((j >= 0).reshape((p,) + (1,) * len(rest)), picked, data)
    if reduction == "add":      # float32 sums: exact for integers below 2^24
        sums = ctx.tensor(np.zeros(shape, np.float32)).scatter_add(flat, upd.cast("float32"))
        return (data.cast("float32") + sums).cast(data.dtype)
    # mul / max / min: a (P, N) match matrix, each row reduced over the updates hitting it
    hits = flat.reshape((1, n)) == ctx.tensor(np.arange(p, dtype=np.int32).reshape(p, 1))
    hits = hits.reshape((p, n) + (1,) * len(rest))
    spread = upd.reshape((1, n) + rest)
    if data.dtype.is_float:
        lo, hi = -np.inf, np.inf
    else:
        info = np.iinfo(data.dtype.np_dtype)
        lo, hi = info.min, info.max
    neutral = {"mul": 1, "max": lo, "min": hi}[reduction]
    picked = wt.where(hits, spread, _fill(ctx, data, (1, 1) + rest, neutral))
    if reduction == "mul":
        return data * picked.prod(axis=1)
    if reduction == "max":
        return data.maximum(picked.max(axis=1))
    return data.minimum(picked.min(axis=1))


def _reduction(attrs: dict[str, Any]) -> str:
    r = attrs.get("reduction", b"none")
    r = r.decode() if isinstance(r, bytes) else str(r)
    if r not in ("none", "add", "mul", "max", "min"):
        raise OnnxImportError(f"scatter: reduction {r!r} is not one of none/add/mul/max/min")
    return r


@op("ScatterND")
def scatter_nd(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    data, idx, upd = lift(ctx, *ins)
    shape, ishape = static_shape(ctx, data), static_shape(ctx, idx, "indices' shape")
    m = ishape[-1]
    n = math.prod(ishape[:-1])
    flat = _flat_nd(ctx, idx.cast("int32").reshape((n, m)), shape[:m])
    rows = data.reshape((math.prod(shape[:m]),) + shape[m:])
    out = _scatter(ctx, rows, flat, upd.reshape((n,) + shape[m:]), _reduction(attrs))
    return [out.reshape(shape)]


@op("ScatterElements", "Scatter")
def scatter_elements(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                     ) -> list[Any]:
    data, idx, upd = lift(ctx, *ins)
    shape, ishape = static_shape(ctx, data), static_shape(ctx, idx, "indices' shape")
    axis = norm_axis(attrs.get("axis", 0), len(shape))
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    # offset of every update's target with its axis coordinate left out (host: shapes only)
    grid = np.indices(ishape, dtype=np.int64)
    base = sum(grid[d] * strides[d] for d in range(len(shape)) if d != axis)
    n = math.prod(ishape)
    along = _index(ctx, idx, shape[axis]) * strides[axis]
    flat = (along + ctx.tensor(np.asarray(base, np.int32))).reshape((n,))
    out = _scatter(ctx, data.reshape((math.prod(shape),)), flat, upd.reshape((n,)),
                   _reduction(attrs))
    return [out.reshape(shape)]


# -- Pad --------------------------------------------------------------------------------------
def _pad_spec(ctx: Context, ins: list[Any], attrs: dict[str, Any], rank: int
              ) -> tuple[list[tuple[int, int]], Any]:
    """Per-dim (begin, end) pads and the constant fill (a scalar or a Tensor)."""
    if len(ins) > 1:
        pads = _ints(ctx.host(ins[1], "pads"))
        value = ins[2] if len(ins) > 2 and ins[2] is not None else 0
        axes = _ints(ctx.host(ins[3], "axes")) if len(ins) > 3 and ins[3] is not None \
            else list(range(rank))
    else:
        pads = list(attrs.get("pads", attrs.get("paddings", [])))
        value = attrs.get("value", 0.0)
        axes = list(range(rank))
    width = [(0, 0)] * rank
    for i, a in enumerate(axes):
        width[norm_axis(a, rank)] = (pads[i], pads[len(axes) + i])
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0].item() if value.size else 0
    return width, value


@op("Pad")
def pad(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    shape = list(static_shape(ctx, x))
    width, value = _pad_spec(ctx, ins, attrs, len(shape))
    raw = attrs.get("mode", b"constant")
    mode: Any = raw.decode() if isinstance(raw, bytes) else str(raw)   # numpy's mode names
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise OnnxImportError(f"Pad: mode {mode!r} is not constant/reflect/edge/wrap")
    for axis, (b, e) in enumerate(width):
        if b < 0 or e < 0:                   # negative pads crop
            start, stop = max(-b, 0), shape[axis] - max(-e, 0)
            x = x.narrow(axis, start, stop - start)
            shape[axis] = stop - start
            b, e = max(b, 0), max(e, 0)
        if not b and not e:
            continue
        if math.prod(shape) == 0 or mode == "constant":
            if mode != "constant":
                raise OnnxImportError(f"Pad: {mode} padding of an empty dim {axis}")
            parts = []
            for n in (b, e):
                block = list(shape)
                block[axis] = n
                parts.append(_fill(ctx, x, block, value) if n else None)
            x = wt.concat([p for p in (parts[0], x, parts[1]) if p is not None], axis)
        else:
            src = np.pad(np.arange(shape[axis]), (b, e), mode=mode).astype(np.int32)
            x = x.gather(src, axis=axis)
        shape[axis] += b + e
    return [x]


# -- DepthToSpace / SpaceToDepth ------------------------------------------------------------
@op("DepthToSpace")
def depth_to_space(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                   ) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    n, c, h, w = static_shape(ctx, x)
    b = attrs["blocksize"]
    mode = attrs.get("mode", b"DCR")
    if mode in (b"CRD", "CRD"):
        y = x.reshape((n, c // (b * b), b, b, h, w)).permute(0, 1, 4, 2, 5, 3)
    else:
        y = x.reshape((n, b, b, c // (b * b), h, w)).permute(0, 3, 4, 1, 5, 2)
    return [y.reshape((n, c // (b * b), h * b, w * b))]


@op("SpaceToDepth")
def space_to_depth(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                   ) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    n, c, h, w = static_shape(ctx, x)
    b = attrs["blocksize"]
    y = x.reshape((n, c, h // b, b, w // b, b)).permute(0, 3, 5, 1, 2, 4)
    return [y.reshape((n, c * b * b, h // b, w // b))]


# -- masks and one-hot ------------------------------------------------------------------------
@op("Trilu")
def trilu(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    shape = static_shape(ctx, x)
    k = _scalar_int(ctx, ins[1], "k") if len(ins) > 1 and ins[1] is not None else 0
    if math.prod(shape) == 0:
        return [_empty(x, shape)]
    ones = np.ones(shape[-2:], np.bool_)
    keep = np.triu(ones, k) if attrs.get("upper", 1) else np.tril(ones, k)
    return [wt.where(ctx.tensor(keep), x, _fill(ctx, x, (), 0))]


@op("OneHot")
def one_hot(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    idx = ctx.tensor(ins[0])
    depth = _scalar_int(ctx, ins[1], "depth")
    rank = idx.ndim + 1
    axis = norm_axis(attrs.get("axis", -1), rank)
    i = idx.cast("int32")          # float indices truncate, as ONNX's cast to int64
    i = wt.where(i < 0, i + depth, i).unsqueeze(axis)
    classes = np.arange(depth, dtype=np.int32).reshape((depth,) + (1,) * (rank - 1 - axis))
    hot = i == ctx.tensor(classes)
    values = ins[2]
    if isinstance(values, np.ndarray):
        v = values.reshape(-1)
        off, on = ctx.tensor(v[:1].reshape(())), ctx.tensor(v[1:2].reshape(()))
    else:
        off, on = values.narrow(0, 0, 1).reshape(()), values.narrow(0, 1, 1).reshape(())
    return [wt.where(hot, on, off)]


@op("EyeLike")
def eye_like(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    n, m = static_shape(ctx, ins[0])
    dtype = onnx_np_dtype(attrs["dtype"]) if "dtype" in attrs else np.asarray(
        ins[0]).dtype if isinstance(ins[0], np.ndarray) else ins[0].dtype.np_dtype
    return [np.eye(n, m, attrs.get("k", 0), dtype=dtype)]


# -- TopK / Compress --------------------------------------------------------------------------
@op("TopK")
def top_k(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    k = _scalar_int(ctx, ins[1], "K") if len(ins) > 1 else attrs["k"]
    axis = norm_axis(attrs.get("axis", -1), x.ndim)
    if k == 0 or math.prod(static_shape(ctx, x)) == 0:
        shape = list(static_shape(ctx, x))
        shape[axis] = k
        return [_empty(x, shape), np.zeros(shape, np.int64)]
    if attrs.get("largest", 1):
        key = x
    else:       # the smallest are the largest of the negation (order-reversing for uint too)
        key = -x if not x.dtype.name.startswith("uint") else -(x.cast("float32"))
    idx = key._op("argtopk", k=k, axis=axis)
    return [x.take_along_axis(idx, axis), idx]


@op("Compress")
def compress(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    cond = ctx.host(ins[1], "the condition (it sets the output's shape)").astype(bool)
    if "axis" not in attrs:
        x = x.reshape((math.prod(static_shape(ctx, x)),))
    axis = norm_axis(attrs.get("axis", 0), x.ndim)
    keep = np.nonzero(cond)[0].astype(np.int32)
    if not keep.size:
        shape = list(static_shape(ctx, x))
        shape[axis] = 0
        return [_empty(x, shape)]
    return [x.gather(keep, axis=axis)]


# -- scans ----------------------------------------------------------------------------------
def _scan(ctx: Context, x: Tensor, axis: int, attrs: dict[str, Any], identity: int,
          run: Callable[[Tensor], Tensor]) -> Tensor:
    """An inclusive scan along axis, with ONNX's exclusive and reverse variants."""
    shape = static_shape(ctx, x)
    n = shape[axis]
    if n == 0:
        return x
    if attrs.get("reverse", 0):
        x = _flip(x, axis, n)
    y = run(x)
    if attrs.get("exclusive", 0):
        block = list(shape)
        block[axis] = 1
        parts = [_fill(ctx, x, block, identity)] + ([y.narrow(axis, 0, n - 1)] if n > 1 else [])
        y = wt.concat(parts, axis)
    return _flip(y, axis, n) if attrs.get("reverse", 0) else y


def _cumprod(ctx: Context, x: Tensor, axis: int) -> Tensor:
    """Inclusive product scan: log2(n) steps of y * (y shifted by 2^i, ones shifted in)."""
    shape = static_shape(ctx, x)
    n = shape[axis]
    y, shift = x, 1
    while shift < n:
        block = list(shape)
        block[axis] = shift
        y = y * wt.concat([_fill(ctx, x, block, 1), y.narrow(axis, 0, n - shift)], axis)
        shift *= 2
    return y


@op("CumSum", "CumProd")
def cum(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (x,) = lift(ctx, ins[0])
    axis = norm_axis(_scalar_int(ctx, ins[1], "axis"), x.ndim)
    if node.op_type == "CumSum":
        return [_scan(ctx, x, axis, attrs, 0, lambda t: t.cumsum(axis))]
    return [_scan(ctx, x, axis, attrs, 1, lambda t: _cumprod(ctx, t, axis))]


@op("ReverseSequence")
def reverse_sequence(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                     ) -> list[Any]:
    x, lens = lift(ctx, *ins)
    shape = static_shape(ctx, x)
    t_axis, b_axis = attrs.get("time_axis", 0), attrs.get("batch_axis", 1)
    view = [1] * len(shape)
    view[t_axis] = shape[t_axis]
    t = ctx.tensor(np.arange(shape[t_axis], dtype=np.int32).reshape(view))
    view[t_axis], view[b_axis] = 1, shape[b_axis]
    n = lens.cast("int32").reshape(view)
    src = wt.where(t < n, n - 1 - t, t).expand(shape)
    return [x.take_along_axis(src, t_axis)]
