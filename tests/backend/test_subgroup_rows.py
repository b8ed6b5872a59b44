"""Row kernels reducing with subgroup operations (common/row_reduce_subgroup): forced on every
backend whose subgroups Backend.probe_subgroups checks (lavapipe natively, GPUs), against numpy.
Inside the browser the probe reports none (WGSL there needs `enable subgroups;`) and the same
checks run the workgroup tree."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check, force_regs_rows, force_subgroup_rows, rand
from test_grad import _norm_fd
from test_nn import _attn, _ln
from test_reduce import _softmax

import webrlx as wr


def _expect_subgroups(backend, size: int, picked: list[int]) -> None:
    """Natively the probe must find subgroups (lavapipe has them) and the row kernels must
    have used them; in the browser and on the reference device, none."""
    if backend.name == "wgpu":
        assert size > 0 and picked, (size, picked)
    else:
        assert size == 0 and not picked


def test_the_probe_reports_a_consistent_subgroup_size(backend):
    size = 0 if backend.name == "reference" else backend.probe_subgroups()
    if backend.name == "wgpu":
        assert size in (4, 8, 16, 32, 64, 128), size
    else:
        assert size == 0


# 8 rows a workgroup (one subgroup a row on 32-wide subgroups), 2 rows (128 threads), 1 row
# (256 threads), the loop kernel, and the split form of long rows (their _parts kernels)
@pytest.mark.parametrize("shape,regs", [((37, 384), True), ((5, 1000), True), ((3, 2052), True),
                                        ((6, 333), False), ((2, 3000), False),
                                        ((2, 20000), False), ((2, 40000), True)], ids=str)
def test_softmax_and_norms_with_subgroup_reductions(backend, shape, regs, monkeypatch):
    from webrlx.compiler import lower_rows
    monkeypatch.setattr(lower_rows, "WIDE_ROW_MIN_ROWS", 1)     # (2, 40000): wide rows
    size, picked = force_subgroup_rows(monkeypatch, backend)
    if regs:
        force_regs_rows(monkeypatch)
    x = rand(*shape, low=-30, high=30)
    check(backend, lambda t: t.softmax(-1), lambda a: _softmax(a, -1), x, rtol=1e-5,
          atol=1e-7)
    check(backend, lambda t: t.log_softmax(-1), lambda a: np.log(_softmax(a, -1)), x,
          rtol=1e-5, atol=1e-5)
    n = shape[-1]
    check(backend, lambda x, r, w, b: wr.nn.layer_norm(x + r, w, b),
          lambda x, r, w, b: _ln(x + r, w, b), x * 0.1 + 50, rand(*shape, seed=1),
          rand(n, seed=2), rand(n, seed=3), rtol=1e-4, atol=1e-4)
    check(backend, lambda x, w: wr.nn.rms_norm(x, w, eps=1e-6),
          lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w, x,
          rand(n, seed=1), rtol=1e-4, atol=1e-5)
    _expect_subgroups(backend, size, picked)


@pytest.mark.parametrize("n", [64, 48])
def test_rows_narrower_than_a_subgroup(backend, n, monkeypatch):
    """Rows of half a subgroup's lanes (a subgroupShuffleXor butterfly inside the subgroup;
    rows of 64 take 16 lanes on GPUs by default), several rows a subgroup, as numpy."""
    from webrlx.compiler import lower_rows
    size, picked = force_subgroup_rows(monkeypatch, backend)
    force_regs_rows(monkeypatch, 16)
    monkeypatch.setattr(lower_rows, "REGS_ROW_TPR", max(size // 2, 4))
    x = rand(37, n, low=-30, high=30)
    x[3, 5] = np.inf
    with np.errstate(invalid="ignore"):
        check(backend, lambda t: t.softmax(-1), lambda a: _softmax(a, -1), x, rtol=1e-5,
              atol=1e-7)
    x[3, 5] = 1.0
    check(backend, lambda x, r, w, b: wr.nn.layer_norm(x + r, w, b),
          lambda x, r, w, b: _ln(x + r, w, b), x * 0.1 + 50, rand(37, n, seed=1),
          rand(n, seed=2), rand(n, seed=3), rtol=1e-4, atol=1e-4)
    _expect_subgroups(backend, size, picked)
    if backend.name == "wgpu":
        assert 256 // max(size // 2, 4) in picked, picked


def test_softmax_with_subgroup_reductions_keeps_nan_and_inf(backend, monkeypatch):
    size, picked = force_subgroup_rows(monkeypatch, backend)
    force_regs_rows(monkeypatch)
    x = rand(4, 512, low=-5, high=5)
    x[0, 7] = np.nan
    x[1, 100] = np.inf
    x[2, :] = -np.inf
    with np.errstate(invalid="ignore"):
        check(backend, lambda t: t.softmax(-1), lambda a: _softmax(a, -1), x, rtol=1e-5,
              atol=1e-7)
    _expect_subgroups(backend, size, picked)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_softmax_with_subgroup_reductions(backend, causal, monkeypatch):
    from webrlx.compiler import lower_attention
    monkeypatch.setattr(lower_attention, "FORCE_PATH", "matmul")
    size, picked = force_subgroup_rows(monkeypatch, backend)
    force_regs_rows(monkeypatch, 4)
    mask = np.ones((2, 132), np.int32)
    mask[1, 67:] = 0
    check(backend, lambda q, k, v, m: wr.nn.attention(q, k, v, mask=m, causal=causal),
          lambda q, k, v, m: _attn(q, k, v, mask=m, causal=causal), rand(2, 3, 100, 32),
          rand(2, 3, 132, 32, seed=1), rand(2, 3, 132, 32, seed=2), mask, rtol=1e-4,
          atol=1e-5)
    _expect_subgroups(backend, size, picked)


@pytest.mark.parametrize("op", ["layer_norm_grad", "rms_norm_grad"])
def test_norm_grad_with_subgroup_reductions(backend, op, monkeypatch):
    size, picked = force_subgroup_rows(monkeypatch, backend)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((9, 300)) * 3 + 1).astype(np.float32)
    dy = rng.standard_normal((9, 300)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 300).astype(np.float32)
    check(backend, lambda a, d, v: a._op(op, d, v, eps=1e-5),
          lambda a, d, v: _norm_fd(a, d, v, op == "rms_norm_grad", 1e-5), x, dy, w,
          rtol=1e-3, atol=1e-4)
    _expect_subgroups(backend, size, picked)
