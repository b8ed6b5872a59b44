"""qmatmul / qgather: GGUF Q4_1 and Q8_0 blocks dequantized inside the kernels (GEMV rows,
tiled prefill, embedding rows), against numpy dequantize-then-matmul in float64."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import for_browser, formats_taking_turns, qkv_into_caches, rand, run_graph

import webrlx as wr
from webrlx import nn, quant

FORMATS = ["q4_1", "q8_0"]
# (N, K): SmolLM2-135M's q/o (576, 576), up/gate (1536, 576), down (576, 1536), a small one,
# and a 1000-row stand-in for the 49152-row tied head
NK = [(576, 576), (1536, 576), (576, 1536), (96, 64), (1000, 576)]


def qweight(fmt: str, n: int, k: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Return (uint32 words of a random (n, k) weight quantized to fmt, its dequantized f64)."""
    raw = quant.quantize(rand(n, k, seed=seed) * 0.1, fmt)
    return quant.words(raw), quant.dequantize(raw, fmt, (n, k)).astype(np.float64)


def check_qlinear(backend, fmt, x, n, bias=None):
    k = x.shape[-1]
    w, wf = qweight(fmt, n, k)
    params = {"w": w} | ({"b": bias} if bias is not None else {})
    (got,) = run_graph(backend, lambda x, **p: nn.qlinear(x, p["w"], fmt, n, k, bias=p.get("b")),
                       [x], params)
    want = x.astype(np.float64) @ wf.T + (0 if bias is None else bias)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("fmt,m,n,k", formats_taking_turns(
    FORMATS, [(m, n, k) for n, k in NK for m in (1, 2, 4, 5, 37, 128)]))
def test_qlinear(backend, fmt, m, n, k):
    check_qlinear(backend, fmt, rand(m, k), n)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("lead", [(2, 3), (3,), (2, 40)], ids=str)
def test_qlinear_batched_with_bias(backend, fmt, lead):
    check_qlinear(backend, fmt, rand(*lead, 96), 100, bias=rand(100, seed=5))


def _qlinear_plan(backend, fmt: str, m: int, k: int, w: np.ndarray):
    """The plan of one m-row qlinear (N = 100) of weight words w on backend: its call, the
    variants it offers and the one that ran."""
    g = wr.Graph()
    wp = g.param("w", (quant.nwords(fmt, 100, k),), "uint32")
    exe = wr.compile(g, outputs=[nn.qlinear(g.input("x", (m, k)), wp, fmt, 100, k)],
                     device=backend)
    exe.set_params({"w": w})
    return exe.plan({})


GEMVS = [f"qgemv_{t}" for t in (2, 4, 8, 16, 32, "1x4", "1x8")]


@pytest.mark.parametrize("fmt,kernel,m", formats_taking_turns(
    FORMATS, [(k, m) for k in GEMVS for m in (1, 3)] +
    [(k, 13) for k in GEMVS + ["qgemv_4q2", "qgemv_2q4"]]), ids=str)
def test_each_gemv_kernel(backend, kernel, fmt, m, monkeypatch):
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "PREFER", kernel)   # the autotuner would pick one of them
    check_qlinear(backend, fmt, rand(m, 96), 100, bias=rand(100, seed=5))
    if backend.name != "reference":                   # (PREFER names an offered variant)
        plan = _qlinear_plan(backend, fmt, m, 96, qweight(fmt, 100, 96)[0])
        (call,) = plan.program.calls
        assert kernel in [call.name] + [v.name for v in call.variants]


@pytest.mark.parametrize("kernel,m", [("qgemv_4x2q2", 8), ("qgemv_2x2q4", 13),
                                      ("qgemv_32x2q2", 5)], ids=str)
@pytest.mark.parametrize("fmt", FORMATS + ["q4_k", "q6_k"])
def test_gemv_two_weight_rows_over_row_quads(backend, kernel, fmt, m, monkeypatch):
    """Batched-decode GEMVs with 2 weight rows a thread over RQ x row quads (RPT = 2, slots
    i * RQ + q): N = 100 leaves the second row past N in the last workgroup, and 5 or 13 rows
    leave quads part-filled or empty; against numpy."""
    from webrlx.compiler import lower_quant
    from webrlx.runtime import autotune
    monkeypatch.setattr(lower_quant, "GEMV_RPT_RQ", True)         # (a GPU-only variant)
    monkeypatch.setattr(lower_quant, "cpu_adapter", lambda L: False)
    monkeypatch.setattr(autotune, "PREFER", kernel)
    k = 256 if fmt in ("q4_k", "q6_k") else 96
    raw = quant.random_blocks(fmt, 100, k, seed=3, scale=0.05)      # (any format's blocks)
    w, x, bias = quant.words(raw), rand(m, k), rand(100, seed=5)
    (got,) = run_graph(backend, lambda x, **p: nn.qlinear(x, p["w"], fmt, 100, k, bias=p["b"]),
                       [x], {"w": w, "b": bias})
    want = x.astype(np.float64) @ quant.dequantize(raw, fmt, (100, k)).astype(np.float64).T + bias
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
    if backend.name != "reference":
        plan = _qlinear_plan(backend, fmt, m, k, w)
        (call,) = plan.program.calls
        assert kernel in [call.name] + [v.name for v in call.variants]
        assert plan.ran == [kernel]


