"""webrlx.quant: the block-format table and each row's dequantization checked against the gguf
package (ggml's Python twin), quantizers bit-exact with gguf's ports of ggml's reference
quantizers, round-trip error."""
from __future__ import annotations

import numpy as np
import pytest

from webrlx import quant

gguf_quants = pytest.importorskip("gguf.quants")
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType  # noqa: E402

OWN = ["q4_1", "q8_0", "f16", "bf16"]     # formats webrlx.quant.quantize makes
GGUF_MADE = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "f16", "bf16"]  # gguf.quants.quantize's
FLOATS = ["f16", "bf16"]                   # GGUF's F16 / BF16 in blocks of 32 floats
SHAPES = {32: [(1, 32), (3, 96), (7, 576), (5, 1536)], 256: [(1, 256), (3, 512), (5, 1536)]}
CASES = [(f, s) for f in quant.FORMATS for s in SHAPES[quant.FORMATS[f].block]]


def qtype(fmt: str) -> GGMLQuantizationType:
    return GGMLQuantizationType[fmt.upper()]


def _weights(n: int, k: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.05, (n, k)).astype(np.float32)
    x[0, :32] = 0.0                        # an all-zero block: d = 0
    return x


@pytest.mark.parametrize("fmt", quant.FORMATS)
def test_table_rows_match_ggml(fmt):
    f = quant.FORMATS[fmt]
    assert f.ggml == qtype(fmt).value
    if fmt in FLOATS:              # ggml's blocks of 1: ours hold 32, every field 4-aligned
        assert (f.block, f.nbytes) == (32, 32 * GGML_QUANT_SIZES[qtype(fmt)][1])
        assert f.encode is not None and not f.halves and not f.own_path
    else:
        assert (f.block, f.nbytes) == GGML_QUANT_SIZES[qtype(fmt)]


@pytest.mark.parametrize("fmt,shape", CASES, ids=str)
def test_dequantize_random_blocks_matches_gguf(fmt, shape):
    """Random bytes with finite f16 scales: every quant, sub-scale and high-bit pattern."""
    raw = quant.random_blocks(fmt, *shape, seed=shape[0] * shape[1])
    want = gguf_quants.dequantize(raw.reshape(shape[0], -1), qtype(fmt))
    assert np.isfinite(want).all() and np.abs(want).max() > 0
    np.testing.assert_array_equal(quant.dequantize(raw, fmt, shape), want)
    # the uint32 words a param holds dequantize the same
    np.testing.assert_array_equal(quant.dequantize(quant.words(raw), fmt, shape), want)


@pytest.mark.parametrize("fmt", GGUF_MADE)
@pytest.mark.parametrize("shape", SHAPES[32], ids=str)
def test_dequantize_gguf_quantized_blocks(fmt, shape):
    x = _weights(*shape, seed=2)
    raw = gguf_quants.quantize(x, qtype(fmt)).view(np.uint8).reshape(-1)   # F16: float16
    want = gguf_quants.dequantize(raw.reshape(shape[0], -1), qtype(fmt))
    np.testing.assert_array_equal(quant.dequantize(raw, fmt, shape), want)
    assert np.abs(want - x).max() <= 0.1 * np.abs(x).max()


@pytest.mark.parametrize("fmt,eps", [("f16", 2.0**-11), ("bf16", 2.0**-8)])
def test_float_formats_round_to_nearest(fmt, eps):
    """f16 / bf16 blocks: numpy's float16 and a float32 truncated to its high half are the
    oracles; the error is at most half a unit of the last place (f16 subnormals: 2^-25)."""
    x = _weights(5, 96, seed=3)
    x[1, :3] = [1.0 + 2.0**-8 + 2.0**-9, -(1.0 + 2.0**-8), 65504.0]   # ties, f16's largest
    y = quant.dequantize(quant.quantize(x, fmt), fmt, x.shape)
    if fmt == "f16":
        np.testing.assert_array_equal(y, x.astype(np.float16).astype(np.float32))
    else:
        assert not (y.view(np.uint32) & 0xFFFF).any()
        np.testing.assert_array_equal(y[1, :2], [1.0 + 2.0**-7, -1.0])   # ties to even
    assert np.all(np.abs(y - x) <= eps * np.abs(x) + 2.0**-25)


@pytest.mark.parametrize("fmt", OWN)
@pytest.mark.parametrize("shape", SHAPES[32], ids=str)
def test_quantize_matches_gguf_bit_for_bit(fmt, shape):
    x = _weights(*shape)
    want = gguf_quants.quantize(x, qtype(fmt)).view(np.uint8).reshape(-1)
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
        quant.nbytes("iq2_xxs", 1, 32)
    with pytest.raises(ValueError, match="k % 32"):
        quant.quantize(np.zeros((2, 48), np.float32), "q8_0")
    with pytest.raises(ValueError, match="k % 256"):
        quant.nbytes("q4_k", 2, 288)
    with pytest.raises(ValueError, match="gguf package quantizes"):
        quant.quantize(np.zeros((2, 32), np.float32), "q4_0")
    with pytest.raises(ValueError, match="needs 40 bytes"):
        quant.dequantize(np.zeros(39, np.uint8), "q4_1", (2, 32))
