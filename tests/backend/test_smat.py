"""Tensor-core f16 matmuls (compiler/smat.py, shaders/matmul/matmul_smat.wgsl) on every
backend: where the adapter offers f16 -> f32 subgroup matrices (Dawn on NVIDIA, under the Dawn
runner) each tile shape is forced and checked against numpy, and the default picks them;
elsewhere forcing one raises SubgroupMatrixUnavailable naming the missing feature, leaves the
device usable, and the default never offers them."""
from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import kernel_spy, qkv_into_caches, rand, run_graph

import webrlx as wr
from webrlx.compiler import lower_matmul, lower_quant, smat
from webrlx.compiler.lower import LoweringError

CASES = [((130, 256), (256, 264)), ((3, 40, 64), (64, 136)), ((300, 520), (520, 72)),
         ((37, 384), (384, 1544))]


def _available(backend) -> bool:
    info = getattr(backend, "info", None)
    return info is not None and smat.available(info)


def _matmul_bias_gelu(backend, a, b, bias):
    return run_graph(backend, lambda x, y, z: x.matmul(y, bias=z, activation="gelu"),
                     [a, b, bias])[0]


def _reference(a, b, bias):
    import math
    y = a.astype(np.float64) @ b.astype(np.float64) + bias.astype(np.float64)
    return 0.5 * y * (1 + np.vectorize(math.erf)(y / math.sqrt(2)))


@pytest.mark.parametrize("shape", [sh.name for sh in smat.SHAPES])
def test_each_subgroup_matrix_shape(backend, shape, monkeypatch):
    """f16 inputs, f32 accumulation, f16 output with bias + gelu: within 2e-3 x max|ref| on
    every case; without the feature, forcing the shape names it and the device stays usable."""
    monkeypatch.setattr(smat, "MODE", shape)
    cases = CASES if backend.name == "reference" or _available(backend) else CASES[:1]
    for a, b in cases:
        x = rand(*a).astype(np.float16)
        w = rand(*b, seed=1).astype(np.float16)
        bias = rand(b[-1], seed=2).astype(np.float16)
        want = _reference(x, w, bias)
        if backend.name != "reference" and not _available(backend):
            with pytest.raises(LoweringError, match="chromium-experimental-subgroup-matrix") \
                    as e:
                _matmul_bias_gelu(backend, x, w, bias)
            assert isinstance(e.value.__cause__, smat.SubgroupMatrixUnavailable)
            monkeypatch.setattr(smat, "MODE", None)          # the device is still usable
            got = _matmul_bias_gelu(backend, x, w, bias)
            assert np.abs(got - want).max() <= 2e-2 * np.abs(want).max()   # f16 sums
            return
        used = kernel_spy(monkeypatch, lower_matmul)
        got = _matmul_bias_gelu(backend, x, w, bias).astype(np.float64)
        assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max(), (a, b)
        assert backend.name == "reference" or "matmul/matmul_smat" in used


def test_subgroup_matrix_accuracy_over_4096_long_sums(backend, monkeypatch):
    """Issue 32's accuracy bound: f16 inputs with f32 accumulation, relative error <= 2e-3 at
    K = 4096 (of max |C|), on every tile shape where the adapter offers subgroup matrices."""
    if backend.name == "reference" or not _available(backend):
        return                       # (other f16 kernels: tests/backend/test_matmul.py)
    x = rand(64, 4096).astype(np.float16)
    w = rand(4096, 136, seed=1).astype(np.float16)
    want = x.astype(np.float64) @ w.astype(np.float64)
    for sh in smat.SHAPES:
        monkeypatch.setattr(smat, "MODE", sh.name)
        used = kernel_spy(monkeypatch, lower_matmul)
        got = run_graph(backend, lambda p, q: p @ q, [x, w])[0].astype(np.float64)
        assert "matmul/matmul_smat" in used
        assert np.abs(got - want).max() <= 2e-3 * np.abs(want).max(), sh.name


def test_default_picks_subgroup_matrices_only_where_offered(backend, monkeypatch):
    used = kernel_spy(monkeypatch, lower_matmul)
    x, w = rand(256, 256).astype(np.float16), rand(256, 256, seed=1).astype(np.float16)
    got = run_graph(backend, lambda p, q: p @ q, [x, w])[0].astype(np.float64)
    want = x.astype(np.float64) @ w.astype(np.float64)
    assert np.abs(got - want).max() <= 2e-2 * np.abs(want).max()
    if backend.name != "reference":
        assert ("matmul/matmul_smat" in used) == _available(backend)


