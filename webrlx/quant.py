"""GGUF block quantization (Q4_1, Q8_0) in numpy: block layouts, dequantize, and ggml's
round-to-nearest reference quantizers. Quantized weights travel to the GPU as these raw blocks,
packed into uint32 words (`words`), and are dequantized inside the kernels (ops qmatmul/qgather).

A weight of shape (n, k) is n rows of k // 32 consecutive blocks (GGUF dims [k, n]).
- Q4_1, 20 bytes: f16 d, f16 m, 16 bytes qs; w[j] = d * (qs[j] & 0xF) + m,
  w[j + 16] = d * (qs[j] >> 4) + m.
- Q8_0, 34 bytes: f16 d, 32 int8 qs; w[j] = d * qs[j]. Blocks are only 2-byte aligned.
"""
from __future__ import annotations

import numpy as np

BLOCK = 32                                      # weights per block, every format here
BLOCK_BYTES = {"q4_1": 20, "q8_0": 34}          # bytes per block
FORMATS = tuple(BLOCK_BYTES)


def _check(fmt: str, shape: tuple[int, ...]) -> tuple[int, int]:
    if fmt not in BLOCK_BYTES:
        raise ValueError(f"quant: format must be one of {FORMATS}, got {fmt!r}")
    if len(shape) != 2 or shape[1] % BLOCK:
        raise ValueError(f"quant: shape must be (n, k) with k % {BLOCK} == 0, got {shape}")
    return int(shape[0]), int(shape[1])


def nbytes(fmt: str, n: int, k: int) -> int:
    """Bytes of the raw blocks of an (n, k) weight in format fmt."""
    _check(fmt, (n, k))
    return n * (k // BLOCK) * BLOCK_BYTES[fmt]


def nwords(fmt: str, n: int, k: int) -> int:
    """uint32 words holding an (n, k) weight's raw blocks (padded to 4 bytes)."""
    return -(-nbytes(fmt, n, k) // 4)


def words(raw: np.ndarray) -> np.ndarray:
    """Return raw block bytes as the uint32 array a qmatmul/qgather param holds (zero-padded
    to a multiple of 4 bytes, little-endian)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8).reshape(-1)
    pad = -raw.size % 4
    if pad:
        raw = np.concatenate([raw, np.zeros(pad, np.uint8)])
    return raw.view("<u4").astype(np.uint32)


def as_bytes(data: np.ndarray) -> np.ndarray:
    """View raw blocks given as uint8 bytes or as uint32 words (`words`) as uint8 bytes."""
    data = np.ascontiguousarray(data)
    if data.dtype == np.uint32:
        return data.astype("<u4", copy=False).reshape(-1).view(np.uint8)
    if data.dtype != np.uint8:
        raise TypeError(f"quant: raw blocks must be uint8 bytes or uint32 words, got {data.dtype}")
    return data.reshape(-1)


def dequantize(raw: np.ndarray, fmt: str, shape: tuple[int, int]) -> np.ndarray:
    """Return the float32 (n, k) weight stored in raw blocks (uint8 bytes or uint32 words)."""
    n, k = _check(fmt, tuple(shape))
    size = nbytes(fmt, n, k)
    data = as_bytes(raw)
    if data.size < size or data.size >= size + 4:
        raise ValueError(f"quant: a ({n}, {k}) {fmt} weight needs {size} bytes "
                         f"(padded to {nwords(fmt, n, k) * 4}), got {data.size}")
    blocks = data[:size].reshape(-1, BLOCK_BYTES[fmt])
    d = blocks[:, 0:2].copy().view("<f2").astype(np.float32)
    if fmt == "q8_0":
        q = blocks[:, 2:].copy().view(np.int8).astype(np.float32)
        w = d * q
    else:
        m = blocks[:, 2:4].copy().view("<f2").astype(np.float32)
        qs = blocks[:, 4:]
        q = np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.float32)
        w = d * q + m
    return w.reshape(n, k)


def _roundf(x: np.ndarray) -> np.ndarray:
    """C's roundf: halfway cases away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + np.float32(0.5))


def quantize(x: np.ndarray, fmt: str) -> np.ndarray:
    """Quantize a float32 (n, k) array into raw uint8 blocks, rounding to nearest like ggml's
    reference quantizers (quantize_row_q4_1_ref / quantize_row_q8_0_ref)."""
    x = np.asarray(x, np.float32)
    n, k = _check(fmt, x.shape)
    blocks = x.reshape(-1, BLOCK)
    with np.errstate(divide="ignore"):
        if fmt == "q8_0":
            d = np.abs(blocks).max(axis=1, keepdims=True) / np.float32(127)
            inv = np.where(d == 0, np.float32(0), np.float32(1) / d)
            q = _roundf(blocks * inv).astype(np.int8).view(np.uint8)
            head = d.astype("<f2").view(np.uint8)
        else:
            lo = blocks.min(axis=1, keepdims=True)
            d = (blocks.max(axis=1, keepdims=True) - lo) / np.float32(15)
            inv = np.where(d == 0, np.float32(0), np.float32(1) / d)
            qi = np.minimum(np.trunc((blocks - lo) * inv + np.float32(0.5)), 15).astype(np.uint8)
            q = qi[:, :BLOCK // 2] | (qi[:, BLOCK // 2:] << 4)
            head = np.concatenate([d.astype("<f2").view(np.uint8),
                                   lo.astype("<f2").view(np.uint8)], axis=1)
    return np.concatenate([head, q], axis=1).reshape(-1)
