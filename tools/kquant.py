"""A numpy K-quant quantizer: float32 (n, k) -> raw GGUF blocks of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
and of the non-linear IQ4_NL (blocks of 32) and IQ4_XS.

    raw = quantize(x, "Q4_K")     # uint8 (n, k // 256 * 144), k % 256 == 0

The `gguf` package quantizes only the legacy formats; the LLM fixtures of the K types
(tools/make_llm_fixtures.py) are written with this. Plain round-to-nearest, per block of 256:
- each sub-block (16 weights in Q2_K / Q3_K / Q6_K, 32 in Q4_K / Q5_K) gets a float scale
  (and, where the format has mins, a min: max(0, -min x) so that w = d * sc * q - dmin * m);
- the block's f16 super-scales d (and dmin) are the largest sub-scale (min) over the largest
  integer sub-scale (15 for 4-bit, 63 for 6-bit, 31 / 127 for the signed ones);
- IQ4_NL / IQ4_XS: a block's (sub-block's) largest-magnitude weight maps to the grid's -127,
  each weight to the nearest of the 16 grid values (webrlx.quant.IQ4_VALUES);
- the integer sub-scales round to nearest against the f16-rounded d, then each weight rounds
  to nearest against its sub-block's effective scale and is clipped to the format's range.
The bit layouts are those of webrlx/quant.py's module docstring and decoders (ggml's). The
bytes are NOT meant to equal llama.cpp's (its quantizers search scales to lower the error);
only the layout is shared, so any ggml decoder reads them back.
"""
from __future__ import annotations

import numpy as np

from webrlx.quant import IQ4_VALUES

BLOCK_BYTES = {"Q2_K": 84, "Q3_K": 110, "Q4_K": 144, "Q5_K": 176, "Q6_K": 210, "IQ4_NL": 18,
               "IQ4_XS": 136}
BLOCK = {t: 32 if t == "IQ4_NL" else 256 for t in BLOCK_BYTES}     # weights per block
TYPES = tuple(BLOCK_BYTES)
QK = 256
_F32 = np.float32


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b, 0 where b == 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b == 0, _F32(0), a / np.where(b == 0, _F32(1), b)).astype(_F32)