@pytest.mark.parametrize("kernel", ["qmatmul_64", "qmatmul_128"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("m,n", [(37, 1000), (130, 198)], ids=str)
def test_each_tiled_kernel(backend, kernel, fmt, m, n, monkeypatch):
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "PREFER", kernel)   # the autotuner would pick one of them
    check_qlinear(backend, fmt, rand(m, 96), n, bias=rand(n, seed=5))


@pytest.mark.parametrize("fmt", ["q4_1", "q8_0", "q4_k", "q6_k", "q5_k", "q3_k"])
@pytest.mark.parametrize("bias", [False, True])
def test_prefill_decodes_a_big_weight_first(backend, fmt, bias, monkeypatch):
    """From DEQUANT_MIN_M rows on a GPU (pretended here) without subgroup matrices in use (off
    under Dawn on NVIDIA, where this failed on 2026-11-28), a product past DEQUANT_MIN_WORK
    (here any) decodes its weight once, transposed (quant/qdequant_t.wgsl), and runs the f32
    matmul on it: N = 100 leaves the last 64-row tile part-filled; against numpy on the
    dequantized weight. A weight whose floats pass DEQUANT_MAX_BYTES, or of N % 4 != 0 rows,
    keeps the tiled kernels."""
    from webrlx.compiler import lower_quant, smat
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: False))
    monkeypatch.setattr(lower_quant, "DEQUANT_MIN_WORK", 0)
    monkeypatch.setattr(smat, "MODE", "off")   # (under Dawn on NVIDIA: as a GPU without them)
    m, n, k = 40, 100, 256
    raw = quant.random_blocks(fmt, n, k, seed=4, scale=0.05)
    w, x, b = quant.words(raw), rand(m, k), rand(n, seed=6)
    params = {"w": w} | ({"b": b} if bias else {})
    (got,) = run_graph(backend, lambda x, **p: nn.qlinear(x, p["w"], fmt, n, k, bias=p.get("b")),
                       [x], params)
    want = x.astype(np.float64) @ quant.dequantize(raw, fmt, (n, k)).astype(np.float64).T
    want += b if bias else 0
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
    if backend.name == "reference":
        return
    ran = _qlinear_plan(backend, fmt, m, k, w).ran             # (_qlinear_plan: N = 100)
    assert ran[0] == f"qdequant_t[{fmt}]" and ran[1].startswith("matmul"), ran
    monkeypatch.setattr(lower_quant, "DEQUANT_MAX_BYTES", 4 * n * k - 4)
    assert not any(r.startswith("qdequant_t") for r in _qlinear_plan(backend, fmt, m, k, w).ran)
    monkeypatch.setattr(lower_quant, "DEQUANT_MAX_BYTES", 1 << 28)     # N % 4 != 0: tiles too
    g = wr.Graph()
    w98 = quant.words(quant.random_blocks(fmt, 98, k, seed=4))
    exe = wr.compile(g, outputs=[nn.qlinear(g.input("x", (m, k)), g.param("w", (w98.size,),
                                                                           "uint32"),
                                            fmt, 98, k)], device=backend)
    exe.set_params({"w": w98})
    assert not any(r.startswith("qdequant_t") for r in exe.plan({}).ran)


@pytest.mark.parametrize("fmt", FORMATS)
def test_qlinear_float16_input(backend, fmt):
    x = rand(3, 64).astype(np.float16)
    w, wf = qweight(fmt, 40, 64)
    (got,) = run_graph(backend, lambda x, w: nn.qlinear(x, w, fmt, 40, 64), [x], {"w": w})
    want = x.astype(np.float64) @ wf.T
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("ids", [[7, 0, 999, 3, 7], [[1, 2, 3], [998, 0, 500]]], ids=str)
def test_qembedding(backend, fmt, ids):
    ids = np.asarray(ids, np.int32)
    w, wf = qweight(fmt, 1000, 96)
    (got,) = run_graph(backend, lambda i, w: nn.qembedding(i, w, fmt, 1000, 96), [ids],
                       {"w": w})
    np.testing.assert_allclose(got, wf[ids], rtol=1e-6, atol=1e-7)   # d * q + m may fuse


def test_qembedding_out_of_range_is_an_index_error_on_reference():
    w, _ = qweight("q8_0", 10, 32)
    with pytest.raises(IndexError, match="out of range"):
        run_graph(wr.device("reference"), lambda i, w: nn.qembedding(i, w, "q8_0", 10, 32),
                  [np.array([3, 10], np.int32)], {"w": w})


