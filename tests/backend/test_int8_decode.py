"""The int8 decode GEMVs (opt-in compiler.int8_decode.INT8_DECODE: quant/qx8.wgsl, then
quant/qgemv_i8.wgsl and quant/qgemv_i8_qkv.wgsl) on every backend: a Llama MLP and head of a
batched decode step (RMSNorm prologue, SwiGLU, residual, plain head) and a layer's q / k / v
with rope and KV-cache writes, over Q4_K, Q6_K, Q4_1 and Q8_0 weights, checked against numpy's
emulation of the same int8 rule (quant.int8_decode_reference at each GEMV) and against the
float answer. The reference backend keeps its float rules (no int8 there)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import for_browser
from test_quant_formats import oracle, run_with_names

from webrlx import nn, quant
from webrlx.compiler import int8_decode
from webrlx.runtime import autotune

HID, FFN, VOCAB = 512, 768, 200
# Each variant is a compile of its own under SwiftShader (~8 s in the browser): there, one of
# each form (one or two rows a thread, with and without the tree) stands for the rest
VARIANTS = [v for v in int8_decode.GEMV_VARIANTS
            if not for_browser() or v in ((8, 1, False), (16, 2, False), (64, 1, True),
                                          (128, 2, True))]


def _qweight(fmt: str, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random fmt blocks (scales of ~1e-4: products of order 1) as words, and in float64."""
    raw = quant.random_blocks(fmt, n, k, seed=seed, scale=1e-4)
    return quant.words(raw), oracle(raw, fmt, n, k)


def _mlp_and_head(fmt: str, fmt_head: str):
    def fn(x, wg, wu, wd, wh, g1, g2):
        h = nn.rms_norm(x, g1, 1e-5)
        f = nn.qlinear(h, wg, fmt, FFN, HID).silu() * nn.qlinear(h, wu, fmt, FFN, HID)
        y = x + nn.qlinear(f, wd, fmt, HID, FFN)
        logits = nn.qlinear(nn.rms_norm(y, g2, 1e-5), wh, fmt_head, VOCAB, HID)
        return y, logits, f * 1.0
    return fn


