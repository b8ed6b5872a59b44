"""GGUF block quantization in numpy: ONE table of block formats (FORMATS) that the kernels'
lowering (compiler/lower_quant.py: its FMT / QK / QBYTES overrides), the reference backend and
the GGUF loader read; each row's numpy dequantizer; ggml's round-to-nearest Q4_1 / Q8_0
quantizers and fp32 -> F16 / BF16 conversions. Quantized weights travel to the GPU as these
raw blocks packed into uint32 words (`words`) and are dequantized inside the kernels (ops
qmatmul / qgather; shaders/common/qformats.wgsl decodes every row of the table).

A weight of shape (n, k) is n rows of k // block consecutive blocks (GGUF dims [k, n]).
Layouts (ggml's; f16 scales, little-endian; "qs" are 4-bit pairs: byte i holds weight i in
its low and weight i + 16 (legacy) / i + 32 (K-quants, per 64 weights) in its high nibble):
- Q4_0  18 B: d, qs[16]; w = d * (q - 8).       Q4_1 20 B: d, m, qs[16]; w = d * q + m.
- Q5_0  22 B: d, qh u32, qs[16]; q |= bit i of qh << 4; w = d * (q - 16).
- Q5_1  24 B: d, m, qh u32, qs[16]; w = d * q + m.   Q8_0 34 B: d, int8[32]; w = d * q.
- Q2_K  84 B: scales[16] (4-bit scale | 4-bit min), qs[64] (2-bit), d, dmin:
  weight 128 h + 32 j + l (l < 32) is (qs[32 h + l] >> 2 j) & 3 in sub-block 8 h + 2 j + l / 16,
  w = d * sc * q - dmin * m.
- Q3_K 110 B: hmask[32], qs[64], scales[12] (16 6-bit, minus 32), d: q as Q2_K, minus 4 where
  bit (4 h + j) of hmask[l] is clear; w = d * sc * q.
- Q4_K 144 B: d, dmin, scales[12] (8 6-bit scales and mins), qs[128]; sub-block s of 32 is the
  low (s even) or high nibbles of qs[32 (s / 2) ..]; w = d * sc * q - dmin * m.
- Q5_K 176 B: d, dmin, scales[12], qh[32], qs[128]: as Q4_K, plus bit s of qh[l] << 4.
- Q6_K 210 B: ql[128], qh[64], scales int8[16], d: weight 128 h + 32 t + l is the nibble
  (t / 2) of ql[64 h + 32 (t % 2) + l] | ((qh[32 h + l] >> 2 t) & 3) << 4, minus 32, in
  sub-block 8 h + 2 t + l / 16; w = d * sc * q.
- IQ4_NL 18 B: d, qs[16] as Q4_0; w = d * IQ4_VALUES[q] (a non-linear 4-bit grid).
- IQ4_XS 136 B: d, scales_h u16, scales_l[4], qs[128]: sub-block s of 32 is qs[16 s..] (low
  nibbles, then high); its scale (nibble s of scales_l | bits 2 s of scales_h << 4) - 32;
  w = d * sc * IQ4_VALUES[q].
- F16 / BF16 64 B: 32 weights as stored (GGUF's F16 / BF16 tensors have no blocks: a row of
  k % 32 == 0 of them is k / 32 of these); bf16 is the high half of a float32.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

_F32 = np.float32
IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                      np.int8)                  # ggml's kvalues_iq4nl


def _half(b: np.ndarray, at: int) -> np.ndarray:
    """The f16 at byte `at` of every block, as (blocks, 1) float32."""
    return b[:, at:at + 2].copy().view("<f2").astype(_F32)


def _nibbles(qs: np.ndarray, span: int) -> np.ndarray:
    """Nibbles of qs (blocks, bytes) in GGUF order: per `span` bytes, the low nibbles, then
    the high ones."""
    q = qs.reshape(len(qs), -1, 1, span) >> np.array([0, 4], np.uint8).reshape(1, 1, 2, 1)
    return (q & np.uint8(15)).reshape(len(qs), -1)


def _bits(qh: np.ndarray, count: int) -> np.ndarray:
    """Bits 0..count-1 of each little-endian u32 of qh (blocks, 4) as (blocks, count) uint8."""
    v = qh.copy().view("<u4").astype(np.uint32)
    return ((v >> np.arange(count, dtype=np.uint32)) & 1).astype(np.uint8)


def _legacy(b: np.ndarray, five: bool, signed: bool) -> np.ndarray:
    """Q4_0 / Q4_1 / Q5_0 / Q5_1: d (and m) then (qh and) 16 nibble bytes."""
    d = _half(b, 0)
    q = _nibbles(b[:, -16:], 16)
    if five:
        q = q | (_bits(b[:, -20:-16], 32) << np.uint8(4))
    if signed:
        return d * (q.astype(np.int8) - np.int8(16 if five else 8)).astype(_F32)
    return d * q.astype(_F32) + _half(b, 2)


def _q8_0(b: np.ndarray) -> np.ndarray:
    return b[:, 2:].copy().view(np.int8).astype(_F32) * _half(b, 0)


def _scale_min_k4(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K / Q5_K: the 8 6-bit scales and mins packed in 12 bytes."""
    d, m, md = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    sc = np.concatenate([d & 63, (md & 15) | ((d >> 2) & 48)], axis=1)
    mn = np.concatenate([m & 63, (md >> 4) | ((m >> 2) & 48)], axis=1)
    return sc.astype(_F32), mn.astype(_F32)


