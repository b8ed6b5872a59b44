"""quant.quantize_rows_i8 and quant.mmq_reference: the int8 prefill's numpy rule (the
shaders quant/qrows_i8.wgsl and quant/qmatmul_mmq.wgsl are checked against it on GPUs that
have i8 subgroup matrices, tests/backend/test_mmq.py)."""
from __future__ import annotations

import numpy as np
import pytest

from webrlx import quant


def test_rows_round_trip_within_half_a_step():
    rng = np.random.default_rng(0)
    v = rng.standard_normal((5, 256)).astype(np.float32)
    v[2, 64:128] = 0                                  # an all-zero group
    q, s = quant.quantize_rows_i8(v, 64)
    assert q.dtype == np.int8 and s.shape == (4, 5) and s.dtype == np.float32
    assert s[1, 2] == 0 and not q[2, 64:128].any()
    back = q.reshape(5, 4, 64) * s.T[:, :, None]
    step = s.T[:, :, None]
    assert np.all(np.abs(back - v.reshape(5, 4, 64)) <= 0.5 * step + 1e-7)
    assert np.abs(q).max() == 127                     # each group's max hits the end


def test_rounding_is_half_to_even_as_wgsl():
    v = np.array([[127.0, 0.5, 1.5, -2.5] + [0.0] * 28], np.float32)
    q, s = quant.quantize_rows_i8(v, 32)
    assert s[0, 0] == 1.0 and list(q[0, :4]) == [127, 0, 2, -2]


def test_mmq_reference_is_close_to_the_float_product():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 512)).astype(np.float32)
    w = rng.standard_normal((24, 512)).astype(np.float32)
    want = x.astype(np.float64) @ w.T
    for group in (32, 256):
        err = np.abs(quant.mmq_reference(x, w, group) - want).max() / np.abs(want).max()
        assert 1e-4 < err < 2e-2, (group, err)       # int8 both ways: lossy, not wrong


def test_group_must_divide_k():
    with pytest.raises(ValueError, match="group"):
        quant.quantize_rows_i8(np.zeros((2, 96), np.float32), 64)