def _rms(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g


def _silu(v: np.ndarray) -> np.ndarray:
    return v / (1 + np.exp(-v))


def _reference(x, wf, g1, g2, int8: bool):
    """The step in float64, each GEMV's x rounded to int8 first where int8."""
    def mm(a, w):
        return quant.int8_decode_reference(a.astype(np.float32), w) if int8 else \
            a.astype(np.float64) @ w.T
    h = _rms(x, g1)
    f = _silu(mm(h, wf["wg"])) * mm(h, wf["wu"])
    y = x + mm(f, wf["wd"])
    return y, mm(_rms(y, g2), wf["wh"]), f


@pytest.mark.parametrize("m", [2, 15] if for_browser() else [2, 8, 15])
@pytest.mark.parametrize("fmt,fmt_head", [("q4_k", "q6_k"), ("q6_k", "q4_k"), ("q4_1", "q8_0"),
                                          ("q8_0", "q4_1")])
def test_int8_decode_mlp_and_head(backend, m, fmt, fmt_head, monkeypatch):
    _mlp_and_head_checked(backend, m, fmt, fmt_head, monkeypatch)


def _mlp_and_head_checked(backend, m: int, fmt: str, fmt_head: str, monkeypatch) -> list[str]:
    """m decode rows through norm + gate/up (SwiGLU) + down (+ residual) + norm + head:
    within 2e-3 x max|ref| of the int8 rule's float64 answer (a value at a rounding tie may
    land one int8 step away: ~1e-3 of that product; a misplaced piece or scale is off by
    O(1)), within 5e-2 x max|ref| of the float answer, and the int8 kernels ran; the
    reference backend within 1e-4 of the float answer. The SwiGLU product is kept as an
    output too (f), read back as f32."""
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(int8_decode, "INT8_DECODE", True)
    monkeypatch.setattr(int8_decode, "MIN_WEIGHTS", 0)       # (these weights are small)
    shapes = {"wg": (fmt, FFN, HID), "wu": (fmt, FFN, HID), "wd": (fmt, HID, FFN),
              "wh": (fmt_head, VOCAB, HID)}
    params, wf = {}, {}
    for i, (name, (f, n, k)) in enumerate(shapes.items()):
        params[name], wf[name] = _qweight(f, n, k, seed=i + 1)
    rng = np.random.default_rng(m)
    g1 = (1 + 0.1 * rng.standard_normal(HID)).astype(np.float32)
    g2 = (1 + 0.1 * rng.standard_normal(HID)).astype(np.float32)
    x = rng.standard_normal((m, HID)).astype(np.float32)
    outs, ran = run_with_names(backend, _mlp_and_head(fmt, fmt_head), x,
                               {**params, "g1": g1, "g2": g2})
    exact = _reference(x, wf, g1, g2, int8=False)[:len(outs)]
    if backend.name == "reference":
        for got, want in zip(outs, exact, strict=True):
            assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
        return []
    rule = _reference(x, wf, g1, g2, int8=True)[:len(outs)]
    for got, want, f32 in zip(outs, rule, exact, strict=True):
        scale = np.abs(want).max()
        assert np.abs(got - want).max() <= 2e-3 * scale, (m, fmt)
        assert np.abs(got - f32).max() <= 5e-2 * scale, (m, fmt)
    i8 = [r for r in ran if r.startswith("qgemv_i8")]
    assert len(i8) == 3 and sum(r.startswith("qx8") for r in ran) == 3, ran
    assert any("swiglu" in r for r in i8) and any("[res]" in r for r in i8), ran
    return i8


@pytest.mark.parametrize("m,asked,small", [(8, False, True), (1, True, True), (8, True, False)])
def test_int8_decode_only_when_asked_batched_and_big(backend, m, asked, small, monkeypatch):
    """Without INT8_DECODE, at one row, or for a weight under MIN_WEIGHTS (64 x 512 here
    against the default 4M) the f32 GEMVs run (1e-4 of the float answer)."""
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(int8_decode, "INT8_DECODE", asked)
    if small:
        monkeypatch.setattr(int8_decode, "MIN_WEIGHTS", 0)
    w, wf = _qweight("q4_k", 64, 512, 1)
    x = np.random.default_rng(0).standard_normal((m, 512)).astype(np.float32)
    (got,), ran = run_with_names(backend, lambda x, w: nn.qlinear(x, w, "q4_k", 64, 512),
                                 x, {"w": w})
    want = x.astype(np.float64) @ wf.T
    assert not any("qgemv_i8" in r or r.startswith("qx8") for r in ran), ran
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()


def test_int8_decode_asked_by_one_compile(backend, monkeypatch):
    """compile(int8="decode") (compiler/int8_scope.py) without the module flag: that
    executable runs the int8 GEMVs (the int8 rule's answer, 2e-3), while the same graph
    compiled without it in the same process keeps the f32 GEMVs (1e-4 of the float answer).
    The reference device has no int8 path: both stay float there."""
    import webrlx as wr
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(int8_decode, "MIN_WEIGHTS", 0)
    assert int8_decode.INT8_DECODE is False
    w, wf = _qweight("q4_k", 256, 512, 1)
    x = np.random.default_rng(3).standard_normal((8, 512)).astype(np.float32)
    g = wr.Graph()
    y = nn.qlinear(g.input("x", x.shape, x.dtype), g.param("w", w.shape, w.dtype), "q4_k",
                   256, 512)
    runs = {}
    for int8 in ("decode", None):
        exe = wr.compile(g, outputs=[y], device=backend, int8=int8)
        exe.set_params({"w": w})
        runs[int8] = (exe.run({"x": x})[0],
                      [] if backend.name == "reference" else exe.plan({}).ran)
    exact = x.astype(np.float64) @ wf.T
    scale = np.abs(exact).max()
    (i8, ran8), (f32, ran32) = runs["decode"], runs[None]
    assert not any("qgemv_i8" in r or r.startswith("qx8") for r in ran32), ran32
    assert np.abs(f32 - exact).max() <= 1e-4 * scale
    if backend.name == "reference":
        assert np.abs(i8 - exact).max() <= 1e-4 * scale
        return
    rule = quant.int8_decode_reference(x, wf)
    assert any(r.startswith("qgemv_i8") for r in ran8) and "qx8" in " ".join(ran8), ran8
    assert np.abs(i8 - rule).max() <= 2e-3 * scale
    assert np.abs(i8 - exact).max() > 1e-5 * scale      # (it did round x)


@pytest.mark.parametrize("bad", ["fast", ["decode", "int4"], 8])
def test_int8_argument_checked(bad):
    """A bad int8= names the argument and the kinds, at compile() and at llm.load() (before
    the file is read: the path here does not exist)."""
    import webrlx as wr
    from webrlx.models import llm
    g = wr.Graph()
    y = g.input("x", (2, 4), np.float32) * 2.0
    with pytest.raises(ValueError, match=r"compile\(\): int8 must be .*'decode', 'prefill'"):
        wr.compile(g, outputs=[y], int8=bad)
    assert wr.compile(g, outputs=[y], int8="all").int8 == {"decode", "prefill"}
    with pytest.raises(ValueError, match=r"load\(\): int8 must be"):
        llm.load("/nonexistent/model.gguf", int8=bad)


def _suffix(tpr: int, rpt: int, tree: bool) -> str:
    return f"_{tpr}" + ("x2" if rpt == 2 else "") + ("t" if tree else "")


@pytest.mark.parametrize("tpr,rpt,tree", VARIANTS)
def test_int8_decode_each_gemv_variant(backend, tpr, rpt, tree, monkeypatch):
    """Each quant/qgemv_i8.wgsl variant (threads a weight row, weight rows a thread, tree
    reduction: int8_decode.GEMV_VARIANTS) forced (autotune.PREFER) on the 8-row MLP and head:
    within 2e-3 x max|ref| of the int8 rule, and it ran."""
    from webrlx.compiler import lower_int8_decode
    if backend.name == "reference":
        return                          # (no kernels: the tests above cover its rules)
    suffix = _suffix(tpr, rpt, tree)
    monkeypatch.setattr(autotune, "PREFER", "*" + suffix)
    monkeypatch.setattr(lower_int8_decode, "software", lambda L: False)
    ran = _mlp_and_head_checked(backend, 8, "q4_k", "q6_k", monkeypatch)
    ran += _mlp_and_head_checked(backend, 15, "q4_1", "q8_0", monkeypatch)
    assert len(ran) == 6 and all(n_.endswith(suffix) for n_ in ran), ran


@pytest.mark.parametrize("tpr,rpt,tree", VARIANTS)
def test_int8_decode_qkv_each_variant(backend, tpr, rpt, tree, monkeypatch):
    """Each variant of the q / k / v kernel (int8_decode.GEMV_VARIANTS) forced: rope and both
    caches within 2e-3 x max|ref| of the int8 rule, and it ran."""
    from webrlx.compiler import lower_int8_decode
    if backend.name == "reference":
        return
    suffix = _suffix(tpr, rpt, tree)
    monkeypatch.setattr(autotune, "PREFER", "*" + suffix)
    monkeypatch.setattr(lower_int8_decode, "software", lambda L: False)
    ran = [n_ for n_ in _qkv_checked(backend, ("q4_1", "q8_0", "q4_1"), monkeypatch)
           if n_.startswith("qgemv_i8")]
    assert len(ran) == 1 and ran[0].endswith(suffix), ran


def test_quantize_x8_rule():
    """The numpy rule: 32-value blocks, |q| <= 127, scale amax / 127, zeros stay zero."""
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    x[1, 32:] = 0
    q, s = quant.quantize_x8(x)
    assert q.shape == (3, 64) and s.shape == (3, 2)
    assert np.abs(q).max() == 127 and not q[1, 32:].any() and s[1, 1] == 0
    np.testing.assert_allclose(q * np.repeat(s, 32, axis=1), x, atol=s.max() / 2 + 1e-7)


@pytest.mark.parametrize("formats", [("q4_k", "q4_k", "q6_k"), ("q6_k", "q6_k", "q4_k"),
                                     ("q4_1", "q8_0", "q4_1")], ids=str)
def test_int8_decode_qkv_rope_and_caches(backend, formats, monkeypatch):
    _qkv_checked(backend, formats, monkeypatch)


def _qkv_checked(backend, formats: tuple[str, str, str], monkeypatch) -> list[str]:
    """A batched step's q / k / v (8 rows, pos (2, B) = [positions; KV slots], one row past
    the cache's end) on int8 x: where q, k and v run as one dispatch (10 storage bindings),
    quant/qgemv_i8_qkv.wgsl ropes q and k and writes k and v into each row's slot; q and both
    caches match the reference's rope and cache_write ops applied to the int8-rounded normed
    x (1e-3 x max|ref|: a rounding tie moves one int8 step) at two steps."""
    from helpers import qkv_into_caches, rand

    import webrlx as wr
    from webrlx.backends.reference import ReferenceDevice
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(int8_decode, "INT8_DECODE", True)
    monkeypatch.setattr(int8_decode, "MIN_WEIGHTS", 0)       # (these weights are small)
    b, k, hd, heads, kv, cap, slots = 8, 256, 16, 4, 2, 24, 10
    arrays = {"wq": _qweight(formats[0], heads * hd, k, 2)[0],
              "wk": _qweight(formats[1], kv * hd, k, 3)[0],
              "wv": _qweight(formats[2], kv * hd, k, 4)[0], "g": rand(k, seed=5) + 1.5}

    def layer(normed: bool):
        g = wr.Graph()
        x = g.input("x", (b, 1, k))
        pos = g.input("kv", (2, b), "int32")
        p = {n_: g.param(n_, a.shape, a.dtype) for n_, a in arrays.items()}
        h = nn.rms_norm(x, p["g"], 1e-5) if normed else x
        q, kc, vc = qkv_into_caches(g, h, p, formats, k, heads, kv, hd, cap, pos, slots,
                                    base=500000.0)
        return g, [q * 1.0, kc * 1.0, vc * 1.0]
    g, outs = layer(True)
    exe = wr.compile(g, outputs=outs, device=backend)
    ran_i8 = backend.name != "reference" and \
        backend.info.limit("max-storage-buffers-per-shader-stage", 8) >= 10
    g2, outs2 = layer(not ran_i8)            # the reference: on the int8-rounded normed x
    ref = wr.compile(g2, outputs=outs2, device=ReferenceDevice())
    for e in (exe, ref):
        e.set_params(arrays)
    rng = np.random.default_rng(7)
    for step in range(2):
        rows = np.array([rng.permutation(slots)[:b], rng.integers(0, cap, b)])
        rows[1, 0] = cap                                      # past the end: skipped
        kvp = np.stack([rows[1], rows[0]]).astype(np.int32)
        x = rand(b, 1, k, seed=step)
        xr = x
        if ran_i8:
            xr = quant.x8_values(_rms(x.reshape(b, k), arrays["g"]).astype(np.float32)
                                 ).astype(np.float32).reshape(b, 1, k)
        for got, want in zip(exe.run({"x": x, "kv": kvp}), ref.run({"x": xr, "kv": kvp}),
                             strict=True):
            np.testing.assert_allclose(got, want, rtol=0,
                                       atol=1e-3 * float(np.abs(want).max()))
    if ran_i8:
        names = [c.name for c in exe.plan({}).program.calls]
        assert "qx8[rms_norm]" in names, names
        assert any(n_.startswith("qgemv_i8[q+k+v]_") for n_ in names), names
        return list(exe.plan({}).ran)
    return []


def test_int8_decode_attention_output_into_o_projection(backend, monkeypatch):
    """A batched step's attention (8 rows, each at its own position and KV slot, keys split
    into chunks) -> reshape -> o-projection (+ residual) on int8 x: the chunks' merge
    (decoder/attn_combine.wgsl, QOUT) writes the projection's int8 x itself, so no qx8 runs;
    after 24 steps the result matches numpy's int8 rule on the reference backend's attention
    (2e-3 x max|ref|)."""
    import webrlx as wr
    from webrlx.backends.reference import ReferenceDevice
    from webrlx.compiler import lower_decoder
    monkeypatch.setattr(autotune, "TIME_VARIANTS", False)
    monkeypatch.setattr(int8_decode, "INT8_DECODE", True)
    monkeypatch.setattr(int8_decode, "MIN_WEIGHTS", 0)
    monkeypatch.setattr(lower_decoder, "PREFILL_KERNEL", "decode")
    monkeypatch.setattr(lower_decoder, "CPU_WORKGROUP_TARGET", 1 << 12)   # key chunks here too
    b, h, hkv, d, t, slots, n = 8, 4, 2, 64, 256, 8, 192
    rng = np.random.default_rng(3)
    w, wf = _qweight("q4_k", n, h * d, 6)

    def graph(project: bool):
        g = wr.Graph()
        kv = g.input("kv", (2, b), "int32")
        kc = nn.cache_write(g.state("kc", (slots, hkv, t, d)), g.input("k", (b, 1, hkv, d)), kv)
        vc = nn.cache_write(g.state("vc", (slots, hkv, t, d)), g.input("v", (b, 1, hkv, d)), kv)
        att = nn.cached_attention(g.input("q", (b, 1, h, d)), kc, vc, kv, 1.0 / np.sqrt(d))
        if not project:
            return wr.compile(g, outputs=[att], device=ReferenceDevice())
        y = g.input("r", (b, 1, n)) + nn.qlinear(att.reshape(b, 1, h * d),
                                                 g.param("w", w.shape, w.dtype), "q4_k", n,
                                                 h * d)
        exe = wr.compile(g, outputs=[y], device=backend)
        exe.set_params({"w": w})
        return exe
    exe, ref = graph(True), graph(False)
    start, order = rng.integers(0, 100, b), rng.permutation(slots)
    for step in range(24):
        feeds = {"kv": np.stack([start + step, order]).astype(np.int32),
                 **{name: rng.standard_normal(shape).astype(np.float32) for name, shape in
                    (("k", (b, 1, hkv, d)), ("v", (b, 1, hkv, d)), ("q", (b, 1, h, d)),
                     ("r", (b, 1, n)))}}
        (got,) = exe.run(feeds)
        (att,) = ref.run({key: feeds[key] for key in ("kv", "k", "v", "q")})
    x = att.reshape(b, h * d)
    res = feeds["r"].reshape(b, n)
    if backend.name == "reference":
        want = res + x.astype(np.float64) @ wf.T
        assert np.abs(got.reshape(b, n) - want).max() <= 1e-4 * np.abs(want).max()
        return
    want = res + quant.int8_decode_reference(x, wf)
    assert np.abs(got.reshape(b, n) - want).max() <= 2e-3 * np.abs(want).max()
    names = [c.name for c in exe.plan({}).program.calls]
    assert "cached_attention[combine+q8]" in names and not any(
        n_.startswith("qx8") for n_ in names), names
