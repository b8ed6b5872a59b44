"""Signal rows: DFT and STFT as matmuls of the signal with cos/sin matrices computed on the
host (real and complex input, onesided, inverse, irfft, axis, dft_length); the windows and
MelWeightMatrix, whose output shapes are their input values, on the host in numpy."""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .common import lift, norm_axis, onnx_np_dtype, static_shape
from .registry import op


def _scalar(ctx: Context, v: Any, what: str) -> int:
    return int(ctx.host(v, what).reshape(-1)[0])


def _const(ctx: Context, m: np.ndarray) -> Tensor:
    return ctx.g.constant(m.astype(np.float32), "float32")


def _dft_last(ctx: Context, re: Tensor, im: Tensor | None, length: int, inverse: bool,
              onesided: bool) -> tuple[Tensor, Tensor | None]:
    """The DFT of re + i*im along the last axis (im None: real). Returns (re, im); im is None
    for the irfft (inverse and onesided), whose output is real."""
    n_in = int(re.shape[-1])
    if inverse and onesided:       # irfft: Hermitian bins 0..L/2, imag of DC/Nyquist dropped
        bins = min(n_in, length // 2 + 1)
        k = np.arange(bins)[:, None]
        angle = 2 * np.pi * k * np.arange(length)[None, :] / length
        weight = np.where((k == 0) | (2 * k == length), 1.0, 2.0) / length
        out = re.narrow(-1, 0, bins) @ _const(ctx, weight * np.cos(angle))
        if im is not None:
            out = out - im.narrow(-1, 0, bins) @ _const(ctx, weight * np.sin(angle))
        return out, None
    used = min(n_in, length)       # input zero-padded or truncated to length
    bins = length // 2 + 1 if onesided and not inverse else length
    angle = 2 * np.pi * np.arange(used)[:, None] * np.arange(bins)[None, :] / length
    scale = 1.0 / length if inverse else 1.0
    sign = 1.0 if inverse else -1.0          # exp(sign * 2*pi*i*k*n/L)
    cos, sin = _const(ctx, scale * np.cos(angle)), _const(ctx, sign * scale * np.sin(angle))
    r = re.narrow(-1, 0, used) if used != n_in else re
    out_re, out_im = r @ cos, r @ sin
    if im is not None:
        i = im.narrow(-1, 0, used) if used != n_in else im
        out_re, out_im = out_re - i @ sin, out_im + i @ cos
    return out_re, out_im


def _dft(ctx: Context, x: Tensor, axis: int, length: int | None, inverse: bool,
         onesided: bool) -> Tensor:
    """DFT of x (..., 1 | 2) along axis; the result (..., 2), or (..., 1) for an irfft."""
    rank = x.ndim
    axis = norm_axis(axis, rank)
    if axis == rank - 1:
        raise OnnxImportError("DFT: the axis cannot be the last (real/imaginary) one")
    n = static_shape(ctx, x)[axis]
    if length is None:
        length = 2 * (n - 1) if inverse and onesided else n
    parts = [x.narrow(-1, c, 1).squeeze(-1) for c in range(int(x.shape[-1]))]
    if len(parts) > 2:
        raise OnnxImportError(f"DFT: the last dim must be 1 or 2, got {x.shape[-1]}")
    order = [d for d in range(rank - 1) if d != axis] + [axis]
    back = [order.index(d) for d in range(rank - 1)]
    moved = [p.permute(order) for p in parts]
    re, im = _dft_last(ctx, moved[0], moved[1] if len(moved) > 1 else None, length, inverse,
                       onesided)
    outs = [re] if im is None else [re, im]
    return wt.concat([o.permute(back).unsqueeze(-1) for o in outs], -1)


@op("DFT", since=17)
def dft(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    ins = ins + [None] * (3 - len(ins))
    (x,) = lift(ctx, ins[0])
    if ctx.opsets.get("", 0) >= 20:
        axis = -2 if ins[2] is None else _scalar(ctx, ins[2], "axis")
    else:
        axis = attrs.get("axis", 1)
    length = None if ins[1] is None else _scalar(ctx, ins[1], "dft_length")
    y = _dft(ctx, x.cast("float32"), axis, length, bool(attrs.get("inverse", 0)),
             bool(attrs.get("onesided", 0)))
    return [y.cast(x.dtype)]


@op("STFT", since=17)
def stft(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    ins = ins + [None] * (4 - len(ins))
    (x,) = lift(ctx, ins[0])
    step = _scalar(ctx, ins[1], "frame_step")
    window = ins[2]
    if ins[3] is not None:
        frame = _scalar(ctx, ins[3], "frame_length")
    else:
        frame = static_shape(ctx, window)[0] if window is not None else int(x.shape[-2])
    total = static_shape(ctx, x)[-2]
    frames = 1 + (total - frame) // step
    sig = x.cast("float32")
    stacked = wt.concat([sig.narrow(-2, f * step, frame).unsqueeze(-3)
                         for f in range(frames)], -3)            # (batch, frames, frame, c)
    if window is not None:
        stacked = stacked * ctx.tensor(window).cast("float32").reshape((frame, 1))
    y = _dft(ctx, stacked, -2, frame, False, bool(attrs.get("onesided", 1)))
    return [y.cast(x.dtype)]


def _window(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    size = int(np.asarray(ins[0]).reshape(-1)[0])
    n = np.arange(size, dtype=np.float64)
    period = size if attrs.get("periodic", 1) else size - 1
    phase = 2 * np.pi * n / period
    if node.op_type == "HannWindow":
        w = np.sin(phase / 2) ** 2
    elif node.op_type == "HammingWindow":
        w = 25 / 46 - (21 / 46) * np.cos(phase)
    else:
        w = 0.42 - 0.5 * np.cos(phase) + 0.08 * np.cos(2 * phase)
    return [w.astype(onnx_np_dtype(attrs.get("output_datatype", 1)))]


@op("HannWindow", "HammingWindow", "BlackmanWindow", since=17, host=_window)
def window(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return _window(node, [ctx.host(ins[0], "the window size (the output's shape)")], attrs)


def _mel(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    """The reference evaluator's triangular mel filters (bins from 700 (10^(m/2595) - 1))."""
    mels, length, rate = (int(np.asarray(v).reshape(-1)[0]) for v in ins[:3])
    low, high = (float(np.asarray(v).reshape(-1)[0]) for v in ins[3:5])
    lo_mel, hi_mel = (2595 * np.log10(1 + f / 700) for f in (low, high))
    points = np.arange(mels + 2) * ((hi_mel - lo_mel) / (mels + 2)) + lo_mel
    hz = 700 * (np.power(10, points / 2595) - 1)
    bins = (((length + 1) * hz) // rate).astype(int)
    out = np.zeros((length // 2 + 1, mels))
    for i in range(mels):
        left, center, right = bins[i], bins[i + 1], bins[i + 2]
        if center == left:
            out[center, i] = 1
        else:
            out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / (right - center)
    return [out.astype(onnx_np_dtype(attrs.get("output_datatype", 1)))]


@op("MelWeightMatrix", since=17, host=_mel)
def mel_weight_matrix(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                      ) -> list[Any]:
    what = "the MelWeightMatrix inputs (they set its shape)"
    return _mel(node, [ctx.host(v, what) for v in ins], attrs)
