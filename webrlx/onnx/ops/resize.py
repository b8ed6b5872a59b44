"""Image-sampling rows: Resize (nearest / linear / cubic, every coordinate transformation mode,
antialias, exclude_outside, axes, keep_aspect_ratio_policy), Upsample, CenterCropPad, AffineGrid,
GridSample, RoiAlign and DeformConv. Resize is separable: per resized axis the host computes,
from shapes and attributes only, which input taps each output reads and with what weights; the
device gathers the taps, weighs and sums them. GridSample's, RoiAlign's and DeformConv's
coordinates are data: the device computes them."""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .common import lift, norm_axis, static_shape
from .registry import op

Coeffs = Callable[[float, float], np.ndarray]       # (ratio in (0, 1], scale) -> tap weights


def _nearest(rule: str) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if ratio == 1.0:
            return np.array([0.0, 1.0])
        pick = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                "floor": False, "ceil": True}[rule]
        return np.array([0.0, 1.0]) if pick else np.array([1.0, 0.0])
    return coeffs


def _linear(antialias: bool) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([1 - ratio, ratio])
        s = min(scale, 1.0)
        start = int(np.floor(-1 / s) + 1)
        args = (np.arange(start, 2 - start) - ratio) * s
        w = np.clip(1 - np.abs(args), 0, 1)
        return w / w.sum()
    return coeffs


def _cubic_kernel(x: np.ndarray, a: float) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _cubic(antialias: bool, a: float) -> Coeffs:
    def coeffs(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return _cubic_kernel(np.array([ratio + 1, ratio, 1 - ratio, 2 - ratio]), a)
        s = min(scale, 1.0)
        start = int(np.floor(-2 / s) + 1)
        w = _cubic_kernel(s * (np.arange(start, 2 - start) - ratio), a)
        return w / w.sum()
    return coeffs


def _source_coords(ctm: str, n_out: int, n_in: int, scale: float,
                   roi: tuple[float, float] | None) -> np.ndarray:
    """The input coordinate each output index maps to (ONNX coordinate_transformation_mode)."""
    y = np.arange(n_out, dtype=np.float64)
    out_len = scale * n_in
    if ctm == "align_corners":
        return np.zeros(n_out) if out_len == 1 else y * (n_in - 1) / (out_len - 1)
    if ctm == "asymmetric":
        return y / scale
    if ctm == "tf_crop_and_resize":
        lo, hi = roi if roi is not None else (0.0, 1.0)
        x = np.full(n_out, (hi - lo) * (n_in - 1) / 2) if out_len == 1 else \
            y * (hi - lo) * (n_in - 1) / (out_len - 1)
        return x + lo * (n_in - 1)
    if ctm == "pytorch_half_pixel":
        return np.full(n_out, -0.5) if out_len == 1 else (y + 0.5) / scale - 0.5
    if ctm in ("half_pixel", "tf_half_pixel_for_nn"):
        return (y + 0.5) / scale - (0.5 if ctm == "half_pixel" else 0.0)
    if ctm == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / out_len)
        return offset + (y + 0.5) / scale - 0.5
    raise OnnxImportError(f"Resize: unknown coordinate_transformation_mode {ctm!r}")


