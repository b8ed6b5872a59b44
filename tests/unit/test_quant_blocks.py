"""webrlx.quant: block dequantization checked against the gguf package (ggml's Python twin),
quantizers bit-exact with gguf's ports of ggml's reference quantizers, round-trip error."""
from __future__ import annotations

import numpy as np
import pytest

from webrlx import quant

gguf_quants = pytest.importorskip("gguf.quants")
from gguf import GGMLQuantizationType  # noqa: E402

QTYPE = {"q4_1": GGMLQuantizationType.Q4_1, "q8_0": GGMLQuantizationType.Q8_0}
SHAPES = [(1, 32), (3, 96), (7, 576), (5, 1536)]


def _weights(n: int, k: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.05, (n, k)).astype(np.float32)
    x[0, :32] = 0.0                        # an all-zero block: d = 0
    return x


def _random_blocks(fmt: str, n: int, k: int) -> np.ndarray:
    """Random bytes with finite f16 scales: every bit pattern of qs is exercised."""
    rng = np.random.default_rng(n * k)
    raw = rng.integers(0, 256, quant.nbytes(fmt, n, k), dtype=np.uint8)
    blocks = raw.reshape(-1, quant.BLOCK_BYTES[fmt])
    heads = 2 if fmt == "q8_0" else 4
    blocks[:, :heads] = rng.uniform(-2, 2, (len(blocks), heads // 2)).astype("<f2").view(np.uint8)
    return raw


@pytest.mark.parametrize("fmt", quant.FORMATS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_dequantize_matches_gguf(fmt, shape):
    raw = _random_blocks(fmt, *shape)
    want = gguf_quants.dequantize(raw.reshape(shape[0], -1), QTYPE[fmt])
    np.testing.assert_array_equal(quant.dequantize(raw, fmt, shape), want)
    # the uint32 words a param holds dequantize the same
    np.testing.assert_array_equal(quant.dequantize(quant.words(raw), fmt, shape), want)


@pytest.mark.parametrize("fmt", quant.FORMATS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_quantize_matches_gguf_bit_for_bit(fmt, shape):
    x = _weights(*shape)
    want = gguf_quants.quantize(x, QTYPE[fmt]).reshape(-1)
    np.testing.assert_array_equal(quant.quantize(x, fmt), want)


@pytest.mark.parametrize("fmt,bound", [("q4_1", 0.5 / 15 * 1.01), ("q8_0", 0.5 / 127 * 1.01)])
def test_round_trip_error_is_half_a_step(fmt, bound):
    x = _weights(64, 576, seed=1)
    y = quant.dequantize(quant.quantize(x, fmt), fmt, x.shape)
    blocks, err = x.reshape(-1, 32), np.abs(y - x).reshape(-1, 32)
    span = np.ptp(blocks, axis=1) if fmt == "q4_1" else np.abs(blocks).max(axis=1)
    # half a quantization step, plus the f16 rounding of the scale (and of q4_1's minimum)
    assert np.all(err.max(axis=1) <= bound * span + 2e-3 * np.abs(blocks).max(axis=1) + 1e-7)
    assert np.abs(y - x).mean() < (0.2 if fmt == "q4_1" else 0.02) * np.abs(x).mean()


def test_words_pad_to_four_bytes():
    raw = quant.quantize(np.ones((1, 32), np.float32), "q8_0")     # 34 bytes
    w = quant.words(raw)
    assert w.dtype == np.uint32 and w.size == quant.nwords("q8_0", 1, 32) == 9
    assert np.array_equal(w.view(np.uint8)[:34], raw) and not w.view(np.uint8)[34:].any()


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="format must be one of"):
        quant.nbytes("q4_0", 1, 32)
    with pytest.raises(ValueError, match="k % 32"):
        quant.quantize(np.zeros((2, 48), np.float32), "q8_0")
    with pytest.raises(ValueError, match="needs 40 bytes"):
        quant.dequantize(np.zeros(39, np.uint8), "q4_1", (2, 32))