def test_float32_matmuls_never_take_subgroup_matrices(backend, monkeypatch):
    used = kernel_spy(monkeypatch, lower_matmul)
    x, w = rand(256, 256), rand(256, 256, seed=1)
    got = run_graph(backend, lambda p, q: p @ q, [x, w])[0]
    np.testing.assert_allclose(got, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-4)
    assert "matmul/matmul_smat" not in used


QFORMATS = ["q4_0", "q4_1", "q8_0", "q4_k", "q6_k", "q5_k"]


def _biased_qlinear(backend, fmt: str, n: int, k: int, rows: int, seed: int):
    """rows x k random inputs through nn.qlinear(fmt, n, k) with a bias on backend: (what it
    gave, numpy's float64 answer on the gguf package's dequantization, the kernels that ran)."""
    from test_quant_formats import qweight, run_with_names

    from webrlx import nn
    w, wf = qweight(fmt, n, k)
    bias = rand(n, seed=seed)
    x = rand(rows, k)
    (got,), ran = run_with_names(backend, lambda x, w, b: nn.qlinear(x, w, fmt, n, k, bias=b),
                                 x, {"w": w, "b": bias})
    return got, x.astype(np.float64) @ wf.T + bias, ran


@pytest.mark.parametrize("shape", [sh.name for sh in smat.SHAPES])
def test_quantized_prefill_each_shape(backend, shape, monkeypatch):
    """quant/qmatmul_smat.wgsl (x and dequantized blocks rounded to f16, f32 sums) forced per
    tile shape, on formats of each decoding path (own Q4_1 / Q8_0, K-quant words, deq8),
    against numpy on the gguf package's dequantization: within 4e-3 x max|ref| (f16 inputs;
    a unit placed wrong along K is off by O(1)); without the feature, forcing it names it."""
    from test_quant_formats import qweight

    from webrlx import nn
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(smat, "MODE", shape)
    n, k = 136, 512
    if backend.name != "reference" and not _available(backend):
        fmt = QFORMATS[0]
        w, _ = qweight(fmt, n, k)
        with pytest.raises(LoweringError, match="chromium-experimental-subgroup-matrix"):
            run_graph(backend, lambda x, w, b: nn.qlinear(x, w, fmt, n, k, bias=b),
                      [rand(70, k)], {"w": w, "b": rand(n, seed=5)})
        return
    for fmt in QFORMATS:
        got, want, ran = _biased_qlinear(backend, fmt, n, k, 70, seed=5)
        assert got.shape == (70, n) and got.dtype == np.float32
        assert np.abs(got - want).max() <= 4e-3 * np.abs(want).max(), fmt
        assert backend.name == "reference" or f"q{shape}" in ran, ran


def test_quantized_prefill_default_only_where_offered(backend, monkeypatch):
    """A 300-row unfused qmatmul (past fuse.GEMV_MAX_M): qmatmul_smat by default where the
    adapter has subgroup matrices, the tiled kernels elsewhere; 40 rows keep the GEMV."""
    from test_quant_formats import qweight, run_with_names

    from webrlx import nn
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    w, wf = qweight("q4_k", 64, 256)
    for rows in (300, 40):
        x = rand(rows, 256)
        (got,), ran = run_with_names(backend, lambda x, w: nn.qlinear(x, w, "q4_k", 64, 256),
                                     x, {"w": w})
        want = x.astype(np.float64) @ wf.T
        assert np.abs(got - want).max() <= 4e-3 * np.abs(want).max()
        if backend.name != "reference":
            smat_ran = any(r.startswith("qmatmul_smat") for r in ran)
            assert smat_ran == (_available(backend) and rows == 300), (rows, ran)


@pytest.mark.parametrize("pieces", [2, 4])
def test_quantized_prefill_k_pieces(backend, pieces, monkeypatch):
    """qmatmul_smat over K pieces (KSPLIT, grid z) and their sum with the bias, forced on each
    decoding path: as the whole-K kernel, within 4e-3 x max|ref| of numpy. Adapters without
    subgroup matrices run their tiled kernels, unsplit, to the same result."""
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(lower_quant, "QSMAT_SPLIT", pieces)
    smat_here = backend.name != "reference" and _available(backend)
    for fmt in ("q4_1", "q4_k", "q6_k") if smat_here else ("q4_k",):
        got, want, ran = _biased_qlinear(backend, fmt, 136, 1024, 300, seed=7)
        assert np.abs(got - want).max() <= 4e-3 * np.abs(want).max(), fmt
        if backend.name != "reference":
            assert any(f"[split-k {pieces}]" in r for r in ran) == smat_here, ran


