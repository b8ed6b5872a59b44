"""The int8 prefill without tensor cores (opt-in compiler.int8_prefill.INT8_PREFILL:
quant/qx8.wgsl, quant/qw8.wgsl, quant/qmatmul_i8.wgsl) on every backend, as on a GPU
(pretended where the adapter is a CPU one): x's and the weight's rows rounded to int8 in groups
along K, integer products, each group's sums scaled. Checked against numpy's emulation of the
same rule (quant.mmq_reference) and against the float answer. The reference backend
keeps its float rules."""
from __future__ import annotations

import numpy as np
import pytest
from test_quant_formats import FORMATS, run_with_names

from webrlx import nn, quant
from webrlx.compiler import int8_prefill
from webrlx.runtime import autotune


@pytest.fixture
def int8_on(monkeypatch):
    """INT8_PREFILL on, any work a call, and the adapter taken for a GPU without subgroup
    matrices in use (under Dawn on NVIDIA, as one without them)."""
    from webrlx.compiler import smat
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: False))
    monkeypatch.setattr(smat, "MODE", "off")
    monkeypatch.setattr(int8_prefill, "INT8_PREFILL", True)
    monkeypatch.setattr(int8_prefill, "MIN_WORK", 0)
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)


def _check(backend, got: np.ndarray, x: np.ndarray, wf: np.ndarray, bias) -> None:
    """Within 2e-3 x max|ref| of the int8 rule (quant.mmq_reference) plus, for each output,
    one int8 step of every weight that lies halfway between two steps (WGSL's division may be
    2.5 ulp off, so such a value may round either way; the small-integer formats have many):
    a misplaced block or scale is off by O(1). And 5e-2 of the float answer; the reference
    backend within 1e-4 of the float answer."""
    exact = x.astype(np.float64) @ wf.T + (0 if bias is None else bias)
    if backend.name == "reference":
        np.testing.assert_allclose(got, exact, rtol=0, atol=1e-4 * np.abs(exact).max())
        return
    k = x.shape[1]
    g = int8_prefill.group(k)
    w32 = wf.astype(np.float32)
    rule = quant.mmq_reference(x, w32, g) + (0 if bias is None else bias)
    amax = np.abs(w32.reshape(len(w32), k // g, g)).max(2, keepdims=True)
    v = (w32.reshape(len(w32), k // g, g) * (np.float32(127) / amax)).reshape(len(w32), k)
    tie = np.abs(v - np.floor(v) - 0.5) < 1e-4
    xq, xs = quant.quantize_rows_i8(x, g)
    xv = np.abs(xq.astype(np.float64).reshape(len(x), k // g, g) * xs.T[:, :, None])
    step = np.repeat((amax[:, :, 0] / 127).astype(np.float64), g, axis=1)    # (n, k)
    slack = xv.reshape(len(x), k) @ (tie * step).T
    scale = np.abs(rule).max()
    assert (np.abs(got - rule) <= 2e-3 * scale + slack).all()
    assert np.abs(got - exact).max() <= 5e-2 * scale


@pytest.mark.parametrize("fmt", FORMATS)
def test_int8_prefill_every_format(backend, fmt, int8_on):
    """40 rows (a 64-row tile part-filled) x N = 100 (the last column tile too) x K = 256,
    every weight format through qw8's deq8, with a bias: the three kernels ran."""
    m, n, k = 40, 100, 256
    raw = quant.random_blocks(fmt, n, k, seed=4, scale=0.05)
    wf = quant.dequantize(raw, fmt, (n, k)).astype(np.float64)
    x = np.random.default_rng(1).standard_normal((m, k)).astype(np.float32)
    b = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    (got,), ran = run_with_names(backend, lambda x, w, b: nn.qlinear(x, w, fmt, n, k, bias=b), x,
                                 {"w": quant.words(raw), "b": b})
    _check(backend, got, x, wf, b)
    if backend.name != "reference":
        assert ran == ["qw8[x]", f"qw8[{fmt}]", "qmatmul_i8_64x64"], ran


@pytest.mark.parametrize("shape,group", [(s, 256) for s in int8_prefill.SHAPES] +
                         [(int8_prefill.SHAPES[0], 64), (int8_prefill.SHAPES[0], 128),
                          (int8_prefill.SHAPES[-1], 128)])
def test_int8_prefill_each_tile(backend, shape, group, int8_on, monkeypatch):
    """Each tile shape (int8_prefill.SHAPES: outputs a thread, k a step) forced, and groups of
    64, 128 and 256, on 150 x 200 x 512 Q4_K (tails in both directions, 4-8 steps along K):
    within 2e-3 of the int8 rule."""
    if backend.name == "reference":
        return
    monkeypatch.setattr(int8_prefill, "GROUP", group)
    name = f"qmatmul_i8_{16 * shape[0]}x{16 * shape[1]}" + ("k128" if shape[2] == 128 else "")
    monkeypatch.setattr(autotune, "PREFER", name)
    m, n, k = 150, 200, 512
    raw = quant.random_blocks("q4_k", n, k, seed=7, scale=1e-3)
    wf = quant.dequantize(raw, "q4_k", (n, k)).astype(np.float64)
    x = np.random.default_rng(3).standard_normal((m, k)).astype(np.float32)
    (got,), ran = run_with_names(backend, lambda x, w: nn.qlinear(x, w, "q4_k", n, k), x,
                                 {"w": quant.words(raw)})
    _check(backend, got, x, wf, None)
    tm, tn, bk = shape
    fits = 16 * (tm + tn) * (bk // 16 + 1) * 16 <= backend.info.limit(
        "max-compute-workgroup-storage-size", 16384)
    assert ran[-1] == (name if fits else "qmatmul_i8_64x64"), ran   # (else not offered)


def test_int8_prefill_shares_x_and_keeps_other_paths(backend, int8_on):
    """Two products of one x quantize it once (one qw8[x]); K % 64 != 0 (K = 96) and fewer than
    MIN_M rows keep the other kernels; within tolerance of their rules."""
    if backend.name == "reference":
        return
    m, k = 48, 128
    r1, r2 = (quant.random_blocks("q8_0", 64, k, seed=s, scale=0.05) for s in (1, 2))
    w1, w2 = (quant.dequantize(r, "q8_0", (64, k)).astype(np.float64) for r in (r1, r2))
    x = np.random.default_rng(4).standard_normal((m, k)).astype(np.float32)
    (a, b), ran = run_with_names(
        backend, lambda x, w1, w2: (nn.qlinear(x, w1, "q8_0", 64, k),
                                    nn.qlinear(x, w2, "q8_0", 64, k)),
        x, {"w1": quant.words(r1), "w2": quant.words(r2)})
    _check(backend, a, x, w1, None)
    _check(backend, b, x, w2, None)
    assert ran.count("qw8[x]") == 1 and ran.count("qmatmul_i8_64x64") == 2, ran
    for m_, k_ in ((48, 96), (int8_prefill.MIN_M - 1, 128)):
        raw = quant.random_blocks("q8_0", 64, k_, seed=5, scale=0.05)
        xx = np.random.default_rng(5).standard_normal((m_, k_)).astype(np.float32)
        (got,), ran = run_with_names(
            backend, lambda x, w, k_=k_: nn.qlinear(x, w, "q8_0", 64, k_), xx,
            {"w": quant.words(raw)})
        want = xx.astype(np.float64) @ quant.dequantize(raw, "q8_0", (64, k_)).astype(
            np.float64).T
        assert not any("i8" in r or r.startswith("qw8") for r in ran), ran
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


def test_int8_prefill_off_by_default(backend):
    """Without INT8_PREFILL nothing changes: no int8 kernel runs."""
    assert int8_prefill.INT8_PREFILL is False
    x = np.random.default_rng(6).standard_normal((64, 256)).astype(np.float32)
    raw = quant.random_blocks("q4_k", 64, 256, seed=6)
    _, ran = run_with_names(backend, lambda x, w: nn.qlinear(x, w, "q4_k", 64, 256), x,
                            {"w": quant.words(raw)})
    assert not any("i8" in r or r.startswith("qw8") for r in ran), ran


def test_int8_prefill_leaves_tensor_cores_to_their_kernels(monkeypatch):
    """Where the adapter's subgroup matrices are in use (Dawn on NVIDIA), the tensor-core
    kernels keep the prefill: the rule says no there, yes with them off."""
    from webrlx.compiler import lower_int8_prefill, smat
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(int8_prefill, "INT8_PREFILL", True)
    info = DeviceInfo(name="NVIDIA H200", backend="navigator.gpu",
                      features=frozenset({"shader-f16", smat.FEATURE}), subgroup_size=32,
                      subgroup_matrix_configs=(("f16", "f32", 16, 16, 16),))
    args = (512, 2048, 2048, "float32")
    assert smat.available(info) and not lower_int8_prefill.ok(info, *args)
    monkeypatch.setattr(smat, "MODE", "off")
    assert lower_int8_prefill.ok(info, *args)