@pytest.mark.parametrize("words,k,match", [(9 * 20 // 4 - 1, 96, r"shape \(45,\)"),
                                           (1, 48, "multiple of 32")], ids=str)
def test_qlinear_rejects_bad_weights(words, k, match):
    g = wr.Graph()
    x, w = g.input("x", (2, k)), g.param("w", (words,), "uint32")
    with pytest.raises(wr.ShapeError, match=match):
        nn.qlinear(x, w, "q4_1", 3, k)


def _rms(x, g, eps=1e-5):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


@pytest.mark.parametrize("fmt,m,tpr", formats_taking_turns(
    FORMATS, [(m, t) for m in (1, 3, 6, 40)
              for t in (None, 2, 32, "1x4", "1x8", "4q2", "8q4", "tile1", "tile8", "8x2q2")
              if (m > 4 or not str(t).startswith("tile"))   # prefills
              and (m == 6 or t != "8x2q2")]                  # batched decodes
    + [(13, "16x2q4")]))
def test_fused_decoder_gemvs(backend, fmt, m, tpr, monkeypatch):
    """A decoder layer's GEMV neighbourhood fuses (quant/qgemv_fused.wgsl, or for prefills
    quant/qmatmul_fused.wgsl: the tileN shapes): rms_norm before q/k-like projections,
    gate/up + silu * mul, and the residual add after a projection; against float64 numpy of
    the unfused math."""
    from webrlx.compiler import smat
    from webrlx.runtime import autotune
    # the f32 kernels (the tensor-core forms, f16 inputs, have tests/backend/test_smat.py)
    monkeypatch.setattr(smat, "MODE", "off")
    if "x2q" in str(tpr):                  # 2 weight rows a thread over row quads (GPUs)
        from webrlx.compiler import lower_quant
        monkeypatch.setattr(lower_quant, "GEMV_RPT_RQ", True)
        monkeypatch.setattr(lower_quant, "cpu_adapter", lambda L: False)
    if str(tpr).startswith("tile") or "x2q" in str(tpr):
        monkeypatch.setattr(autotune, "PREFER", f"*_{tpr}")    # every fused call
    elif tpr is not None:
        monkeypatch.setattr(autotune, "PREFER", f"qgemv[rms_norm+swiglu]_{tpr}")
    k, ffn = 96, 160
    wq, wqf = qweight(fmt, k, k, seed=2)
    wk, wkf = qweight(fmt, 32, k, seed=3)
    wo, wof = qweight(fmt, k, k, seed=10)
    wg, wgf = qweight(fmt, ffn, k, seed=4)
    wu, wuf = qweight(fmt, ffn, k, seed=5)
    wd, wdf = qweight(fmt, k, ffn, seed=6)
    g1, g2 = rand(k, seed=7) + 1.5, rand(k, seed=8) + 1.5
    x = rand(m, k, seed=9)

    def layer(x, **p):
        h = nn.rms_norm(x, p["g1"], 1e-5)
        q = nn.qlinear(h, p["wq"], fmt, k, k)
        kk = nn.qlinear(h, p["wk"], fmt, 32, k)
        x = x + nn.qlinear(q, p["wo"], fmt, k, k)             # o-proj + residual
        h = nn.rms_norm(x, p["g2"], 1e-5)
        gate, up = nn.qlinear(h, p["wg"], fmt, ffn, k), nn.qlinear(h, p["wu"], fmt, ffn, k)
        return x + nn.qlinear(gate.silu() * up, p["wd"], fmt, k, ffn), kk

    arrays = {"wq": wq, "wk": wk, "wo": wo, "wg": wg, "wu": wu, "wd": wd, "g1": g1, "g2": g2}
    got, got_k = run_graph(backend, layer, [x], arrays)
    h = _rms(x, g1)
    x1 = x + (h @ wqf.T) @ wof.T
    h2 = _rms(x1, g2)
    a, b = h2 @ wgf.T, h2 @ wuf.T
    want = x1 + (a / (1 + np.exp(-a)) * b) @ wdf.T
    np.testing.assert_allclose(got_k, h @ wkf.T, rtol=0, atol=2e-4)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-4 * np.abs(want).max())
    if backend.name != "reference":
        g = wr.Graph()
        xs = g.input("x", (m, k))
        ps = {n_: g.param(n_, a_.shape, a_.dtype) for n_, a_ in arrays.items()}
        exe = wr.compile(g, outputs=list(layer(xs, **ps)), device=backend)
        exe.set_params(arrays)
        names = [c.name for c in exe.plan({}).program.calls]
        assert len(names) == 5 and all(n_.startswith("qgemv[") for n_ in names), names
        if str(tpr).startswith("tile") or "x2q" in str(tpr):
            assert all(n_.endswith(f"_{tpr}") for n_ in exe.plan({}).ran), exe.plan({}).ran


