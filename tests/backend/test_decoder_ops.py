"""Decoder ops on every backend: rope (both layouts, far positions), cache_write (in place on
a state), cached_attention (GQA, causal, valid length from the pos buffer) against numpy, and
prefill + decode steps through one executable equal to one causal attention."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import for_browser, rand

import webrlx as wr
from webrlx import nn


def _rope_np(x: np.ndarray, p0: int, base: float, interleaved: bool) -> np.ndarray:
    x = x.astype(np.float64)
    s, d = x.shape[1], x.shape[3]
    ang = (p0 + np.arange(s))[:, None] * base ** (-2.0 * np.arange(d // 2) / d)[None, :]
    cos, sin = np.cos(ang)[None, :, None, :], np.sin(ang)[None, :, None, :]
    out = np.empty_like(x)
    if interleaved:          # pairs (2i, 2i+1), as llama.cpp
        out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
        out[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
    else:                    # pairs (i, i + D/2), as HF rotate_half
        h = d // 2
        out[..., :h] = x[..., :h] * cos - x[..., h:] * sin
        out[..., h:] = x[..., :h] * sin + x[..., h:] * cos
    return out


def _attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray, p0: int) -> np.ndarray:
    """Dense causal GQA attention: q (B, S, H, D) at positions p0.., k/v (B, Hkv, n, D)."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    b, s, h, d = q.shape
    g = h // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    sc = np.einsum("bshd,bhkd->bhsk", q, k) / np.sqrt(d)
    n = k.shape[2]
    sc = np.where(np.arange(n)[None, :] <= p0 + np.arange(s)[:, None], sc, -np.inf)
    e = np.exp(sc - sc.max(-1, keepdims=True))
    return np.einsum("bhsk,bhkd->bshd", e / e.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("p0", [0, 8000])
@pytest.mark.parametrize("s", [1, 7])
def test_rope(backend, interleaved, p0, s):
    x = rand(2, s, 3, 64, seed=s)
    g = wr.Graph()
    xi, pos = g.input("x", x.shape), g.input("pos", (1,), "int32")
    y = nn.rope(xi, pos, base=100000.0, interleaved=interleaved)
    (got,) = wr.compile(g, outputs=[y], device=backend).run(
        {"x": x, "pos": np.array([p0], np.int32)})
    want = _rope_np(x, p0, 100000.0, interleaved)
    assert np.abs(got - want).max() <= 2e-4 * np.abs(x).max()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)   # f32 angles would miss


def test_rope_positions_come_from_the_buffer(backend):
    """One executable, positions fed at run time (a decode step's graph does not change)."""
    g = wr.Graph()
    xi, pos = g.input("x", (1, 1, 2, 8)), g.input("pos", (1,), "int32")
    exe = wr.compile(g, outputs=[nn.rope(xi, pos, 10000.0)], device=backend)
    x = rand(1, 1, 2, 8)
    for p0 in (0, 3, 4097):
        (got,) = exe.run({"x": x, "pos": np.array([p0], np.int32)})
        np.testing.assert_allclose(got, _rope_np(x, p0, 10000.0, True), rtol=1e-5, atol=1e-6)


def test_cache_write_then_read(backend):
    g = wr.Graph()
    new, pos = g.input("new", (1, "s", 3, 8)), g.input("pos", (1,), "int32")
    cache = g.state("kc", (1, 3, 10, 8))
    written = nn.cache_write(cache, new, pos)
    exe = wr.compile(g, outputs=[written.sum()], device=backend)
    a, b, c = rand(1, 4, 3, 8, seed=1), rand(1, 1, 3, 8, seed=2), rand(1, 3, 3, 8, seed=3)
    exe.run({"new": a, "pos": np.array([0], np.int32)})
    exe.run({"new": b, "pos": np.array([4], np.int32)})
    (total,) = exe.run({"new": c, "pos": np.array([8], np.int32)})   # row 10 is past T: skipped
    want = np.zeros((1, 3, 10, 8), np.float32)
    want[:, :, 0:4] = a.transpose(0, 2, 1, 3)
    want[:, :, 4:5] = b.transpose(0, 2, 1, 3)
    want[:, :, 8:10] = c[:, :2].transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(exe.read_state("kc"), want)
    np.testing.assert_allclose(total, want.sum(), rtol=1e-5, atol=1e-5)


