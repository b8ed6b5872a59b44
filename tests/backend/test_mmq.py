"""The int8 prefill on tensor cores (opt-in smat.INT8: quant/qrows_i8.wgsl, then
quant/qmatmul_mmq.wgsl) on every backend: where the adapter offers i8 -> i32 16x16x32
subgroup matrices (Dawn on NVIDIA, under the Dawn runner) each tile shape is forced and its
result checked against numpy's emulation of the same int8 rule (quant.mmq_reference) and
against the float answer; elsewhere INT8 changes nothing (the usual kernels, their accuracy)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import rand
from test_quant_formats import qweight, run_with_names

from webrlx import nn, quant
from webrlx.compiler import lower_quant, smat
from webrlx.compiler.lower import LoweringError
from webrlx.runtime import autotune

FORMATS = ["q4_1", "q8_0", "q4_k", "q6_k", "q5_0"]


def _i8(backend) -> bool:
    info = getattr(backend, "info", None)
    return info is not None and smat.available_i8(info)


@pytest.mark.parametrize("shape", [smat.mmq_name(sh) for sh in smat.MMQ_SHAPES])
def test_int8_prefill_each_shape(backend, shape, monkeypatch):
    """70 rows x 136 x 512 (group 256) and x 192 (group 64) with a bias, every decoding path:
    on average within 1e-4 x max|ref| of the int8 rule's float64 answer and all within 1e-2
    (a tile or group placed wrong is off by O(1)), and within 3e-2 x max|ref| of the float
    answer; without i8 matrices the usual kernels run, within 1e-4 of the float answer.
    Measured under Dawn on an H200: Q6_K 1 output of 9520 off by 2.2e-3 x max (a tie), Q8_0
    2.6% of them by more than 1e-4."""
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(smat, "INT8", True)
    monkeypatch.setattr(smat, "MMQ_FORCE", shape)
    here = _i8(backend)
    if not here and shape != smat.mmq_name(smat.MMQ_SHAPES[0]):
        return                          # (one pass of the fallback is enough)
    if not here and backend.name != "reference":   # forcing names what is missing
        w, _ = qweight("q4_k", 136, 512)
        with pytest.raises(LoweringError, match="i8 -> i32 16x16x32") as e:
            run_with_names(backend, lambda x, w: nn.qlinear(x, w, "q4_k", 136, 512),
                           rand(70, 512), {"w": w})
        assert isinstance(e.value.__cause__, smat.SubgroupMatrixUnavailable)
        monkeypatch.setattr(smat, "MMQ_FORCE", None)      # smat.INT8 alone: a preference
    n, rows = 136, 70
    for fmt, k in [(f, 512) for f in FORMATS] + [("q4_1", 192)]:
        if k % lower_quant.mmq_group(k) or lower_quant.mmq_group(k) % int(shape[-2:]):
            continue                    # (a 64-k step needs groups of 64)
        w, wf = qweight(fmt, n, k)
        bias = rand(n, seed=5)
        x = rand(rows, k)
        (got,), ran = run_with_names(
            backend, lambda x, w, b, fmt=fmt, k=k: nn.qlinear(x, w, fmt, n, k, bias=b),
            x, {"w": w, "b": bias})
        want = x.astype(np.float64) @ wf.T + bias
        scale = np.abs(want).max()
        if here:
            rule = quant.mmq_reference(x, wf.astype(np.float32), lower_quant.mmq_group(k)) + bias
            # (the shader's f32 decode and division differ from numpy's in the last bits: a
            # value at a rounding tie may land one int8 step away, ~2e-3 x max|ref| at that
            # output; Q8_0's blocks are full of ties)
            off = np.abs(got - rule)
            assert off.mean() <= 1e-4 * scale and off.max() <= 1e-2 * scale, (fmt, k)
            assert np.abs(got - want).max() <= 3e-2 * scale, (fmt, k)
            assert shape in ran and any(r.startswith("qrows_i8") for r in ran), ran
        else:
            assert np.abs(got - want).max() <= 1e-4 * scale, (fmt, k)
            assert not any("mmq" in r or "qrows_i8" in r for r in ran), ran


def test_int8_prefill_only_when_asked(backend, monkeypatch):
    """Without smat.INT8 no backend runs the int8 kernels, even where it has them."""
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    w, wf = qweight("q4_k", 136, 512)
    x = rand(70, 512)
    (got,), ran = run_with_names(backend, lambda x, w: nn.qlinear(x, w, "q4_k", 136, 512),
                                 x, {"w": w})
    want = x.astype(np.float64) @ wf.T
    assert not any("mmq" in r or "qrows_i8" in r for r in ran), ran
    assert np.abs(got - want).max() <= 4e-3 * np.abs(want).max()


def _two_products(h, a, b, k: int):
    return nn.qlinear(h, a, "q4_k", 64, k) * 1.0, nn.qlinear(h, b, "q8_0", 32, k) * 1.0


def test_int8_prefills_of_one_x_quantize_it_once(backend, monkeypatch):
    """Two products of one computed x (as q and k of a layer) with groups of 2048 (past a
    subgroup: the groups' maxima through workgroup memory): x quantized once where the int8
    kernels run,
    both outputs within 3e-2 x max|ref| of the float answer (1e-4 elsewhere)."""
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(smat, "INT8", True)
    k = 2048
    (wa, fa), (wb, fb) = qweight("q4_k", 64, k), qweight("q8_0", 32, k, seed=3)
    x = rand(40, k)
    outs, ran = run_with_names(
        backend, lambda x, a, b: _two_products(x * 1.0, a, b, k), x, {"a": wa, "b": wb})
    for got, wf in zip(outs, (fa, fb), strict=True):
        want = x.astype(np.float64) @ wf.T
        tol = 3e-2 if _i8(backend) else 1e-4
        assert np.abs(got - want).max() <= tol * np.abs(want).max()
    if _i8(backend):
        assert lower_quant.mmq_group(k) == 2048
        assert sum(r.startswith("qrows_i8[x]") for r in ran) == 1, ran