def _attention_ref(q, k, v, mask, causal):
    from test_nn import _attn
    return _attn(*(t.astype(np.float64) for t in (q, k, v)), mask=mask, causal=causal)


@pytest.mark.parametrize("b,h,lq,lk,d,causal", [(2, 3, 130, 200, 64, False),
                                                 (1, 2, 100, 100, 32, True),
                                                 (1, 1, 64, 70, 16, False),
                                                 (1, 12, 128, 128, 64, True)])
def test_attention_on_subgroup_matrices(backend, b, h, lq, lk, d, causal, monkeypatch):
    """attention_smat (f16 flash attention on subgroup matrices, f32 products and softmax):
    within 3e-3 x max|ref| of float64 on the f16 inputs, partial query and key tiles, a mask
    that blanks whole tiles, causal rows; forced where the adapter lacks the feature, an error
    naming it, the device still usable."""
    from webrlx.compiler import lower_attention
    monkeypatch.setattr(lower_attention, "FORCE_PATH", "smat")
    q, k, v = (rand(b, h, n, d, seed=s).astype(np.float16) * 2
               for n, s in ((lq, 0), (lk, 1), (lk, 2)))
    mask = np.ones((b, lk), np.int32)
    mask[-1, lk // 3:] = 0
    want = _attention_ref(q, k, v, mask, causal)

    def build(q, k, v, m):
        return wr.nn.attention(q, k, v, mask=m, causal=causal)
    if backend.name == "reference":
        got = run_graph(backend, build, [q, k, v, mask])[0]
        assert np.abs(got - want).max() <= 3e-3 * np.abs(want).max()
        return
    if not _available(backend):
        with pytest.raises(LoweringError, match="chromium-experimental-subgroup-matrix") as e:
            run_graph(backend, build, [q, k, v, mask])
        assert isinstance(e.value.__cause__, smat.SubgroupMatrixUnavailable)
        assert "'attention_smat'" in str(e.value)
        monkeypatch.setattr(lower_attention, "FORCE_PATH", None)
        got = run_graph(backend, build, [q, k, v, mask])[0]
        assert np.abs(got - want).max() <= 3e-3 * np.abs(want).max()
        return
    used = kernel_spy(monkeypatch, lower_attention)
    got = run_graph(backend, build, [q, k, v, mask])[0].astype(np.float64)
    assert "attention/attention_smat" in used, used
    assert np.abs(got - want).max() <= 3e-3 * np.abs(want).max(), np.abs(got - want).max()


def test_attention_smat_rescales_rising_scores(backend, monkeypatch):
    """Scores that rise along the keys by ~45 across 5 key tiles, plain and causal: every tile
    moves the rows' running max, so O and the sums are rescaled tile after tile; the result
    stays within 3e-3 x max|ref|. (A lazy-rescale form, O in result matrices rescaled only when
    the max moved by more than 8, was tried on 2026-11-28 and not kept.)"""
    from webrlx.compiler import lower_attention
    if backend.name == "reference" or not _available(backend):
        return
    monkeypatch.setattr(lower_attention, "FORCE_PATH", "smat")
    rng = np.random.default_rng(3)
    lq = lk = 300
    d = 64
    q = (0.5 + rng.random((1, 2, lq, d))).astype(np.float16)
    ramp = np.linspace(0.0, 5.0, lk)[None, None, :, None]
    k = (ramp * (0.5 + rng.random((1, 2, lk, d)))).astype(np.float16)
    v = rng.standard_normal((1, 2, lk, d)).astype(np.float16)
    mask = np.ones((1, lk), np.int32)
    for causal in (False, True):
        want = _attention_ref(q, k, v, mask, causal)
        got = run_graph(backend, lambda q, k, v, m, c=causal: wr.nn.attention(
            q, k, v, mask=m, causal=c), [q, k, v, mask])[0].astype(np.float64)
        assert np.abs(got - want).max() <= 3e-3 * np.abs(want).max(), np.abs(got - want).max()


def test_attention_smat_forced_on_float32_names_the_dtype(backend, monkeypatch):
    from webrlx.compiler import lower_attention
    if backend.name == "reference":
        return
    monkeypatch.setattr(lower_attention, "FORCE_PATH", "smat")
    x = rand(1, 2, 64, 64)
    with pytest.raises(LoweringError, match="float16|subgroup-matrix"):
        run_graph(backend, lambda q, k, v: wr.nn.attention(q, k, v), [x, x, x])


def test_device_info_subgroup_sizes(backend):
    """DeviceInfo.subgroup_sizes: the browser's subgroupMinSize / subgroupMaxSize where it
    offers subgroups (SwiftShader 4, NVIDIA 32), else (0, 0); attention_smat needs (32, 32)."""
    info = getattr(backend, "info", None)
    if info is None:
        return
    lo, hi = info.subgroup_sizes
    if info.backend == "navigator.gpu" and "subgroups" in info.features:
        assert 0 < lo <= hi <= 128 and lo & (lo - 1) == 0 and hi & (hi - 1) == 0, (lo, hi)
    else:
        assert (lo, hi) == (0, 0)


def _decoder_layer(fmt: str, s: int, seed: int = 0, k: int = 256, ffn: int = 512,
                   v_fmt: str | None = None):
    """A decoder layer of SmolLM2's kind at width k (8 q / 2 kv heads of k / 8, FFN ffn), s rows
    from pos: (graph, outputs, arrays) with q roped, k and v roped / written into KV caches,
    the o projection plus the residual, and SwiGLU's down projection plus the residual: every
    fused prefill epilogue (NORM, ROPE, CACHE, RES, SWIGLU)."""
    from webrlx import nn, quant
    hd, heads, kv, cap = k // 8, 8, 2, 64
    v_fmt = v_fmt or fmt
    shapes = {"wq": (heads * hd, k), "wk": (kv * hd, k), "wv": (kv * hd, k), "wo": (k, k),
              "wg": (ffn, k), "wu": (ffn, k), "wd": (k, ffn)}

    def blocks(n: int, kk: int, seed: int, f: str) -> np.ndarray:
        # random blocks whose weights have rms 0.05, as a model's (the default scales of the
        # K-quants give weights up to ~40: activations past f16's range after two layers)
        rms = np.sqrt(np.mean(quant.dequantize(quant.random_blocks(f, n, kk, seed=seed),
                                               f, (n, kk)).astype(np.float64) ** 2))
        return quant.words(quant.random_blocks(f, n, kk, seed=seed, scale=1e-2 * 0.05 / rms))
    arrays = {name: blocks(n, kk, seed + i, v_fmt if name == "wv" else fmt)
              for i, (name, (n, kk)) in enumerate(shapes.items())}
    arrays.update({"g1": rand(k, seed=seed + 20) + 1.5, "g2": rand(k, seed=seed + 21) + 1.5})
    g = wr.Graph()
    x = g.input("x", (1, s, k))
    pos = g.input("pos", (1,), "int32")
    p = {n_: g.param(n_, a.shape, a.dtype) for n_, a in arrays.items()}
    h = nn.rms_norm(x, p["g1"], 1e-5)
    q, kc, vc = qkv_into_caches(g, h, p, (fmt, fmt, v_fmt), k, heads, kv, hd, cap, pos)
    x1 = x + nn.qlinear(q.reshape(1, s, heads * hd), p["wo"], fmt, k, k)
    h2 = nn.rms_norm(x1, p["g2"], 1e-5)
    gate, up = nn.qlinear(h2, p["wg"], fmt, ffn, k), nn.qlinear(h2, p["wu"], fmt, ffn, k)
    out = x1 + nn.qlinear(gate.silu() * up, p["wd"], fmt, k, ffn)
    return g, [q * 1.0, kc * 1.0, vc * 1.0, out], arrays


FUSED_KINDS = ("qgemv[rms_norm+rope]", "qgemv[rms_norm+rope+cache]", "qgemv[rms_norm+cache]",
               "qgemv[res]", "qgemv[rms_norm+swiglu]")


def _fused_kinds(backend) -> set[str]:
    """The fused calls of _decoder_layer's 40-row prefill on backend (under smat.MODE now): q, k
    and v as one where it binds 10 storage buffers and they run on tensor cores
    (quant/qmatmul_smat_qkv.wgsl), else each alone."""
    if backend.info.limit("max-storage-buffers-per-shader-stage", 8) >= 10 and \
            smat.fused_prefills(backend.info):
        return {"qgemv[q+k+v]", "qgemv[res]", "qgemv[rms_norm+swiglu]"}
    return set(FUSED_KINDS)


def _fused_prefill(backend, fmt: str, s: int, start: int, k: int = 256, ffn: int = 512,
                   v_fmt: str | None = None):
    """_decoder_layer's outputs on backend and on the reference device at pos = start, and the
    variants that ran on backend ([] on the reference)."""
    from webrlx.backends.reference import ReferenceDevice
    g, outs, arrays = _decoder_layer(fmt, s, k=k, ffn=ffn, v_fmt=v_fmt)
    feeds = {"x": rand(1, s, k, seed=3), "pos": np.array([start], np.int32)}
    runs = []
    for dev in (backend, ReferenceDevice()):
        exe = wr.compile(g, outputs=outs, device=dev)
        exe.set_params(arrays)
        runs.append((exe.run(feeds), [] if dev.name == "reference" else exe.plan({}).ran))
    return runs[0][0], runs[1][0], runs[0][1]


@pytest.mark.parametrize("shape", [sh.name for sh in smat.FUSED_SHAPES])
def test_fused_prefill_each_shape(backend, shape, monkeypatch):
    """quant/qmatmul_smat_fused.wgsl forced per tile shape on a decoder layer's fused prefill
    projections (norm prologue, rope, KV-cache writes, SwiGLU, residual adds; q, k and v in
    one dispatch, quant/qmatmul_smat_qkv.wgsl, where 10 storage buffers bind), 40 rows (a
    partial row tile) from position 7 of a 64-row cache, on each decoding path: within 4e-3 x
    max|ref| of the reference device (x and weights rounded to f16, f32 sums). Without the
    feature, forcing it names it and the device stays usable."""
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(smat, "MODE", shape)
    if backend.name != "reference" and not _available(backend):
        with pytest.raises(LoweringError, match="chromium-experimental-subgroup-matrix"):
            _fused_prefill(backend, "q4_k", 40, 7)
        monkeypatch.setattr(smat, "MODE", None)
        got, want, _ = _fused_prefill(backend, "q4_k", 40, 7)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=0, atol=3e-4 * np.abs(b).max())
        return
    names = [sh.name for sh in smat.FUSED_SHAPES]
    fmts = QFORMATS if shape == names[0] else [QFORMATS[names.index(shape) % len(QFORMATS)]]
    label = "_smat_" + re.sub(r"_s\d+x\d+", "", shape.removeprefix("matmul_smat_"))
    sh = smat.FUSED_SHAPES[names.index(shape)]
    k, ffn = (256, 512) if 256 % sh.bk == 0 else (768, 1536)    # (K a whole number of steps)
    for fmt in fmts:
        got, want, ran = _fused_prefill(backend, fmt, 40, 7, k, ffn)
        for a, b in zip(got, want):
            assert np.abs(a - b).max() <= 4e-3 * np.abs(b).max(), (fmt, a.shape)
        if backend.name != "reference":
            tiles = [r for r in ran if r.endswith(label)]
            room = backend.info.limit("max-compute-workgroup-storage-size", 16384)
            kinds = _fused_kinds(backend) - ({"qgemv[rms_norm+swiglu]"} if
                                             smat.fused_workgroup_bytes(sh, True) > room
                                             else set())   # (SwiGLU's second tiles: some fit)
            assert {r.rsplit("_smat_", 1)[0] for r in tiles} == kinds, ran