def test_cache_write_returns_the_updated_cache(backend):
    def fn(cache, new, pos):
        return nn.cache_write(cache, new, pos) * 1.0
    g = wr.Graph()
    cache, new, pos = rand(2, 2, 6, 4, seed=4), rand(2, 3, 2, 4, seed=5), np.array([2], np.int32)
    ins = [g.input("c", cache.shape), g.input("n", new.shape), g.input("p", (1,), "int32")]
    (got,) = wr.compile(g, outputs=[fn(*ins)], device=backend).run(
        {"c": cache, "n": new, "p": pos})
    want = cache.copy()
    want[:, :, 2:5] = new.transpose(0, 2, 1, 3)
    np.testing.assert_array_equal(got, want)


CAPACITY = 512


@pytest.fixture(params=["as_device", "as_gpu"])
def chunking(request, monkeypatch):
    """The kernels and key chunks this adapter gets, or those of a discrete GPU (on a CPU
    adapter too): the decode kernel for few rows and many chunks merged by the combine."""
    if request.param == "as_gpu":
        from webrlx.compiler import lower_decoder
        monkeypatch.setattr(lower_decoder, "cpu_adapter", lambda L: False)
    return request.param


def _run_cached_attention(backend, h: int, hkv: int, d: int, s: int, p0: int, seed: int):
    """cached_attention of s query rows at pos p0 over caches of CAPACITY keys (past the valid
    length filled with values that must never be read), checked against numpy; returns the
    executable and its output."""
    q = rand(1, s, h, d, seed=seed)
    kc = rand(1, hkv, CAPACITY, d, seed=p0 + 1, low=-2, high=2)
    vc = rand(1, hkv, CAPACITY, d, seed=p0 + 2)
    kc[:, :, p0 + s:] = 1e30           # past the valid length: never read
    vc[:, :, p0 + s:] = -1e30
    g = wr.Graph()
    qi, ki, vi = g.input("q", q.shape), g.input("k", kc.shape), g.input("v", vc.shape)
    y = nn.cached_attention(qi, ki, vi, g.input("pos", (1,), "int32"))
    exe = wr.compile(g, outputs=[y], device=backend)
    (got,) = exe.run({"q": q, "k": kc, "v": vc, "pos": np.array([p0], np.int32)})
    want = _attention_np(q, kc[:, :, :p0 + s], vc[:, :, :p0 + s], p0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
    return exe, got


@pytest.mark.parametrize("heads", [(9, 3), (4, 4)])
@pytest.mark.parametrize("s,p0", [(1, 0), (1, 5), (1, 300), (16, 0), (16, 40)])
def test_cached_attention(backend, chunking, heads, s, p0):
    h, hkv = heads
    exe, got = _run_cached_attention(backend, h, hkv, 64, s, p0, seed=p0 + s)
    assert got.shape == (1, s, h, 64)
    if backend.name != "reference" and chunking == "as_gpu" and s == 1:
        names = [c.name for c in exe.last_plan.program.calls]
        assert names == ["cached_attention[decode]", "cached_attention[combine]"], names


@pytest.mark.parametrize("d", [256] if for_browser() else [96, 128, 256])
@pytest.mark.parametrize("s,p0", [(1, 300), (5, 70)] if for_browser() else
                         [(1, 0), (1, 300), (5, 70)])
def test_cached_attention_wide_heads(backend, chunking, d, s, p0):
    """Few rows at head dims past 64: Phi-3's 96, Qwen3's 128 and Gemma 2/3's 256 (as_gpu:
    attn_decode with 16 and 8 keys a tile; a CPU adapter: attn_prefill, 2 or 4 threads an
    item), 4 query heads per kv head (more items than a workgroup holds at 256), in one chunk
    or many (as_gpu)."""
    _run_cached_attention(backend, 8, 2, d, s, p0, seed=p0 + d)


def test_cached_attention_head_dim_past_256_names_it(backend):
    """The WGSL kernels stop at head dim 256 and say so; the numpy reference device has no
    such limit and computes it."""
    q, kc, vc = rand(1, 1, 2, 260, seed=1), rand(1, 1, 16, 260, seed=2), rand(1, 1, 16, 260, seed=3)
    g = wr.Graph()
    qi, ki, vi = g.input("q", q.shape), g.input("k", kc.shape), g.input("v", vc.shape)
    y = nn.cached_attention(qi, ki, vi, g.input("pos", (1,), "int32"))
    feeds = {"q": q, "k": kc, "v": vc, "pos": np.array([3], np.int32)}
    if backend.name == "reference":
        (got,) = wr.compile(g, outputs=[y], device=backend).run(feeds)
        np.testing.assert_allclose(got, _attention_np(q, kc[:, :, :4], vc[:, :, :4], 3),
                                   rtol=1e-5, atol=1e-6)
        return
    with pytest.raises(ValueError, match="head dim 260 must be a multiple of 4, <= 256"):
        wr.compile(g, outputs=[y], device=backend).run(feeds)


def test_cached_attention_long_prefill_and_batch(backend, chunking):
    """The many-rows kernel (a 64-row prompt at pos 100) with a batch of 2."""
    h, hkv, d, t, s, p0 = 6, 2, 64, 256, 64, 100
    q = rand(2, s, h, d, seed=11)
    kc, vc = rand(2, hkv, t, d, seed=12), rand(2, hkv, t, d, seed=13)
    g = wr.Graph()
    qi, ki, vi = g.input("q", q.shape), g.input("k", kc.shape), g.input("v", vc.shape)
    y = nn.cached_attention(qi, ki, vi, g.input("pos", (1,), "int32"))
    (got,) = wr.compile(g, outputs=[y], device=backend).run(
        {"q": q, "k": kc, "v": vc, "pos": np.array([p0], np.int32)})
    want = _attention_np(q, kc[:, :, :p0 + s], vc[:, :, :p0 + s], p0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("kernel", ["flash", "prefill"])
@pytest.mark.parametrize("h,hkv,d,s,p0,b", [(9, 3, 64, 40, 0, 1), (6, 2, 32, 33, 70, 2),
                                            (4, 4, 16, 64, 5, 1), (8, 2, 64, 100, 0, 1)],
                         ids=str)
def test_cached_attention_each_prefill_kernel(backend, chunking, monkeypatch, kernel, h, hkv,
                                              d, s, p0, b):
    """Both many-rows kernels (attn_flash: tiles of 32 items x 32 keys, the GPUs' default;
    attn_prefill: threads per item, CPU adapters'), forced, on item counts that end mid-tile,
    head dims under 64, a batch and keys cut into chunks (as_gpu)."""
    from webrlx.compiler import lower_decoder
    monkeypatch.setattr(lower_decoder, "PREFILL_KERNEL", kernel)
    q = rand(b, s, h, d, seed=s + p0)
    _check_forced_kernel(backend, kernel, q, rand(b, hkv, 256, d, seed=31),
                         rand(b, hkv, 256, d, seed=32), p0)


def _check_forced_kernel(backend, kernel: str, q, kc, vc, p0: int) -> None:
    """cached_attention of q over the caches from pos p0 against numpy, on the kernel forced
    (keys past the valid length poisoned: never read)."""
    s = q.shape[1]
    kc[:, :, p0 + s:] = 1e30
    vc[:, :, p0 + s:] = -1e30
    g = wr.Graph()
    qi, ki, vi = g.input("q", q.shape), g.input("k", kc.shape), g.input("v", vc.shape)
    y = nn.cached_attention(qi, ki, vi, g.input("pos", (1,), "int32"))
    exe = wr.compile(g, outputs=[y], device=backend)
    (got,) = exe.run({"q": q, "k": kc, "v": vc, "pos": np.array([p0], np.int32)})
    want = _attention_np(q, kc[:, :, :p0 + s], vc[:, :, :p0 + s], p0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
    if backend.name != "reference":
        assert exe.last_plan.program.calls[0].name == f"cached_attention[{kernel}]"


def _chunking_id(as_gpu: bool) -> str:
    return "as_gpu" if as_gpu else "as_device"


def _force_chunking(monkeypatch, as_gpu: bool) -> None:
    """The chunking fixture's as_gpu, for tests that keep the browser to one of its params."""
    if as_gpu:
        from webrlx.compiler import lower_decoder
        monkeypatch.setattr(lower_decoder, "cpu_adapter", lambda L: False)


@pytest.mark.parametrize("as_gpu", [True] if for_browser() else [False, True], ids=_chunking_id)
@pytest.mark.parametrize("kernel", ["flash", "prefill"])
@pytest.mark.parametrize("d", [128] if for_browser() else [68, 96, 128, 200, 256])
@pytest.mark.parametrize("h,hkv,s,p0,b", [(8, 2, 40, 70, 1)] if for_browser() else
                         [(8, 2, 40, 70, 1), (8, 2, 100, 0, 2), (6, 3, 33, 150, 1)], ids=str)
def test_cached_attention_each_prefill_kernel_wide_heads(backend, monkeypatch, as_gpu, kernel,
                                                         d, h, hkv, s, p0, b):
    """Both many-rows kernels at head dims past 64 (Phi-3's 96, Qwen3's 128, Gemma's 256; 68
    and 200 split unevenly): attn_flash walking the head dim in chunks, attn_prefill with 2 or
    4 threads an item; GQA, causal, item tiles ending mid-tile, a start pos, one key chunk
    (direct) or many (as_gpu), against numpy."""
    from webrlx.compiler import lower_decoder
    monkeypatch.setattr(lower_decoder, "PREFILL_KERNEL", kernel)
    _force_chunking(monkeypatch, as_gpu)
    q = rand(b, s, h, d, seed=s + p0 + d)
    _check_forced_kernel(backend, kernel, q, rand(b, hkv, 256, d, seed=33, low=-2, high=2),
                         rand(b, hkv, 256, d, seed=34), p0)


# workgroup bytes an adapter allows -> the kernel a 128-wide prompt gets (CPU adapter, GPU):
# attn_prefill needs 22020 bytes at D 128, attn_flash 29828
WIDE_PICKS = {16384: ("decode", "decode"), 24576: ("prefill", "prefill"),
              32768: ("prefill", "prefill")}   # attn_flash only up to D 64 (FLASH_MAX_D)


@pytest.mark.parametrize("as_gpu", [False, True], ids=_chunking_id)
@pytest.mark.parametrize("storage", list(WIDE_PICKS))
def test_cached_attention_wide_prompt_takes_a_prefill_kernel(monkeypatch, as_gpu, storage):
    """A prompt at head dim 128 (16 rows x 4 query heads a kv head) runs through a prefill
    kernel, not attn_decode, where the adapter's workgroup memory holds it: attn_prefill (on
    GPUs too: attn_flash is slower past head dim 64, lower_decoder.FLASH_MAX_D). Lowered for
    an adapter of each limit (no device: each kernel's numbers are checked above)."""
    from webrlx.compiler import lower_decoder
    from webrlx.compiler.lower import lower
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(lower_decoder, "cpu_adapter", lambda L: not as_gpu)
    g = wr.Graph()
    q = g.input("q", (1, 16, 8, 128))
    kc, vc = g.input("k", (1, 2, CAPACITY, 128)), g.input("v", (1, 2, CAPACITY, 128))
    y = nn.cached_attention(q, kc, vc, g.input("pos", (1,), "int32"))
    info = DeviceInfo("an adapter", "wgpu (Vulkan)",
                      {"max-compute-workgroup-storage-size": storage})
    want = WIDE_PICKS[storage][as_gpu]
    assert lower(g, [y.id], {}, info).calls[0].name == f"cached_attention[{want}]"


def test_decode_steps_equal_one_prefill(backend, chunking):
    """One graph with a symbolic seq: prefill 8 rows at pos 0 (writing the caches, states),
    then 3 one-row steps at pos 8, 9, 10 through the same executable: together they equal one
    causal attention over the 11 rows."""
    h, hkv, d, t = 9, 3, 64, 256      # as_gpu: 4 key chunks
    g = wr.Graph()
    q = g.input("q", (1, "s", h, d))
    k = g.input("k", (1, "s", hkv, d))
    v = g.input("v", (1, "s", hkv, d))
    pos = g.input("pos", (1,), "int32")
    kc = nn.cache_write(g.state("kc", (1, hkv, t, d)), k, pos)
    vc = nn.cache_write(g.state("vc", (1, hkv, t, d)), v, pos)
    y = nn.cached_attention(q, kc, vc, pos)
    exe = wr.compile(g, outputs=[y], device=backend)
    qs, ks, vs = rand(1, 11, h, d, seed=21), rand(1, 11, hkv, d, seed=22), \
        rand(1, 11, hkv, d, seed=23)
    outs = [exe.run({"q": qs[:, :8], "k": ks[:, :8], "v": vs[:, :8],
                     "pos": np.array([0], np.int32)})[0]]
    for p0 in (8, 9, 10):
        sl = slice(p0, p0 + 1)
        outs += [exe.run({"q": qs[:, sl], "k": ks[:, sl], "v": vs[:, sl],
                          "pos": np.array([p0], np.int32)})[0]]
    got = np.concatenate(outs, axis=1)
    want = _attention_np(qs, ks.transpose(0, 2, 1, 3), vs.transpose(0, 2, 1, 3), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
    np.testing.assert_array_equal(exe.read_state("kc")[:, :, :11], ks.transpose(0, 2, 1, 3))


def test_decoder_ops_check_their_operands():
    g = wr.Graph()
    pos = g.input("pos", (1,), "int32")
    with pytest.raises(wr.ShapeError, match="even"):
        nn.rope(g.input("x", (1, 2, 3, 5)), pos, 10000.0)
    with pytest.raises(wr.ShapeError, match="multiple of kv_heads"):
        nn.cached_attention(g.input("q", (1, 1, 4, 8)), g.input("k", (1, 3, 16, 8)),
                            g.input("v", (1, 3, 16, 8)), pos)
    with pytest.raises(wr.ShapeError, match="pos must be int32"):
        nn.cache_write(g.input("c", (1, 2, 16, 8)), g.input("n", (1, 1, 2, 8)),
                       g.input("p2", (2,), "int32"))
