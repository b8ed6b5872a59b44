"""Pooling rows: MaxPool (with the Indices output), AveragePool, LpPool, GlobalAveragePool,
GlobalMaxPool, GlobalLpPool, MaxUnpool. Plain 1-D/2-D windows run on the pooling kernels; every
other form (ceil_mode, dilations, asymmetric pads, 3-D, Indices) gathers each window through an
index table computed on the host from the shapes, then reduces it on the device."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import nn
from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .common import lift, static_shape
from .registry import op


def conv_pads(attrs: dict[str, Any], spatial: tuple[int, ...], kernel: tuple[int, ...],
              strides: tuple[int, ...], dil: tuple[int, ...]) -> list[int]:
    """ONNX pads [begin..., end...] with auto_pad resolved (SAME: output = ceil(in / stride))."""
    auto = attrs.get("auto_pad", b"NOTSET")
    k = len(spatial)
    if auto in (b"SAME_UPPER", b"SAME_LOWER"):
        pads = [0] * (2 * k)
        for i in range(k):
            out = -(-spatial[i] // strides[i])
            total = max((out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - spatial[i], 0)
            small, big = total // 2, total - total // 2
            pads[i], pads[i + k] = (small, big) if auto == b"SAME_UPPER" else (big, small)
        return pads
    if auto == b"VALID":
        return [0] * (2 * k)
    return [int(p) for p in attrs.get("pads", [0] * (2 * k))]


class Windows:
    """The pooling windows of one spatial shape: for each output position and kernel tap, the
    row-major input position it reads (-1 outside the input) and whether it lies in the pads."""

    def __init__(self, spatial: tuple[int, ...], kernel: tuple[int, ...],
                 strides: tuple[int, ...], dil: tuple[int, ...], pads: list[int],
                 ceil_mode: bool) -> None:
        k = len(spatial)
        self.out: list[int] = []
        per_dim_pos, per_dim_valid, per_dim_inpad = [], [], []
        for d in range(k):
            span = (spatial[d] + pads[d] + pads[d + k] - dil[d] * (kernel[d] - 1) - 1)
            n = span // strides[d] + 1
            if ceil_mode:
                n = -(-span // strides[d]) + 1
                if (n - 1) * strides[d] >= spatial[d] + pads[d]:
                    n -= 1
            self.out.append(n)
            pos = (np.arange(n)[:, None] * strides[d] - pads[d]
                   + np.arange(kernel[d])[None, :] * dil[d])
            per_dim_pos.append(pos)
            per_dim_valid.append((pos >= 0) & (pos < spatial[d]))
            per_dim_inpad.append(pos < spatial[d] + pads[d + k])
        grid = tuple(self.out) + tuple(kernel)      # (outputs..., taps...)

        def spread(v: np.ndarray, d: int) -> np.ndarray:
            shape = [1] * (2 * k)
            shape[d], shape[k + d] = v.shape
            return np.broadcast_to(v.reshape(shape), grid)

        rows = (math.prod(self.out), math.prod(kernel))
        self.valid = np.logical_and.reduce([spread(v, d) for d, v in enumerate(per_dim_valid)])
        self.valid = self.valid.reshape(rows)
        self.inpad = np.logical_and.reduce([spread(v, d) for d, v in enumerate(per_dim_inpad)])
        self.inpad = self.inpad.reshape(rows)
        row_strides = [math.prod(spatial[d + 1:]) for d in range(k)]
        col_strides = [math.prod(spatial[:d]) for d in range(k)]
        index = sum(spread(v, d) * row_strides[d] for d, v in enumerate(per_dim_pos))
        cols = sum(spread(v, d) * col_strides[d] for d, v in enumerate(per_dim_pos))
        self.index = np.where(self.valid, np.reshape(index, rows), 0)    # row-major position
        self.index_cols = np.where(self.valid, np.reshape(cols, rows), 0)  # storage_order 1

    def gather(self, ctx: Context, x: Tensor, fill: float) -> Tensor:
        """x (N, C, *spatial) -> (N, C, outputs, taps); taps outside the input read fill."""
        n, c = x.shape[:2]
        flat = x.reshape((n, c, -1))
        taps = flat.gather(self.index.reshape(-1).astype(np.int32), axis=2)
        taps = taps.reshape((n, c) + self.index.shape)
        if self.valid.all():
            return taps
        return wt.where(ctx.tensor(self.valid), taps, fill)


def _geometry(ctx: Context, x: Tensor, attrs: dict[str, Any]
              ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...],
                         list[int]]:
    spatial = static_shape(ctx, x)[2:]
    kernel = tuple(int(k) for k in attrs["kernel_shape"])
    strides = tuple(int(s) for s in attrs.get("strides", [1] * len(kernel)))
    dil = tuple(int(d) for d in attrs.get("dilations", [1] * len(kernel)))
    return spatial, kernel, strides, dil, conv_pads(attrs, spatial, kernel, strides, dil)


def _simple(x: Tensor, node: Any, attrs: dict[str, Any], dil: tuple[int, ...],
            pads: list[int]) -> bool:
    """Whether the pooling kernels cover this pool (1-D/2-D, symmetric pads, no extras)."""
    k = len(pads) // 2
    return x.ndim in (3, 4) and not attrs.get("ceil_mode", 0) and all(d == 1 for d in dil) \
        and len(node.outputs) == 1 and pads[:k] == pads[k:] and node.op_type != "LpPool" \
        and all(2 * p <= kern for p, kern in zip(pads[:k], attrs["kernel_shape"]))


def _kernel_pool(ctx: Context, x: Tensor, op_type: str, kernel: tuple[int, ...],
                 strides: tuple[int, ...], pads: list[int], include_pad: bool) -> Tensor:
    one_d = x.ndim == 3
    if one_d:
        x = x.reshape(x.shape[:2] + (1,) + x.shape[2:])
        kernel, strides, pads = (1,) + kernel, (1,) + strides, [0, pads[0], 0, pads[1]]
    pad = (pads[0], pads[1])
    k2, s2 = (kernel[0], kernel[1]), (strides[0], strides[1])
    if op_type == "MaxPool":
        y = nn.max_pool2d(x, k2, s2, pad)
    else:
        y = nn.avg_pool2d(x, k2, s2, pad)
        if any(pad) and not include_pad:
            ones = ctx.tensor(np.ones((1, 1) + static_shape(ctx, x)[2:], x.dtype.np_dtype))
            y = y / nn.avg_pool2d(ones, k2, s2, pad)
    return y.reshape(y.shape[:2] + y.shape[3:]) if one_d else y


@op("MaxPool", "AveragePool", "LpPool")
def pool(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    if x.ndim < 3:
        raise OnnxImportError(f"{node.op_type}: the input must be (N, C, *spatial), got rank "
                              f"{x.ndim}")
    spatial, kernel, strides, dil, pads = _geometry(ctx, x, attrs)
    include_pad = bool(attrs.get("count_include_pad", 0))
    if _simple(x, node, attrs, dil, pads):
        return [_kernel_pool(ctx, x, node.op_type, kernel, strides, pads, include_pad)]
    win = Windows(spatial, kernel, strides, dil, pads, bool(attrs.get("ceil_mode", 0)))
    n, c = static_shape(ctx, x)[:2]
    out_shape = (n, c) + tuple(win.out)
    if node.op_type == "MaxPool":
        taps = win.gather(ctx, x, -math.inf if x.dtype.is_float else np.iinfo(np.int32).min)
        outs = [taps.max(-1).reshape(out_shape)]
        if len(node.outputs) > 1:
            outs.append(_argmax_indices(ctx, taps, win, attrs, spatial).reshape(out_shape))
        return outs
    taps = win.gather(ctx, x, 0.0)
    if node.op_type == "AveragePool":
        count = (win.inpad if include_pad else win.valid).sum(-1)
        y = taps.sum(-1) / ctx.tensor(count.astype(x.dtype.np_dtype))
        return [y.reshape(out_shape)]
    p = float(attrs.get("p", 2))
    y = (taps.abs() ** p).sum(-1) ** (1.0 / p)
    return [y.reshape(out_shape)]


def _argmax_indices(ctx: Context, taps: Tensor, win: Windows, attrs: dict[str, Any],
                    spatial: tuple[int, ...]) -> Tensor:
    """MaxPool's Indices: the flat (N, C, *spatial) position of each window's first maximum."""
    n, c = static_shape(ctx, taps)[:2]
    n_out, n_taps = win.index.shape
    table = win.index_cols if attrs.get("storage_order", 0) else win.index
    pick = taps.argmax(-1).cast("int32") + ctx.tensor(
        (np.arange(n_out) * n_taps).astype(np.int32))
    at = ctx.tensor(table.reshape(-1).astype(np.int32)).gather(pick, axis=0)
    base = (np.arange(n * c) * math.prod(spatial)).astype(np.int32).reshape(n, c, 1)
    return at + ctx.tensor(base)


@op("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def global_pool(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                ) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    axes = tuple(range(2, x.ndim))
    if node.op_type == "GlobalAveragePool":
        return [x.mean(axes, True)]
    if node.op_type == "GlobalMaxPool":
        return [x.max(axes, True)]
    p = float(attrs.get("p", 2))
    return [(x.abs() ** p).sum(axes, True) ** (1.0 / p)]


@op("MaxUnpool")
def max_unpool(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    x, idx = lift(ctx, ins[0], ins[1])
    shape = static_shape(ctx, x)
    kernel = [int(k) for k in attrs["kernel_shape"]]
    k = len(kernel)
    strides = [int(s) for s in attrs.get("strides", [1] * k)]
    pads = [int(p) for p in attrs.get("pads", [0] * (2 * k))]
    inferred = shape[:2] + tuple((shape[2 + d] - 1) * strides[d] - pads[d] - pads[d + k]
                                 + kernel[d] for d in range(k))
    zeros = ctx.tensor(np.zeros((math.prod(inferred),), np.float32))
    flat = zeros.scatter_add(idx.reshape((-1,)).cast("int32"),
                             x.reshape((-1,)).cast("float32"))
    y = flat.reshape(inferred).cast(x.dtype)
    if len(ins) > 2 and ins[2] is not None:     # a larger output_shape: zeros after the end
        out_shape = [int(d) for d in ctx.host(ins[2], "MaxUnpool output_shape")]
        for axis, (have, want) in enumerate(zip(inferred, out_shape)):
            if want > have:
                tail = list(static_shape(ctx, y))
                tail[axis] = want - have
                y = wt.concat([y, ctx.tensor(np.zeros(tail, x.dtype.np_dtype))], axis)
    return [y]