def axis_taps(n_in: int, n_out: int, scale: float, coeff_fn: Coeffs, ctm: str,
              roi: tuple[float, float] | None, exclude_outside: bool
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(taps (n_out, n) input indices, weights (n_out, n), extrapolated (n_out,) bool)."""
    x = _source_coords(ctm, n_out, n_in, scale, roi)
    ratio = np.where(x == np.floor(x), 1.0, x - np.floor(x))
    weights = np.stack([coeff_fn(float(r), scale) for r in ratio])
    n = weights.shape[1]
    pad = -(-n // 2)
    base = np.floor(x + pad)
    frac = x + pad - base
    if n % 2 == 0:      # window centred between taps; an exact integer prefers the left one
        first = base + np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        first = base + np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    taps = first[:, None].astype(np.int64) + np.arange(n)[None, :] - pad
    if exclude_outside:
        weights = np.where((taps < 0) | (taps >= n_in), 0.0, weights)
        total = weights.sum(-1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    extrapolated = (x < 0) | (x > n_in - 1) if ctm == "tf_crop_and_resize" else \
        np.zeros(n_out, bool)
    return np.clip(taps, 0, n_in - 1), weights, extrapolated


def _resample_axis(ctx: Context, x: Tensor, axis: int, taps: np.ndarray, weights: np.ndarray,
                   nearest: bool) -> Tensor:
    """Gather the taps along axis, weigh and sum them (nearest: pick the one weighted tap)."""
    shape = static_shape(ctx, x)
    n_out, n = taps.shape
    if nearest:
        return x.gather(taps[np.arange(n_out), weights.argmax(-1)].astype(np.int32), axis)
    picked = x.gather(taps.reshape(-1).astype(np.int32), axis)
    picked = picked.reshape(shape[:axis] + (n_out, n) + shape[axis + 1:])
    w = weights.reshape((n_out, n) + (1,) * (len(shape) - axis - 1))
    return (picked * ctx.tensor(w.astype(x.dtype.np_dtype))).sum(axis + 1)


def _optional(ctx: Context, ins: list[Any], i: int, what: str) -> np.ndarray | None:
    if len(ins) <= i or ins[i] is None:
        return None
    v = ctx.host(ins[i], what)
    return v if v.size else None


def resize(ctx: Context, x: Tensor, attrs: dict[str, Any], roi: np.ndarray | None,
           scales: np.ndarray | None, sizes: np.ndarray | None, opset: int) -> Tensor:
    """Resize x the ONNX way; scales / sizes / roi are host values over attrs' axes."""
    shape = static_shape(ctx, x)
    rank = len(shape)
    axes = [norm_axis(int(a), rank) for a in attrs.get("axes", range(rank))]
    mode = attrs.get("mode", b"nearest").decode()
    ctm = attrs.get("coordinate_transformation_mode",
                    b"half_pixel" if opset >= 11 else b"asymmetric").decode()
    if sizes is not None:
        scale_of = {a: int(s) / shape[a] for a, s in zip(axes, sizes)}
        out = {a: int(s) for a, s in zip(axes, sizes)}
        policy = attrs.get("keep_aspect_ratio_policy", b"stretch").decode()
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(scale_of.values())
            scale_of = dict.fromkeys(axes, s)
            out = {a: int(s * shape[a] + 0.5) for a in axes}
    elif scales is not None:
        scale_of = {a: float(s) for a, s in zip(axes, scales.astype(np.float32))}
        out = {a: int(scale_of[a] * shape[a]) for a in axes}
    else:
        raise OnnxImportError(f"{ctx.node_name}: Resize needs scales or sizes")
    rois: dict[int, tuple[float, float]] = {}
    if roi is not None and ctm == "tf_crop_and_resize":
        k = len(axes)
        rois = {a: (float(roi[i]), float(roi[i + k])) for i, a in enumerate(axes)}
    if mode == "nearest":
        rule = attrs.get("nearest_mode", b"round_prefer_floor" if opset >= 11 else b"floor")
        coeff_fn = _nearest(rule.decode())
    elif mode in ("linear", "bilinear"):
        coeff_fn = _linear(bool(attrs.get("antialias", 0)))
    elif mode == "cubic":
        coeff_fn = _cubic(bool(attrs.get("antialias", 0)), attrs.get("cubic_coeff_a", -0.75))
    else:
        raise OnnxImportError(f"{ctx.node_name}: Resize mode {mode!r} is not supported")
    y = x if x.dtype.is_float or mode == "nearest" else x.cast("float32")
    fill = float(attrs.get("extrapolation_value", 0.0))
    for a in axes:
        lo_hi = rois.get(a)
        if math.isclose(scale_of[a], 1.0) and out[a] == shape[a] and \
                (lo_hi is None or (math.isclose(lo_hi[0], 0) and math.isclose(lo_hi[1], 1))):
            continue
        taps, weights, outside = axis_taps(shape[a], out[a], scale_of[a], coeff_fn, ctm, lo_hi,
                                           bool(attrs.get("exclude_outside", 0)))
        y = _resample_axis(ctx, y, a, taps, weights, mode == "nearest")
        if outside.any():
            at = [1] * rank
            at[a] = out[a]
            y = wt.where(ctx.tensor(outside.reshape(at)), fill, y)
    return y if y.dtype == x.dtype else y.round().cast(x.dtype)


@op("Resize")
def resize_row(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    opset = ctx.opsets.get("", 0)
    if opset < 11:
        return [resize(ctx, x, attrs, None, _optional(ctx, ins, 1, "Resize scales"), None,
                       opset)]
    return [resize(ctx, x, attrs, _optional(ctx, ins, 1, "Resize roi"),
                   _optional(ctx, ins, 2, "Resize scales"),
                   _optional(ctx, ins, 3, "Resize sizes"), opset)]


@op("Upsample")
def upsample(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    scales = np.asarray(attrs["scales"], np.float32) if "scales" in attrs else \
        ctx.host(ins[1], "Upsample scales")
    return [resize(ctx, x, {"mode": attrs.get("mode", b"nearest")}, None, scales, None, 9)]


@op("CenterCropPad")
def center_crop_pad(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                    ) -> list[Tensor]:
    (x,) = lift(ctx, ins[0])
    shape = static_shape(ctx, x)
    want = [int(d) for d in ctx.host(ins[1], "CenterCropPad shape")]
    axes = [norm_axis(int(a), len(shape)) for a in attrs.get("axes", range(len(shape)))]
    for a, size in zip(axes, want):
        have = static_shape(ctx, x)[a]
        if size < have:                                   # crop: drop more at the end
            x = x.narrow(a, (have - size) // 2, size)
        elif size > have:                                 # pad with zeros: more at the end
            lo = (size - have) // 2
            parts: list[Tensor] = []
            for n, piece in ((lo, None), (0, x), (size - have - lo, None)):
                if piece is not None:
                    parts.append(piece)
                elif n:
                    zshape = list(static_shape(ctx, x))
                    zshape[a] = n
                    parts.append(ctx.tensor(np.zeros(zshape, x.dtype.np_dtype)))
            x = wt.concat(parts, a)
    return [x]


@op("AffineGrid")
def affine_grid(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                ) -> list[Tensor]:
    (theta,) = lift(ctx, ins[0])
    size = [int(d) for d in ctx.host(ins[1], "AffineGrid size")]
    n, spatial = size[0], size[2:]
    align = bool(attrs.get("align_corners", 0))
    axes_1d = []
    for d in spatial:
        if align:
            axes_1d.append(np.linspace(-1, 1, d) if d > 1 else np.zeros(1))
        else:
            axes_1d.append((np.arange(d) * 2 + 1) / d - 1)
    mesh = np.meshgrid(*axes_1d, indexing="ij")             # per spatial dim, (D, H, W)
    coords = [m.reshape(-1) for m in reversed(mesh)]         # x (last dim) first
    base = np.stack(coords + [np.ones_like(coords[0])], -1).astype(np.float32)  # (L, k+1)
    grid = ctx.tensor(base.astype(theta.dtype.np_dtype)) @ theta.permute(0, 2, 1)
    return [grid.reshape((n,) + tuple(spatial) + (len(spatial),))]


# -- GridSample: the grid is data, so coordinates, taps and weights are computed on the device --
def _reflect(v: Tensor, lo: float, hi: float) -> Tensor:
    """Fold v into [lo, hi] by reflecting at the borders (as often as needed)."""
    span = hi - lo
    below, above = v < lo, v > hi
    dist = wt.where(below, lo - v, v - hi)
    folds = (dist / span).floor()
    rest = dist - folds * span
    even = (folds - (folds * 0.5).floor() * 2.0) == 0.0
    up, down = rest + lo, (rest * -1.0) + hi
    return wt.where(below, wt.where(even, up, down), wt.where(above, wt.where(even, down, up), v))


def _cubic_weights(f: Tensor) -> list[Tensor]:
    a = -0.75

    def near(t: Tensor) -> Tensor:
        return ((t * (a + 2) - (a + 3)) * t) * t + 1.0

    def far(t: Tensor) -> Tensor:
        return ((t * a - 5 * a) * t + 8 * a) * t - 4 * a

    g = f * -1.0 + 1.0
    return [far(f + 1.0), near(f), near(g), far(g + 1.0)]


def _grid_taps(v: Tensor, size: int, mode: str, padding: str, lo: float, hi: float
               ) -> list[tuple[Tensor, Tensor]]:
    """(index as float, weight) for each tap along one dim; weight 0 where a zeros-padded tap
    falls outside, indices of other paddings clamped or reflected into range."""
    taps: list[tuple[Tensor, Tensor | None]] = []
    if mode == "nearest":
        taps = [(v, None)]
    else:
        base = v.floor()
        f = v - base
        if mode == "linear":
            taps = [(base, f * -1.0 + 1.0), (base + 1.0, f)]
        else:
            ws = _cubic_weights(f)
            taps = [(base + float(d), w) for d, w in zip((-1, 0, 1, 2), ws)]
    out: list[tuple[Tensor, Tensor]] = []
    for i, w in taps:
        if padding == "zeros":
            inside = (i >= 0.0).cast("float32") * (i < float(size)).cast("float32")
            w = inside if w is None else w * inside
            i = i.clamp(0.0, float(size - 1))
        elif padding == "border":
            i = i.clamp(0.0, float(size - 1))
        else:                                   # reflection, then truncation toward zero
            r = _reflect(i, lo, hi)
            i = wt.where(r < 0.0, r.ceil(), r.floor()).clamp(0.0, float(size - 1))
        out.append((i, w if w is not None else (i * 0.0 + 1.0)))
    return out


@op("GridSample")
def grid_sample(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                ) -> list[Tensor]:
    x, grid = lift(ctx, ins[0], ins[1])
    xs, gs = static_shape(ctx, x), static_shape(ctx, grid)
    n, c, spatial = xs[0], xs[1], xs[2:]
    k = len(spatial)
    mode = attrs.get("mode", b"linear" if ctx.opsets.get("", 0) >= 20 else b"bilinear").decode()
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    padding = attrs.get("padding_mode", b"zeros").decode()
    align = bool(attrs.get("align_corners", 0))
    n_out = math.prod(gs[1:-1])
    g = grid.cast("float32").reshape((n, n_out, k))
    per_dim = []
    for d, size in enumerate(spatial):
        u = g.narrow(2, k - 1 - d, 1).reshape((n, n_out))     # grid's last dim is (x, y, z)
        v = (u + 1.0) * (0.5 * (size - 1)) if align else ((u + 1.0) * float(size) - 1.0) * 0.5
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if mode == "nearest":
            v = v.round()
        if padding == "border":
            v = v.clamp(0.0, float(size - 1))
        elif padding == "reflection":
            v = _reflect(v, lo, hi)
        per_dim.append(_grid_taps(v, size, mode, padding, lo, hi))
    strides = [math.prod(spatial[d + 1:]) for d in range(k)]
    flat_idx, weights = [], []
    for combo in np.ndindex(*(len(t) for t in per_dim)):
        idx: Tensor | None = None
        w: Tensor | None = None
        for d, t in enumerate(combo):
            i_d, w_d = per_dim[d][t]
            term = i_d * float(strides[d])
            idx = term if idx is None else idx + term
            w = w_d if w is None else w * w_d
        assert idx is not None and w is not None
        flat_idx.append(idx.reshape((n, n_out, 1)))
        weights.append(w.reshape((n, n_out, 1)))
    n_taps = len(flat_idx)
    idx_all = wt.concat(flat_idx, 2) if n_taps > 1 else flat_idx[0]      # (N, O, T)
    w_all = wt.concat(weights, 2) if n_taps > 1 else weights[0]
    offset = ctx.tensor((np.arange(n) * math.prod(spatial)).astype(np.float32).reshape(n, 1, 1))
    rows = (idx_all + offset).cast("int32").reshape((-1,))
    table = x.cast("float32").reshape((n, c, -1)).permute(0, 2, 1).reshape((-1, c))
    picked = table.gather(rows, axis=0).reshape((n, n_out, n_taps, c))
    y = (picked * w_all.reshape((n, n_out, n_taps, 1))).sum(2)          # (N, O, C)
    return [y.permute(0, 2, 1).reshape((n, c) + gs[1:-1]).cast(x.dtype)]


def _rows_of(ctx: Context, x: Tensor, groups: int = 1) -> Tensor:
    """x (N, C, *spatial) as a row table (N * groups * pixels, C / groups) for row gathers."""
    n, c = static_shape(ctx, x)[:2]
    per = x.reshape((n, groups, c // groups, -1)).permute(0, 1, 3, 2)
    return per.reshape((-1, c // groups))


@op("RoiAlign")
def roi_align(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    x, rois, batch = lift(ctx, *ins[:3])
    n, c, h, w = static_shape(ctx, x)
    r = static_shape(ctx, rois)[0]
    ph, pw = int(attrs.get("output_height", 1)), int(attrs.get("output_width", 1))
    ratio = int(attrs.get("sampling_ratio", 0))
    if ratio <= 0:
        raise OnnxImportError(f"{ctx.node_name}: RoiAlign sampling_ratio=0 (adaptive) makes "
                              "the sample count depend on the rois' values; give a fixed "
                              "sampling_ratio")
    half = attrs.get("coordinate_transformation_mode", b"half_pixel") == b"half_pixel" \
        and ctx.opsets.get("", 0) >= 16
    scale = float(attrs.get("spatial_scale", 1.0))
    box = rois.cast("float32") * scale - (0.5 if half else 0.0)      # (R, 4): x0 y0 x1 y1
    axes = []
    for start_col, size, bins in ((1, h, ph), (0, w, pw)):           # y, then x
        start = box.narrow(1, start_col, 1)
        extent = box.narrow(1, start_col + 2, 1) - start
        if not half:
            extent = extent.maximum(1.0)
        # sample s of bin b sits at start + (b + (s + 0.5) / ratio) * extent / bins
        at = (np.arange(bins)[:, None] + (np.arange(ratio)[None, :] + 0.5) / ratio).reshape(-1)
        v = start + (extent / float(bins)) * ctx.tensor(at.astype(np.float32).reshape(1, -1))
        inside = (v >= -1.0).cast("float32") * (v <= float(size)).cast("float32")
        v = v.maximum(0.0)
        edge = v.floor() >= float(size - 1)
        low = wt.where(edge, float(size - 1), v.floor())
        high = wt.where(edge, float(size - 1), v.floor() + 1.0)
        frac = wt.where(edge, 0.0, v - v.floor())
        axes.append([(low, (frac * -1.0 + 1.0) * inside), (high, frac * inside)])
    idx, wts = [], []
    for (yi, yw), (xi, xw) in itertools.product(axes[0], axes[1]):
        # (R, ph*ratio, 1) x (R, 1, pw*ratio) -> (R, ph, pw, ratio, ratio) -> (R, ph*pw, S)
        def cell(a: Tensor, b: Tensor) -> Tensor:
            grid = a.reshape((r, ph, 1, ratio, 1)) + b.reshape((r, 1, pw, 1, ratio))
            return grid.reshape((r, ph * pw, ratio * ratio, 1))
        idx.append(cell(yi * float(w), xi))
        wts.append(cell(yw, xw * 0.0) * cell(yw * 0.0, xw))
    rows = wt.concat(idx, 3) + (batch.cast("float32") * float(h * w)).reshape((r, 1, 1, 1))
    weights = wt.concat(wts, 3)                                      # (R, bins, S, 4)
    picked = _rows_of(ctx, x.cast("float32")).gather(rows.cast("int32").reshape((-1,)), 0)
    vals = picked.reshape((r, ph * pw, ratio * ratio, 4, c)) * \
        weights.reshape((r, ph * pw, ratio * ratio, 4, 1))
    if attrs.get("mode", b"avg") == b"max":
        y = vals.max(3).max(2)
    else:
        y = vals.sum(3).sum(2) * (1.0 / (ratio * ratio))
    return [y.permute(0, 2, 1).reshape((r, c, ph, pw)).cast(x.dtype)]


@op("DeformConv")
def deform_conv(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                ) -> list[Tensor]:
    x, w, offset = lift(ctx, *ins[:3])
    n, c, h, wd = static_shape(ctx, x)
    oc, _, kh, kw = static_shape(ctx, w)
    oh, ow = static_shape(ctx, offset)[2:]
    groups, og = int(attrs.get("group", 1)), int(attrs.get("offset_group", 1))
    sh, sw = (int(s) for s in attrs.get("strides", [1, 1]))
    dh, dw = (int(d) for d in attrs.get("dilations", [1, 1]))
    pads = [int(p) for p in attrs.get("pads", [0, 0, 0, 0])]
    k, length = kh * kw, oh * ow
    off = offset.cast("float32").reshape((n, og, k, 2, length))
    base_h = (np.arange(oh)[None, :, None] * sh - pads[0]
              + np.arange(kh)[:, None, None] * dh)                  # (kh, oh, 1)
    base_w = (np.arange(ow)[None, None, :] * sw - pads[1]
              + np.arange(kw)[:, None, None] * dw)                  # (kw, 1, ow)
    base_h = np.broadcast_to(base_h[:, None], (kh, kw, oh, ow)).reshape(k, length)
    base_w = np.broadcast_to(base_w[None], (kh, kw, oh, ow)).reshape(k, length)
    per_dim = []
    for d, (base, size) in enumerate(((base_h, h), (base_w, wd))):
        v = off.narrow(3, d, 1).reshape((n, og, k, length)) + ctx.tensor(
            base.astype(np.float32))
        per_dim.append(_grid_taps(v, size, "linear", "zeros", 0.0, size - 1.0))
    mask = ins[4] if len(ins) > 4 and ins[4] is not None else None
    keep = ctx.tensor(mask).cast("float32").reshape((n, og, k, length)) \
        if mask is not None else None
    group_rows = ctx.tensor((np.arange(n * og) * h * wd).astype(np.float32)
                            .reshape(n, og, 1, 1))
    table = _rows_of(ctx, x.cast("float32"), og)
    sampled: Tensor | None = None
    for (yi, yw), (xi, xw) in itertools.product(*per_dim):
        rows = (yi * float(wd) + xi + group_rows).cast("int32").reshape((-1,))
        wgt = yw * xw if keep is None else yw * xw * keep
        term = table.gather(rows, 0).reshape((n, og, k, length, c // og)) * \
            wgt.reshape((n, og, k, length, 1))
        sampled = term if sampled is None else sampled + term
    assert sampled is not None
    cols = sampled.permute(0, 1, 4, 2, 3).reshape((n, groups, c // groups * k, length))
    wg = w.cast("float32").reshape((1, groups, oc // groups, c // groups * k))
    y = (wg @ cols).reshape((n, oc, oh, ow))
    if len(ins) > 3 and ins[3] is not None:
        y = y + ctx.tensor(ins[3]).cast("float32").reshape((1, oc, 1, 1))
    return [y.cast(x.dtype)]