@pytest.mark.parametrize("s", [1, 5])
def test_fused_gemv_rope_with_frequency_factors(backend, s, monkeypatch):
    """Llama 3's rope (frequency factors: llama.cpp's rope_freqs) fuses into the q and k
    GEMVs with the cache write; q and the cache match the reference's unfused rope."""
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    fmt, k, hd, heads, kv, cap = "q8_0", 256, 16, 4, 2, 32
    factors = tuple(float(f) for f in np.linspace(1.0, 32.0, hd // 2))
    arrays = {"wq": qweight(fmt, heads * hd, k, seed=2)[0],
              "wk": qweight(fmt, kv * hd, k, seed=3)[0], "g": rand(k, seed=5) + 1.5}
    g = wr.Graph()
    x = g.input("x", (1, s, k))
    pos = g.input("pos", (1,), "int32")
    p = {n_: g.param(n_, a.shape, a.dtype) for n_, a in arrays.items()}
    h = nn.rms_norm(x, p["g"], 1e-5)
    q = nn.rope(nn.qlinear(h, p["wq"], fmt, heads * hd, k).reshape(1, -1, heads, hd), pos,
                500000.0, factors=factors)
    kr = nn.rope(nn.qlinear(h, p["wk"], fmt, kv * hd, k).reshape(1, -1, kv, hd), pos,
                 500000.0, factors=factors)
    outs = [q * 1.0, nn.cache_write(g.state("kc", (1, kv, cap, hd)), kr, pos) * 1.0]
    exe = run_like_reference(backend, g, outs, arrays, (1, s, k), (0, 21))
    if backend.name != "reference":
        names = {c.name.rsplit("_", 1)[0] for c in exe.plan({}).program.calls}
        assert {"qgemv[rms_norm+rope]", "qgemv[rms_norm+rope+cache]"} <= names, names


QKV_LIMIT = "max-storage-buffers-per-shader-stage"


def run_like_reference(backend, g, outs, arrays, x_shape, starts, scaled=None):
    """Compile outs on backend and on the reference device, set arrays, and check both agree
    for x = rand(x_shape) at pos = each of starts: atol 3e-4, times max|want| where scaled
    (True), or times max(scaled, max|want|) for a number. Returns backend's executable."""
    from webrlx.backends.reference import ReferenceDevice
    exe = wr.compile(g, outputs=outs, device=backend)
    ref = wr.compile(g, outputs=outs, device=ReferenceDevice())
    for e in (exe, ref):
        e.set_params(arrays)
    for start in starts:
        feeds = {"x": rand(*x_shape, seed=start), "pos": np.array([start], np.int32)}
        for got, want in zip(exe.run(feeds), ref.run(feeds)):
            peak = float(np.abs(want).max())
            atol = 3e-4 if scaled is None else 3e-4 * (peak if scaled is True else
                                                       max(float(scaled), peak))
            np.testing.assert_allclose(got, want, rtol=0, atol=atol)
    return exe


@pytest.mark.parametrize("fmt,s,shape,qkv", formats_taking_turns(
    FORMATS, [(s, sh, qkv) for s in (1, 3, 5, 40)
              for sh in ((8, 1, 1), (1, 8, 1), (2, 4, 1), (4, 1, 2), (2, 1, 4), "tile1",
                         "tile2", "tile8")
              for qkv in (False, True)
              if (s > 4 or not isinstance(sh, str)) and   # tiles: prefills; q/k/v in one
              (s == 3 or not qkv) and                     # dispatch: decode rows
              (s != 3 or qkv and sh in ((8, 1, 1), (1, 8, 1)))]), ids=str)
def test_fused_gemv_rope_and_cache_write(backend, fmt, s, shape, qkv, monkeypatch):
    """q/k/v projections whose results are roped (interleaved pairs) and written into KV
    caches at pos fuse into their GEMVs; the caches and q match the unfused reference, for
    each GEMV shape (threads per weight row, weight rows per thread). With `qkv` (decode rows
    on a device binding 10 storage buffers) the three run as one dispatch
    (quant/qgemv_qkv.wgsl); with 8 (WebGPU's default limit) each runs alone."""
    from webrlx.compiler import lower_quant, smat
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)        # the default runs
    monkeypatch.setattr(smat, "MODE", "off")    # f32 kernels (tensor cores: test_smat.py)
    if backend.name != "reference":     # (an adapter under 10 keeps the three GEMVs)
        qkv = qkv and backend.info.limit(QKV_LIMIT, 8) >= 10
        if not qkv:
            monkeypatch.setitem(backend.info.limits, QKV_LIMIT, 8)
    if isinstance(shape, str):          # prefills through quant/qmatmul_fused.wgsl
        monkeypatch.setattr(autotune, "PREFER", f"*_{shape}")
    else:
        monkeypatch.setattr(lower_quant, "gemv_shape", lambda n, k, cpu=False: shape)
    k, hd, heads, kv, cap = 96, 16, 6, 2, 64
    arrays = {"wq": qweight(fmt, heads * hd, k, seed=2)[0], "wk": qweight(fmt, kv * hd, k,
                                                                         seed=3)[0],
              "wv": qweight(fmt, kv * hd, k, seed=4)[0], "g": rand(k, seed=5) + 1.5}
    g = wr.Graph()
    x = g.input("x", (1, s, k))
    pos = g.input("pos", (1,), "int32")
    p = {n_: g.param(n_, a.shape, a.dtype) for n_, a in arrays.items()}
    h = nn.rms_norm(x, p["g"], 1e-5)
    q, kc, vc = qkv_into_caches(g, h, p, (fmt,) * 3, k, heads, kv, hd, cap, pos)
    outs = [q * 1.0, kc * 1.0, vc * 1.0]
    # (the last start writes past the cache's end)
    exe = run_like_reference(backend, g, outs, arrays, (1, s, k), (0, 7, cap - 2))
    if backend.name != "reference":
        names = [c.name for c in exe.plan({}).program.calls]
        kinds = {n_.rsplit("_", 1)[0] for n_ in names}
        if qkv:
            assert "qgemv[q+k+v]" in kinds and not any("rope" in n_ for n_ in kinds), names
        else:
            assert {"qgemv[rms_norm+rope]", "qgemv[rms_norm+rope+cache]",
                    "qgemv[rms_norm+cache]"} <= kinds, names
        if isinstance(shape, str):
            ran = exe.plan({}).ran
            assert sum(n_.endswith(f"_{shape}") for n_ in ran) == 3, ran


@pytest.mark.parametrize("budget", [0, None])
def test_batched_rows_norm_alone_past_the_prologue_budget(backend, budget, monkeypatch):
    """GEMVs of 5-15 rows whose norm prologues would re-read more x than
    fuse.PROLOGUE_MAX_BYTES leave the norm as its own kernel (0: always), and give the same
    rows as the fused prologue (None: the default budget) against float64 numpy."""
    from webrlx.compiler import fuse
    if budget is not None:
        monkeypatch.setattr(fuse, "PROLOGUE_MAX_BYTES", budget)
    m, k, n = 8, 256, 96
    raw = quant.random_blocks("q4_k", n, k, seed=1, scale=0.01)
    arrays = {"w": quant.words(raw), "g": rand(k, seed=4) + 1.5}
    x = rand(m, k, seed=5)
    g = wr.Graph()
    xs = g.input("x", (m, k))
    p = {n_: g.param(n_, a.shape, a.dtype) for n_, a in arrays.items()}
    y = nn.qlinear(nn.rms_norm(xs, p["g"], 1e-5), p["w"], "q4_k", n, k)
    exe = wr.compile(g, outputs=[y * 1.0], device=backend)
    exe.set_params(arrays)
    (got,) = exe.run({"x": x})
    want = _rms(x, arrays["g"]) @ quant.dequantize(raw, "q4_k", (n, k)).astype(np.float64).T
    np.testing.assert_allclose(got, want, rtol=0, atol=3e-4 * np.abs(want).max())
    if backend.name != "reference":
        kinds = [c.name for c in exe.plan({}).program.calls]
        assert any(n_.startswith("qgemv[rms_norm]") for n_ in kinds) == (budget is None), kinds


@pytest.mark.parametrize("fmt", ["q4_k"] + ([] if for_browser() else ["q8_0"]))
@pytest.mark.parametrize("b,s,qkv,variant", [(8, 1, True, None), (6, 1, False, "*_16q2"),
                                             (2, 3, False, None)] + ([] if for_browser() else [
    (8, 1, False, None), (3, 1, True, None), (8, 1, True, "*_32w2"), (8, 1, False, "*_8w4"),
    (1, 20, False, "*_tile1"), (8, 1, True, "*_16x2q2"), (8, 1, False, "*_8x2q2")]), ids=str)
def test_fused_gemv_rope_and_cache_write_per_row(backend, fmt, b, s, qkv, variant,
                                                 monkeypatch):
    """A batched engine's rows: pos (2, B) = [positions; KV slots] per batch row (common/
    row_positions.wgsl). q is roped and k, v are written into each row's slot at its
    position (past the cache's end: skipped) by the GEMVs themselves, q/k/v in one dispatch
    where 10 storage buffers bind, else each alone, also with row quads (q2), the WIDE GEMVs
    and the tiled prefill kernel; all match the reference's rope and cache_write ops."""
    from webrlx.backends.reference import ReferenceDevice
    from webrlx.compiler import lower_quant
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    if variant is not None:
        monkeypatch.setattr(autotune, "PREFER", variant)
        monkeypatch.setattr(lower_quant, "cpu_adapter", lambda L: False)
        monkeypatch.setattr(lower_quant, "GEMV_RPT_RQ", True)
    if backend.name != "reference":
        qkv = qkv and backend.info.limit(QKV_LIMIT, 8) >= 10
        if not qkv:
            monkeypatch.setitem(backend.info.limits, QKV_LIMIT, 8)
    k, hd, heads, kv, cap, slots = 256, 16, 4, 2, 24, 10

    def blocks(n: int, seed: int) -> np.ndarray:     # random blocks of any format
        return quant.words(quant.random_blocks(fmt, n, k, seed=seed, scale=0.05))
    arrays = {"wq": blocks(heads * hd, 2), "wk": blocks(kv * hd, 3), "wv": blocks(kv * hd, 4),
              "g": rand(k, seed=5) + 1.5}
    g = wr.Graph()
    x = g.input("x", (b, s, k))
    pos = g.input("kv", (2, b), "int32")
    p = {n_: g.param(n_, a.shape, a.dtype) for n_, a in arrays.items()}
    h = nn.rms_norm(x, p["g"], 1e-5)
    q, kc, vc = qkv_into_caches(g, h, p, (fmt,) * 3, k, heads, kv, hd, cap, pos, slots)
    outs = [q * 1.0, kc * 1.0, vc * 1.0]
    exe = wr.compile(g, outputs=outs, device=backend)
    ref = wr.compile(g, outputs=outs, device=ReferenceDevice())
    for e in (exe, ref):
        e.set_params(arrays)
    rng = np.random.default_rng(b * 100 + s)
    for step in range(2):
        rows = np.array([rng.permutation(slots)[:b], rng.integers(0, cap - s + 1, b)])
        rows[1, 0] = cap - 1 if s > 1 else rows[1, 0]        # a row running past the end
        feeds = {"x": rand(b, s, k, seed=step), "kv": np.stack([rows[1], rows[0]]).astype(
            np.int32)}
        for got, want in zip(exe.run(feeds), ref.run(feeds)):
            np.testing.assert_allclose(got, want, rtol=0,
                                       atol=3e-4 * float(np.abs(want).max()))
    if backend.name != "reference":
        kinds = {c.name.rsplit("_", 1)[0] for c in exe.plan({}).program.calls}
        assert not {"rope", "cache_write"} & kinds, kinds      # all fused into the GEMVs
        if qkv:
            assert "qgemv[q+k+v]" in kinds, kinds
        if variant is not None:
            ran = [n_ for n_ in exe.plan({}).ran if n_.startswith("qgemv[")]
            assert ran and all(n_.endswith(variant[1:]) for n_ in ran), ran


@pytest.mark.parametrize("formats", [("q4_k", "q4_k", "q6_k")] + ([] if for_browser() else [
    ("q5_0", "q8_0", "q8_0"), ("q4_1", "q8_0", "q4_0"), ("q6_k", "q4_k", "q5_k")]), ids=str)
@pytest.mark.parametrize("variant", [None, "*w4"])
def test_qkv_of_mixed_formats(backend, formats, variant, monkeypatch):
    """Q4_K_M files keep v (some layers) in another format than q and k: the three still run
    as one dispatch where 10 storage buffers bind, a format a segment (common/
    qformat_segments.wgsl; also with the WIDE GEMVs), and q and both caches match the
    unfused reference at two decode positions."""
    from webrlx.compiler import lower_quant
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    if variant is not None:
        monkeypatch.setattr(autotune, "PREFER", variant)
        monkeypatch.setattr(lower_quant, "cpu_adapter", lambda L: False)
        monkeypatch.setattr(lower_quant, "GEMV_RPT_RQ", True)
    k, hd, heads, kv, cap = 256, 16, 4, 2, 32
    fq, fk, fv = formats
    def blocks(fmt: str, n: int, seed: int) -> np.ndarray:   # random blocks of any format
        return quant.words(quant.random_blocks(fmt, n, k, seed=seed, scale=0.05))
    arrays = {"wq": blocks(fq, heads * hd, 2), "wk": blocks(fk, kv * hd, 3),
              "wv": blocks(fv, kv * hd, 4), "g": rand(k, seed=5) + 1.5}
    g = wr.Graph()
    x = g.input("x", (1, 1, k))
    pos = g.input("pos", (1,), "int32")
    p = {n_: g.param(n_, a.shape, a.dtype) for n_, a in arrays.items()}
    h = nn.rms_norm(x, p["g"], 1e-5)
    q, kc, vc = qkv_into_caches(g, h, p, formats, k, heads, kv, hd, cap, pos, base=500000.0,
                                factors=tuple(1.0 + 0.5 * i for i in range(hd // 2)))
    outs = [q * 1.0, kc * 1.0, vc * 1.0]
    exe = run_like_reference(backend, g, outs, arrays, (1, 1, k), (3, 30), scaled=True)
    if backend.name != "reference":
        kinds = {c.name.rsplit("_", 1)[0] for c in exe.plan({}).program.calls}
        if backend.info.limit(QKV_LIMIT, 8) >= 10:
            assert "qgemv[q+k+v]" in kinds and len(kinds) == 2, kinds   # (and the * 1.0)
        else:
            assert not any(n_.startswith("qgemv[q+") or n_.startswith("qgemv[k+")
                           for n_ in kinds), kinds
        if variant is not None:
            ran = [n_ for n_ in exe.plan({}).ran if n_.startswith("qgemv[")]
            assert ran and all(n_.endswith(variant[1:]) for n_ in ran), ran


def test_kv_cache_writers_are_timed_on_stand_ins(backend, tmp_path, monkeypatch):
    """The autotuner times the calls that write the KV caches (q/k/v's fused GEMV) with
    scratch buffers bound in place of the caches (runtime/plan.TIME_STATE_CALLS): such a call
    gets a timed pick, no trial run binds a live cache, the two layers' calls share their
    stand-ins (a call's two, not four), and q and the caches still match the reference at two
    decode positions."""
    from webrlx.runtime import autotune
    from webrlx.runtime import plan as plan_mod
    monkeypatch.setattr(autotune, "TIME_VARIANTS", True)
    monkeypatch.setattr(autotune, "CACHE_FILE", tmp_path / "tune.json")
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", True)
    monkeypatch.setattr(plan_mod, "TIME_STATE_CALLS", "all")
    trials: list[list[object]] = []
    real_timer = autotune.timer

    def spy(backend_, entries, cold=False, fit=None):   # noqa: ANN001, ANN202
        trials.append([e[0] for e in entries])
        return real_timer(backend_, entries, cold, fit)
    monkeypatch.setattr(autotune, "timer", spy)
    k, hd, heads, kv, cap = 256, 16, 4, 2, 32
    arrays = {"g": rand(k, seed=5) + 1.5}
    g = wr.Graph()
    x = g.input("x", (1, 1, k))
    pos = g.input("pos", (1,), "int32")
    p = {"g": g.param("g", (k,), "float32")}
    outs = []
    for layer, fmt in (("", "q4_k"), ("2", "q4_1")):   # (another format: timed again)
        arrays.update({n_ + layer: quant.words(quant.random_blocks(fmt, rows, k, seed=i + 7,
                                                                    scale=0.05))
                       for i, (n_, rows) in enumerate((("wq", heads * hd), ("wk", kv * hd),
                                                        ("wv", kv * hd)))})
        w = {n_: g.param(n_ + layer, arrays[n_ + layer].shape, arrays[n_ + layer].dtype)
             for n_ in ("wq", "wk", "wv")}
        q, kc, vc = qkv_into_caches(g, nn.rms_norm(x, p["g"], 1e-5), w, (fmt,) * 3, k,
                                    heads, kv, hd, cap, pos, layer=layer)
        outs += [q * 1.0, kc * 1.0, vc * 1.0]
    exe = run_like_reference(backend, g, outs, arrays, (1, 1, k), (3, 30), scaled=True)
    if backend.name == "reference":
        return
    plan = exe.plan({})
    live = {id(plan.where[b.id][0]) for b in plan.program.states.values()}
    assert len(live) == 4 and trials
    assert not any(id(buf) in live for entries in trials for buf in entries)
    known = {id(buf) for buf, _ in plan.where.values()} | {id(plan.uniform)}
    stand_ins = {id(buf) for entries in trials for buf in entries} - known
    assert len(stand_ins) == 2, len(stand_ins)
    timed = autotune.table(backend.info.tune_name)
    assert len([key for key in timed if key.startswith("qgemv_qkv")]) == 2, sorted(timed)


@pytest.mark.parametrize("window,storage,gpu_path", [(0, None, False), (40, None, False),
                                                    (0, 8192, False), (0, None, True),
                                                    (40, None, True)], ids=str)
def test_attention_combine_in_the_o_projection(backend, window, storage, gpu_path,
                                               monkeypatch):
    """A decode step's attention (one query row, keys cut into chunks at run time) feeds the
    o projection GEMV, which merges the per-chunk partials itself (no attn_combine
    dispatch): its output equals the reference at positions that fill 1 to all chunks, with
    GQA and a sliding window; a device with too little workgroup memory for the merged row
    keeps the combine dispatch. gpu_path: the kernel and chunking a discrete GPU gets
    (decoder/attn_decode, one-tile chunks) on any adapter."""
    from webrlx.backends.reference import ReferenceDevice
    from webrlx.compiler import lower_decoder
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    if gpu_path:
        monkeypatch.setattr(lower_decoder, "PREFILL_KERNEL", "decode")
        monkeypatch.setattr(lower_decoder, "cpu_adapter", lambda L: False)
    if storage is not None and backend.name != "reference":
        monkeypatch.setitem(backend.info.limits, "max-compute-workgroup-storage-size", storage)
    heads, kv, hd, cap, width = 8, 2, 32, 512, 96
    arrays = {"wo": quant.words(quant.random_blocks("q4_k", width, heads * hd, seed=7,
                                                    scale=0.05)),
              "kc": rand(1, kv, cap, hd, seed=8), "vc": rand(1, kv, cap, hd, seed=9)}
    g = wr.Graph()
    q = g.input("q", (1, 1, heads, hd))
    r = g.input("r", (1, 1, width))
    pos = g.input("pos", (1,), "int32")
    kc, vc = g.input("kc", (1, kv, cap, hd)), g.input("vc", (1, kv, cap, hd))
    wo = g.param("wo", arrays["wo"].shape, arrays["wo"].dtype)
    a = nn.cached_attention(q, kc, vc, pos, 0.2, window=window).reshape(1, 1, heads * hd)
    out = nn.qlinear(a, wo, "q4_k", width, heads * hd) + r
    exe = wr.compile(g, outputs=[out], device=backend)
    ref = wr.compile(g, outputs=[out], device=ReferenceDevice())
    for e in (exe, ref):
        e.set_params({"wo": arrays["wo"]})
    for p0 in (0, 63, 64, 200, cap - 1):
        feeds = {"q": rand(1, 1, heads, hd, seed=p0), "r": rand(1, 1, width, seed=p0 + 1),
                 "pos": np.array([p0], np.int32), "kc": arrays["kc"], "vc": arrays["vc"]}
        (got,), (want,) = exe.run(feeds), ref.run(feeds)
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-4 * np.abs(want).max())
    if backend.name != "reference":
        kinds = {c.name.rsplit("_", 1)[0] for c in exe.plan({}).program.calls}
        split = "cached_attention[combine]" in kinds
        fused = any(k_.startswith("qgemv[combine") for k_ in kinds)
        assert not (split and fused), kinds
        if storage is not None:         # 4 * 256 + 8448 bytes do not fit in 8192
            assert not fused, kinds
        elif not split:                 # one chunk: the attention writes its output
            assert any(k_.startswith("qgemv[") for k_ in kinds), kinds


# the GPU GEMV variants' formats: in the browser (SwiftShader compiles each case's shaders for
# seconds) the two of Q4_K_M files, natively all
WIDE_FORMATS = ["q4_k", "q6_k"] if for_browser() else ["q4_k", "q6_k", "q4_1", "q8_0", "q5_0"]


@pytest.mark.parametrize("fmt", WIDE_FORMATS)
@pytest.mark.parametrize("un", ["u2", "u4", "w2", "w4"])
def test_unrolled_gemv_variants(backend, fmt, un, monkeypatch):
    """The GPU variants that load UN units a thread before summing them (common/
    qgemv_body.wgsl UN: uN units TPR apart, wN neighbours of one block with their scales
    decoded once, WIDE; offered where the adapter is not a CPU) give the reference's q, KV
    caches and SwiGLU FFN rows, with K not a multiple of UN * TPR units."""
    from webrlx.compiler import lower_quant
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(autotune, "PREFER", f"*{un}")
    monkeypatch.setattr(lower_quant, "cpu_adapter", lambda L: False)
    k, hd, heads, kv, cap, ffn = 768, 16, 4, 2, 16, 96
    blocks = {n_: quant.words(quant.random_blocks(fmt, rows, k, seed=i, scale=0.05))
              for i, (n_, rows) in enumerate((("wq", heads * hd), ("wk", kv * hd),
                                               ("wv", kv * hd), ("wg", ffn), ("wu", ffn)))}
    arrays = {**blocks, "g": rand(k, seed=5) + 1.5}
    g = wr.Graph()
    x = g.input("x", (1, 1, k))
    pos = g.input("pos", (1,), "int32")
    p = {n_: g.param(n_, a.shape, a.dtype) for n_, a in arrays.items()}
    h = nn.rms_norm(x, p["g"], 1e-5)
    q, kc, vc = qkv_into_caches(g, h, p, (fmt,) * 3, k, heads, kv, hd, cap, pos)
    h2 = nn.rms_norm(x * 0.5, p["g"], 1e-5)
    f = nn.qlinear(h2, p["wg"], fmt, ffn, k).silu() * nn.qlinear(h2, p["wu"], fmt, ffn, k)
    outs = [q * 1.0, kc * 1.0, vc * 1.0, f * 1.0]
    exe = run_like_reference(backend, g, outs, arrays, (1, 1, k), (0, 9), scaled=1.0)
    if backend.name != "reference":
        ran = [n_ for n_ in exe.plan({}).ran if n_.startswith("qgemv[")]
        assert ran and all(n_.endswith(un) for n_ in ran), ran


@pytest.mark.parametrize("fmt", WIDE_FORMATS[:2] + ([] if for_browser() else
                                                   ["q4_1", "q8_0", "q5_k"]))
@pytest.mark.parametrize("m,variant", [(3, "_8w4"), (8, "_8w4"), (3, "_16w2"), (8, "_32w2")])
def test_wide_gemv_rows_of_a_batch(backend, fmt, m, variant, monkeypatch):
    """The WIDE GEMV variants (UN neighbouring units a thread) on several x rows at once (a
    batched decode: ROWS = 3, or two workgroup rows of 4), fused with the norm and SwiGLU
    and with the residual, against float64 numpy of the dequantized weights."""
    from webrlx.compiler import lower_quant
    from webrlx.runtime import autotune
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(autotune, "PREFER", "*" + variant)
    monkeypatch.setattr(lower_quant, "cpu_adapter", lambda L: False)
    k, ffn = 512, 256

    def weight(n, k, seed):             # random blocks of fmt, and numpy's dequantization
        raw = quant.random_blocks(fmt, n, k, seed=seed, scale=0.01)
        return quant.words(raw), quant.dequantize(raw, fmt, (n, k)).astype(np.float64)

    wg, wgf = weight(ffn, k, 1)
    wu, wuf = weight(ffn, k, 2)
    wd, wdf = weight(k, ffn, 3)
    arrays = {"wg": wg, "wu": wu, "wd": wd, "g1": rand(k, seed=4) + 1.5}
    x = rand(m, k, seed=5)
    g = wr.Graph()
    xs = g.input("x", (m, k))
    p = {n_: g.param(n_, a.shape, a.dtype) for n_, a in arrays.items()}
    h = nn.rms_norm(xs, p["g1"], 1e-5)
    f = nn.qlinear(h, p["wg"], fmt, ffn, k).silu() * nn.qlinear(h, p["wu"], fmt, ffn, k)
    exe = wr.compile(g, outputs=[xs + nn.qlinear(f, p["wd"], fmt, k, ffn)], device=backend)
    exe.set_params(arrays)
    (got,) = exe.run({"x": x})
    h64 = _rms(x, arrays["g1"])
    a, b = h64 @ wgf.T, h64 @ wuf.T
    want = x + (a * 0.5 * (1 + np.tanh(0.5 * a)) * b) @ wdf.T      # silu(a) * b
    np.testing.assert_allclose(got, want, rtol=0, atol=3e-4 * np.abs(want).max())
    if backend.name != "reference":
        ran = [n_ for n_ in exe.plan({}).ran if n_.startswith("qgemv[")]
        assert len(ran) == 2 and all(n_.endswith(variant) for n_ in ran), ran