def test_fused_prefill_default_only_where_offered(backend, monkeypatch):
    """The fused prefill projections of 40 rows take quant/qmatmul_smat_fused.wgsl by default
    where the adapter has subgroup matrices, never elsewhere or with smat.MODE "off"; 3 rows
    (decode) keep the GEMVs."""
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    for mode, s in ((None, 40), ("off", 40), (None, 3)):
        monkeypatch.setattr(smat, "MODE", mode)
        got, want, ran = _fused_prefill(backend, "q4_1", s, 0)
        for a, b in zip(got, want):
            assert np.abs(a - b).max() <= 4e-3 * np.abs(b).max()
        if backend.name != "reference":
            on = _available(backend) and mode is None and s == 40
            fused = [r for r in ran if r.startswith("qgemv[")]
            # (res twice: o and down)
            assert len(fused) == len(_fused_kinds(backend)) + 1 or s == 3, ran
            assert sum("_smat_" in r for r in fused) == (len(fused) if on else 0), ran


def test_fused_prefill_qkv_mixed_formats(backend, monkeypatch):
    """A Q4_K_M file's layer keeps v in Q6_K beside q and k in Q4_K: q, k and v still run as one
    dispatch on tensor cores (each segment its own format) where 10 storage buffers bind, from
    position 60 of a 64-row cache (rows past its end skipped); within 4e-3 x max|ref|."""
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    got, want, ran = _fused_prefill(backend, "q4_k", 24, 60, v_fmt="q6_k")
    for a, b in zip(got, want):
        assert np.abs(a - b).max() <= 4e-3 * np.abs(b).max(), a.shape
    if backend.name != "reference" and _available(backend) and \
            backend.info.limit("max-storage-buffers-per-shader-stage", 8) >= 10:
        assert any(r.startswith("qgemv[q+k+v]_smat_") for r in ran), ran