def _f16(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(v rounded to f16 as float32, its 2 little-endian bytes per row) of a (blocks, 1) v."""
    h = v.astype("<f2")
    return h.astype(_F32), h.view(np.uint8).reshape(len(v), 2)


def _rint(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(np.rint(x), lo, hi).astype(np.int32)


def _asym(x: np.ndarray, sub: int, nmax: int, smax: int) -> tuple[np.ndarray, ...]:
    """Q2_K / Q4_K / Q5_K: x (blocks, 256) -> d bytes, dmin bytes, integer scales and mins
    (blocks, 256 / sub) in 0..smax, quants (blocks, 256) in 0..nmax."""
    xs = x.reshape(len(x), -1, sub)
    mn = np.maximum(-xs.min(axis=2), 0)                    # >= 0: w = d sc q - dmin m
    scale = (xs.max(axis=2) + mn) / _F32(nmax)
    d, d_raw = _f16(scale.max(axis=1, keepdims=True) / _F32(smax))
    dmin, dmin_raw = _f16(mn.max(axis=1, keepdims=True) / _F32(smax))
    sc = _rint(_div(scale, d), 0, smax)
    m = _rint(_div(mn, dmin), 0, smax)
    q = _rint(_div(xs + (dmin * m)[..., None], (d * sc)[..., None]), 0, nmax)
    return d_raw, dmin_raw, sc, m, q.reshape(len(x), QK)


def _sym(x: np.ndarray, sub: int, nmin: int, smax: int) -> tuple[np.ndarray, ...]:
    """Q3_K / Q6_K: x (blocks, 256) -> d bytes, signed integer scales (blocks, 256 / sub) in
    -smax-1..smax, quants (blocks, 256) in -nmin..nmin-1. A sub-block's largest-magnitude
    weight maps to -nmin (the side of the range with one more level), as ggml does."""
    xs = x.reshape(len(x), -1, sub)
    peak = np.take_along_axis(xs, np.abs(xs).argmax(axis=2)[..., None], axis=2)[..., 0]
    scale = -peak / _F32(nmin)
    d, d_raw = _f16(np.abs(scale).max(axis=1, keepdims=True) / _F32(smax))
    sc = _rint(_div(scale, d), -smax - 1, smax)
    q = _rint(_div(xs, (d * sc)[..., None]), -nmin, nmin - 1)
    return d_raw, sc, q.reshape(len(x), QK)


def _pack_k4(sc: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Q4_K / Q5_K: 8 6-bit scales and 8 6-bit mins -> 12 bytes (get_scale_min_k4's inverse):
    bytes 0-3 / 4-7 hold scales / mins 0-3 and the top 2 bits of 4-7; bytes 8-11 the low
    nibbles of scales and mins 4-7."""
    lo = (sc[:, :4] | ((sc[:, 4:] >> 4) << 6), m[:, :4] | ((m[:, 4:] >> 4) << 6),
          (sc[:, 4:] & 15) | ((m[:, 4:] & 15) << 4))
    return np.concatenate(lo, axis=1).astype(np.uint8)


def _crumbs(q: np.ndarray) -> np.ndarray:
    """2-bit values (blocks, 256) -> 64 bytes: weight 128 h + 32 j + l at bits 2 j of byte
    32 h + l."""
    q4 = q.reshape(len(q), 2, 4, 32).astype(np.uint8) << (2 * np.arange(4, dtype=np.uint8)
                                                         ).reshape(1, 1, 4, 1)
    return np.bitwise_or.reduce(q4, axis=2).reshape(len(q), 64)


def _nibble_pairs(q: np.ndarray, span: int) -> np.ndarray:
    """4-bit values -> bytes: per 2 * span values, the first span in the low nibbles, the next
    span in the high ones."""
    q2 = q.reshape(len(q), -1, 2, span).astype(np.uint8)
    return (q2[:, :, 0] | (q2[:, :, 1] << 4)).reshape(len(q), -1)


def _bitplane(bits: np.ndarray) -> np.ndarray:
    """0/1 values (blocks, 8 * 32): value 32 s + l -> bit s of byte l (32 bytes)."""
    b = bits.reshape(len(bits), 8, 32).astype(np.uint8) << np.arange(8, dtype=np.uint8
                                                                      ).reshape(1, 8, 1)
    return np.bitwise_or.reduce(b, axis=1)


def _q2_k(x: np.ndarray) -> np.ndarray:
    d, dmin, sc, m, q = _asym(x, 16, 3, 15)
    scales = (sc | (m << 4)).astype(np.uint8)
    return np.concatenate([scales, _crumbs(q), d, dmin], axis=1)


def _q3_k(x: np.ndarray) -> np.ndarray:
    d, sc, q = _sym(x, 16, 4, 31)
    u = (sc + 32).astype(np.uint8)                      # 6 bits: low nibbles, then 2-bit tops
    low = (u[:, :8] & 15) | ((u[:, 8:] & 15) << 4)
    top = (u >> 4).reshape(len(u), 4, 4) << (2 * np.arange(4, dtype=np.uint8)).reshape(1, 4, 1)
    scales = np.concatenate([low, np.bitwise_or.reduce(top, axis=1)], axis=1)
    qu = q + 4                                          # 0..7: bit 2 -> hmask, bits 0-1 -> qs
    hmask = _bitplane((qu >> 2) & 1)                    # weight 32 s + l: bit s of byte l
    return np.concatenate([hmask, _crumbs(qu & 3), scales, d], axis=1)


def _q45_k(x: np.ndarray, five: bool) -> np.ndarray:
    d, dmin, sc, m, q = _asym(x, 32, 31 if five else 15, 63)
    parts = [d, dmin, _pack_k4(sc, m)]
    if five:
        parts.append(_bitplane(q >> 4))
    return np.concatenate(parts + [_nibble_pairs(q & 15, 32)], axis=1)


def _q6_k(x: np.ndarray) -> np.ndarray:
    d, sc, q = _sym(x, 16, 32, 127)
    qu = (q + 32).reshape(len(q), 2, 4, 32)             # weight 128 h + 32 t + l
    lo = (qu & 15).astype(np.uint8)
    ql = (lo[:, :, :2] | (lo[:, :, 2:] << 4)).reshape(len(q), 128)   # byte 64 h + 32 (t%2) + l
    qh = _crumbs((qu >> 4).reshape(len(q), 256))
    return np.concatenate([ql, qh, sc.astype(np.int8).view(np.uint8), d], axis=1)


def _peak_scale(xs: np.ndarray) -> np.ndarray:
    """(..., 1) signed scales mapping each row's largest-magnitude value of xs (..., m) to the
    IQ4 grid's -127."""
    peak = np.take_along_axis(xs, np.abs(xs).argmax(axis=-1)[..., None], axis=-1)
    return peak / _F32(IQ4_VALUES[0])


def _grid(v: np.ndarray) -> np.ndarray:
    """Indices of the IQ4 grid values nearest to v."""
    grid = IQ4_VALUES.astype(_F32)
    return np.abs(v[..., None] - grid).argmin(axis=-1).astype(np.uint8)


def _iq4_nl(x: np.ndarray) -> np.ndarray:
    xs = x.reshape(-1, 32)
    d, d_raw = _f16(_peak_scale(xs))
    return np.concatenate([d_raw, _nibble_pairs(_grid(_div(xs, d)), 16)], axis=1)


def _iq4_xs(x: np.ndarray) -> np.ndarray:
    xs = x.reshape(len(x), 8, 32)
    scale = _peak_scale(xs)[..., 0]
    d, d_raw = _f16(np.abs(scale).max(axis=1, keepdims=True) / _F32(31))
    sc = _rint(_div(scale, d), -32, 31)
    u = (sc + 32).astype(np.uint32)
    sub = np.arange(8, dtype=np.uint32)
    high = np.bitwise_or.reduce((u >> 4) << (2 * sub), axis=1).astype("<u2")
    low = np.bitwise_or.reduce((u & 15) << (4 * sub), axis=1).astype("<u4")
    q = _grid(_div(xs, (d * sc)[..., None]))
    return np.concatenate([d_raw, high.view(np.uint8).reshape(len(x), 2),
                           low.view(np.uint8).reshape(len(x), 4),
                           _nibble_pairs(q.reshape(len(x), 256), 16)], axis=1)


_ENCODERS = {"Q2_K": _q2_k, "Q3_K": _q3_k, "Q4_K": lambda x: _q45_k(x, False),
             "Q5_K": lambda x: _q45_k(x, True), "Q6_K": _q6_k, "IQ4_NL": _iq4_nl,
             "IQ4_XS": _iq4_xs}


def quantize(x: np.ndarray, qtype: str) -> np.ndarray:
    """Raw uint8 blocks (n, k // block * block bytes) of a float32 (n, k) array in qtype (one
    of TYPES), k a multiple of the block (BLOCK: 256, IQ4_NL's 32)."""
    if qtype not in _ENCODERS:
        raise ValueError(f"kquant: qtype must be one of {TYPES}, got {qtype!r}")
    x = np.asarray(x, _F32)
    if x.ndim != 2 or x.shape[1] % BLOCK[qtype]:
        raise ValueError(f"kquant: a {qtype} x must be (n, k) with k % {BLOCK[qtype]} == 0, "
                         f"got {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("kquant: x must be finite")
    raw = _ENCODERS[qtype](x.reshape(-1, BLOCK[qtype]))
    return np.ascontiguousarray(raw).reshape(x.shape[0], -1)