def _q2_k(b: np.ndarray) -> np.ndarray:
    n = len(b)
    sc = b[:, 0:16]
    dl = (_half(b, 80) * (sc & 15).astype(_F32)).reshape(n, 16, 1)
    ml = (_half(b, 82) * (sc >> 4).astype(_F32)).reshape(n, 16, 1)
    q = (b[:, 16:80].reshape(n, 2, 1, 32) >> np.array([0, 2, 4, 6], np.uint8)
         .reshape(1, 1, 4, 1)) & np.uint8(3)
    return (dl * q.reshape(n, 16, 16).astype(_F32) - ml).reshape(n, 256)


def _q3_k(b: np.ndarray) -> np.ndarray:
    n = len(b)
    s = b[:, 96:108]
    lo = (s[:, :8].reshape(n, 1, 8) >> np.array([0, 4], np.uint8).reshape(1, 2, 1)).reshape(n, 16)
    hi = (s[:, 8:].reshape(n, 1, 4) >> np.array([0, 2, 4, 6], np.uint8).reshape(1, 4, 1)
          ).reshape(n, 16)
    sc = (((lo & 15) | ((hi & 3) << 4)).astype(np.int8) - np.int8(32)).astype(_F32)
    dl = (_half(b, 108) * sc).reshape(n, 16, 1)
    q = (b[:, 32:96].reshape(n, 2, 1, 32) >> np.array([0, 2, 4, 6], np.uint8)
         .reshape(1, 1, 4, 1)) & np.uint8(3)
    h = (b[:, 0:32].reshape(n, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1
    qi = q.reshape(n, 16, 16).astype(np.int8) - ((h ^ 1) << 2).reshape(n, 16, 16).astype(np.int8)
    return (dl * qi.astype(_F32)).reshape(n, 256)


def _q45_k(b: np.ndarray, five: bool) -> np.ndarray:
    n = len(b)
    sc, mn = _scale_min_k4(b[:, 4:16])
    d = (_half(b, 0) * sc).reshape(n, 8, 1)
    dm = (_half(b, 2) * mn).reshape(n, 8, 1)
    q = _nibbles(b[:, -128:], 32).reshape(n, 8, 32)
    if five:
        h = (b[:, 16:48].reshape(n, 1, 32) >> np.arange(8, dtype=np.uint8).reshape(1, 8, 1)) & 1
        q = q | (h << np.uint8(4))
    return (d * q.astype(_F32) - dm).reshape(n, 256)


def _q6_k(b: np.ndarray) -> np.ndarray:
    n = len(b)
    d = (_half(b, 208) * b[:, 192:208].copy().view(np.int8).astype(_F32)).reshape(n, 16, 1)
    ql = _nibbles(b[:, 0:128], 64).reshape(n, 8, 32)
    qh = (b[:, 128:192].reshape(n, 2, 1, 32) >> np.array([0, 2, 4, 6], np.uint8)
          .reshape(1, 1, 4, 1)) & np.uint8(3)
    q = (ql | (qh.reshape(n, 8, 32) << np.uint8(4))).astype(np.int8) - np.int8(32)
    return (d * q.reshape(n, 16, 16).astype(_F32)).reshape(n, 256)


def _iq4_nl(b: np.ndarray) -> np.ndarray:
    return _half(b, 0) * IQ4_VALUES[_nibbles(b[:, 2:], 16)].astype(_F32)


def _iq4_xs(b: np.ndarray) -> np.ndarray:
    n = len(b)
    sub = np.arange(8, dtype=np.uint32)
    high = b[:, 2:4].copy().view("<u2").astype(np.uint32)
    low = b[:, 4:8].copy().view("<u4").astype(np.uint32)
    sc = ((low >> 4 * sub) & 15) | (((high >> 2 * sub) & 3) << 4)
    dl = (_half(b, 0) * (sc.astype(np.int32) - 32).astype(_F32)).reshape(n, 8, 1)
    q = IQ4_VALUES[_nibbles(b[:, 8:], 16)].astype(_F32).reshape(n, 8, 32)
    return (dl * q).reshape(n, 256)


def _f16(b: np.ndarray) -> np.ndarray:
    return b.copy().view("<f2").astype(_F32)


def _bf16(b: np.ndarray) -> np.ndarray:
    return (b.copy().view("<u2").astype(np.uint32) << np.uint32(16)).view(_F32)


def _to_f16(x: np.ndarray) -> np.ndarray:
    return x.astype("<f2").view(np.uint8)


def _to_bf16(x: np.ndarray) -> np.ndarray:
    """ggml_compute_fp32_to_bf16: round to nearest even, NaNs quiet."""
    n = np.ascontiguousarray(x, _F32).view(np.uint32).astype(np.uint64)
    n = np.where((n & 0x7FFFFFFF) > 0x7F800000, (n & 0xFFFF0000) | (64 << 16), n)
    return ((n + (0x7FFF + ((n >> 16) & 1))) >> 16).astype("<u2").view(np.uint8)


@dataclass(frozen=True)
class BlockFormat:
    """One GGUF block format: what the kernels and the numpy dequantizer need to know."""
    name: str           # webrlx's name, the qmatmul / qgather `format` attribute
    ggml: int           # GGML type id; also the kernels' FMT override
    block: int          # weights per block: 32 (legacy), 256 (K-quants)
    nbytes: int         # bytes per block
    halves: tuple[int, ...]   # byte offsets of the block's f16 scales (d, m / dmin)
    decode: Callable[[np.ndarray], np.ndarray]   # (blocks, nbytes) uint8 -> (blocks, block)
    own_path: bool = False    # the GEMV and tiled kernels keep hand-tuned paths (Q4_1, Q8_0)
    # float formats (F16, BF16): float32 (blocks, block) -> their bytes (blocks, nbytes), as
    # ggml rounds; None for quantized ones
    encode: Callable[[np.ndarray], np.ndarray] | None = None


# in the order GGUF files use them most (Ollama's Q4_K_M mixes Q4_K and Q6_K)
FORMATS: dict[str, BlockFormat] = {f.name: f for f in (
    BlockFormat("q4_1", 3, 32, 20, (0, 2), lambda b: _legacy(b, False, False), True),
    BlockFormat("q8_0", 8, 32, 34, (0,), _q8_0, True),
    BlockFormat("q4_k", 12, 256, 144, (0, 2), lambda b: _q45_k(b, False)),
    BlockFormat("q6_k", 14, 256, 210, (208,), _q6_k),
    BlockFormat("q4_0", 2, 32, 18, (0,), lambda b: _legacy(b, False, True)),
    BlockFormat("q5_0", 6, 32, 22, (0,), lambda b: _legacy(b, True, True)),
    BlockFormat("q5_1", 7, 32, 24, (0, 2), lambda b: _legacy(b, True, False)),
    BlockFormat("q5_k", 13, 256, 176, (0, 2), lambda b: _q45_k(b, True)),
    BlockFormat("q2_k", 10, 256, 84, (80, 82), _q2_k),
    BlockFormat("q3_k", 11, 256, 110, (108,), _q3_k),
    BlockFormat("iq4_nl", 20, 32, 18, (0,), _iq4_nl),
    BlockFormat("iq4_xs", 23, 256, 136, (0,), _iq4_xs),
    BlockFormat("f16", 1, 32, 64, (), _f16, encode=_to_f16),
    BlockFormat("bf16", 30, 32, 64, (), _bf16, encode=_to_bf16),
)}


def block_format(fmt: str) -> BlockFormat:
    """Return the table row of format `fmt` ("q4_k", ...), or say which exist."""
    if fmt not in FORMATS:
        raise ValueError(f"quant: format must be one of {tuple(FORMATS)}, got {fmt!r}")
    return FORMATS[fmt]


def _check(fmt: str, shape: tuple[int, ...]) -> tuple[BlockFormat, int, int]:
    f = block_format(fmt)
    if len(shape) != 2 or shape[1] % f.block:
        raise ValueError(f"quant: a {fmt} shape must be (n, k) with k % {f.block} == 0, "
                         f"got {shape}")
    return f, int(shape[0]), int(shape[1])


def nbytes(fmt: str, n: int, k: int) -> int:
    """Bytes of the raw blocks of an (n, k) weight in format fmt."""
    f, n, k = _check(fmt, (n, k))
    return n * (k // f.block) * f.nbytes


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
    f, n, k = _check(fmt, tuple(shape))
    size = nbytes(fmt, n, k)
    data = as_bytes(raw)
    if data.size < size or data.size >= size + 4:
        raise ValueError(f"quant: a ({n}, {k}) {fmt} weight needs {size} bytes "
                         f"(padded to {nwords(fmt, n, k) * 4}), got {data.size}")
    return f.decode(data[:size].reshape(-1, f.nbytes)).reshape(n, k)


def random_blocks(fmt: str, n: int, k: int, seed: int = 0, scale: float = 1e-2) -> np.ndarray:
    """Random raw uint8 blocks of an (n, k) weight: every quant, sub-scale and high bit pattern
    occurs; the f16 scales are uniform in (-scale, scale), finite. Float formats (f16, bf16)
    hold weights uniform in (-scale, scale), encoded."""
    f, n, k = _check(fmt, (n, k))
    rng = np.random.default_rng(seed)
    if f.encode is not None:
        return f.encode(rng.uniform(-scale, scale, (n, k)).astype(_F32)).reshape(-1)
    raw = rng.integers(0, 256, nbytes(fmt, n, k), dtype=np.uint8)
    blocks = raw.reshape(-1, f.nbytes)
    for at in f.halves:
        blocks[:, at:at + 2] = (rng.uniform(-scale, scale, (len(blocks), 1)).astype("<f2")
                                .view(np.uint8))
    return raw


def _roundf(x: np.ndarray) -> np.ndarray:
    """C's roundf: halfway cases away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + np.float32(0.5))


def quantize(x: np.ndarray, fmt: str) -> np.ndarray:
    """Quantize a float32 (n, k) array into raw uint8 q4_1, q8_0, f16 or bf16 blocks, rounding
    to nearest like ggml's reference quantizers (quantize_row_q4_1_ref / quantize_row_q8_0_ref,
    its fp32 -> fp16 / bf16 conversions)."""
    x = np.asarray(x, np.float32)
    if fmt not in ("q4_1", "q8_0", "f16", "bf16"):
        raise ValueError(f"quant: quantize makes q4_1, q8_0, f16 or bf16 blocks, got {fmt!r}; "
                         "the gguf package quantizes q4_0, q5_0 and q5_1")
    f, n, k = _check(fmt, x.shape)
    if f.encode is not None:
        return f.encode(x).reshape(-1)
    blocks = x.reshape(-1, f.block)
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
            q = qi[:, :f.block // 2] | (qi[:, f.block // 2:] << 4)
            head = np.concatenate([d.astype("<f2").view(np.uint8),
                                   lo.astype("<f2").view(np.uint8)], axis=1)
    return np.concatenate([head, q], axis=1).reshape(-1)


def quantize_rows_i8(v: np.ndarray, group: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of a float32 (r, k) array as int8 in groups of `group` along k (the int8 prefill's
    rule, shaders/quant/qrows_i8.wgsl): q = round(v * (127 / amax)) per group, halfway cases to
    even as WGSL's round, with scale amax / 127 (0 for an all-zero group, q then 0). Returns
    (q int8 (r, k), scales float32 (k / group, r)): a group's scales of neighbouring rows are
    neighbours, as the shader stores them."""
    v = np.asarray(v, np.float32)
    r, k = v.shape
    if k % group:
        raise ValueError(f"quant: quantize_rows_i8 needs k ({k}) a multiple of group ({group})")
    g = v.reshape(r, k // group, group)
    amax = np.abs(g).max(axis=2, keepdims=True)
    with np.errstate(divide="ignore"):
        inv = np.where(amax == 0, np.float32(0), np.float32(127) / amax).astype(np.float32)
    q = np.round(g * inv).astype(np.int8).reshape(r, k)
    return q, (amax[:, :, 0] / np.float32(127)).astype(np.float32).T.copy()


def quantize_x8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x rows as the int8 decode GEMVs take them (shaders/quant/qx8.wgsl, llama.cpp's q8_1):
    int8 per 32 values along k by quantize_rows_i8's rule. Returns (q int8 (r, k), scales
    float32 (r, k / 32))."""
    q, s = quantize_rows_i8(x, 32)
    return q, s.T.copy()


def int8_decode_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """What an int8 decode GEMV (shaders/quant/qgemv_i8.wgsl) computes for f32 x (m, k) and the
    dequantized weight w (n, k): x rounded by quantize_x8, then x8 @ w^T in float64 (the
    kernel's sums are exact in i32 within a piece; only f32 rounding of the scaled sums is
    left)."""
    return x8_values(x) @ np.asarray(w, np.float64).T


def x8_values(x: np.ndarray) -> np.ndarray:
    """x (m, k) as the int8 decode GEMVs see it: quantize_x8's int8s times their scales,
    float64."""
    q, s = quantize_x8(x)
    m, k = q.shape
    return (q.astype(np.float64).reshape(m, k // 32, 32) * s[:, :, None]).reshape(m, k)


def mmq_reference(x: np.ndarray, w: np.ndarray, group: int) -> np.ndarray:
    """What the int8 prefill computes for x (m, k) @ w (n, k)^T, float64: both quantized by
    quantize_rows_i8, each group's integer products exact, scaled by the two rows' scales."""
    xq, xs = quantize_rows_i8(x, group)
    wq, ws = quantize_rows_i8(w, group)
    m, k = xq.shape
    out = np.zeros((m, wq.shape[0]))
    for g in range(k // group):
        part = slice(g * group, (g + 1) * group)
        ints = xq[:, part].astype(np.int64) @ wq[:, part].astype(np.int64).T
        out += xs[g][:, None].astype(np.float64) * ws[g][None, :].astype(np.float64) * ints
    return out
