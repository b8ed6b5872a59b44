"""tools/kquant.py, the numpy K-quant quantizer of the LLM fixtures: the gguf package's
dequantizer reads its bytes back within each format's round-to-nearest error, the block
fields are in range and use the full scale range, and webrlx.quant decodes the same bytes to
the same floats."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from webrlx import quant

gguf = pytest.importorskip("gguf")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import kquant  # noqa: E402

# type -> (weights per sub-block, quant levels - 1, largest integer sub-scale (1: none), has
#          mins, byte offsets of d (and dmin)); the IQ4 grid's 16 levels span -127..113
SPEC = {"Q2_K": (16, 3, 15, True, (80, 82)), "Q3_K": (16, 7, 31, False, (108,)),
        "Q4_K": (32, 15, 63, True, (0, 2)), "Q5_K": (32, 31, 63, True, (0, 2)),
        "Q6_K": (16, 63, 127, False, (208,)), "IQ4_NL": (32, 15, 1, False, (0,)),
        "IQ4_XS": (32, 15, 31, False, (0,))}
BITS_ORDER = ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]


def _x(n: int = 16, k: int = 1024, seed: int = 0) -> np.ndarray:
    """Gaussian rows whose scales span 1e-3..1e2 (the f16 super-scales stay normal)."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, k)) * np.logspace(-3, 2, n)[:, None]).astype(np.float32)


def _deq(raw: np.ndarray, qtype: str) -> np.ndarray:
    return gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[qtype]).astype(np.float32)


def _step_rms(x: np.ndarray, qtype: str) -> np.ndarray:
    """Per row: the RMS error a uniform round-to-nearest grid of the format's bit width gives
    (step / sqrt(12)); the step is a sub-block's range (with 0 in it for the formats with
    mins) over the quant levels - 1, or its largest magnitude over half the levels; for
    IQ4, its largest magnitude times the grid's mean gap, 240 / 15, over the grid's 127."""
    sub, nmax, _, mins, _ = SPEC[qtype]
    xs = x.reshape(len(x), -1, sub).astype(np.float64)
    if qtype.startswith("IQ4"):
        step = np.abs(xs).max(axis=2) * (240 / 15 / 127)
    elif mins:
        step = (xs.max(axis=2) - np.minimum(xs.min(axis=2), 0)) / nmax
    else:
        step = np.abs(xs).max(axis=2) / ((nmax + 1) / 2)
    return np.sqrt((step ** 2 / 12).mean(axis=1))


@pytest.mark.parametrize("qtype", kquant.TYPES)
def test_gguf_reads_it_back_within_the_rounding_error(qtype):
    x = _x()
    raw = kquant.quantize(x, qtype)
    nbytes = 1024 // kquant.BLOCK[qtype] * kquant.BLOCK_BYTES[qtype]
    assert raw.dtype == np.uint8 and raw.shape == (16, nbytes)
    err = np.sqrt(((_deq(raw, qtype) - x).astype(np.float64) ** 2).mean(axis=1))
    # the 4- / 6-bit sub-scales and f16 super-scales add a little to the grid's own error
    assert (err <= 1.25 * _step_rms(x, qtype)).all(), (qtype, err / _step_rms(x, qtype))


def test_error_falls_with_the_bit_width():
    x = _x()
    rel = [np.sqrt(((_deq(kquant.quantize(x, t), t) - x) ** 2).mean(axis=1)
                   / (x ** 2).mean(axis=1)).max() for t in BITS_ORDER]
    assert rel == sorted(rel, reverse=True), rel            # Q2_K worst ... Q6_K best
    assert rel[0] < 0.45 and rel[-1] < 0.025, rel           # Gaussian: ~0.34 and ~0.018


@pytest.mark.parametrize("qtype", kquant.TYPES)
def test_block_fields_are_in_range(qtype):
    sub, _, smax, mins, halves = SPEC[qtype]
    x = _x()
    blocks = kquant.quantize(x, qtype).reshape(-1, kquant.BLOCK_BYTES[qtype])
    supers = [blocks[:, at:at + 2].copy().view("<f2").astype(np.float32)[:, 0] for at in halves]
    for s in supers:                            # IQ4_NL's d carries the sign (no sub-scales)
        assert np.isfinite(s).all() and (s != 0).all()
        assert qtype == "IQ4_NL" or (s > 0).all()
    # integer sub-scales: rebuilt from the decoded weights of a block with d = 1 (dmin = 0)
    probe = blocks.copy()
    probe[:, halves[0]:halves[0] + 2] = np.array([1.0], "<f2").view(np.uint8)
    if mins:
        probe[:, halves[1]:halves[1] + 2] = 0
    w = _deq(probe.reshape(-1), qtype).reshape(len(blocks), -1, sub)
    q_top = {"Q2_K": 3, "Q4_K": 15, "Q5_K": 31, "Q3_K": 4, "Q6_K": 32}.get(qtype, 127)
    # w = sc * q: integers, at most the largest scale x the top level, and in every block the
    # sub-block of the largest scale has its peak within one level of the top
    top = np.abs(w).reshape(len(blocks), -1).max(axis=1)
    assert (w == np.rint(w)).all() and (top <= (smax + 1) * q_top).all()
    # (f16 subnormal super-scales of the 1e-3 rows round the top sub-scale by one)
    assert (top >= max(smax - 1, 1) * (q_top - 1)).all(), top.min()


@pytest.mark.parametrize("qtype", kquant.TYPES)
def test_webrlx_decodes_the_same_floats_as_gguf(qtype):
    x = _x(n=8, k=512, seed=1)
    raw = kquant.quantize(x, qtype)
    got = quant.dequantize(raw.reshape(-1), qtype.lower(), x.shape)
    np.testing.assert_array_equal(got, _deq(raw, qtype))


@pytest.mark.parametrize("qtype", kquant.TYPES)
def test_zero_and_constant_blocks(qtype):
    x = np.zeros((3, 256), np.float32)
    x[1] = 0.5
    x[2] = -2.0
    back = _deq(kquant.quantize(x, qtype), qtype)
    assert (back[0] == 0).all()
    np.testing.assert_allclose(back[1:], x[1:], rtol=0.01)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="k % 256"):
        kquant.quantize(np.zeros((2, 64), np.float32), "Q4_K")
    with pytest.raises(ValueError, match="qtype must be one of"):
        kquant.quantize(np.zeros((2, 256), np.float32), "Q4_0")
    with pytest.raises(ValueError, match="finite"):
        kquant.quantize(np.full((1, 256), np.nan, np.float32), "Q6_K")
