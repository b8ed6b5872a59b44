"""cached_attention's sliding window and score soft-cap (Mistral, Gemma 2/3) and rope's
frequency factors (Llama 3 scaling), on every backend and each attention kernel (forced),
against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import rand

import webrlx as wr
from webrlx import nn


def _attention_np(q, k, v, p0, window, softcap):
    """Dense causal GQA attention with a sliding window (row - key < window) and soft-cap."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    b, s, h, d = q.shape
    g = h // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    sc = np.einsum("bshd,bhkd->bhsk", q, k) / np.sqrt(d)
    if softcap:
        sc = np.tanh(sc / softcap) * softcap
    key, row = np.arange(k.shape[2])[None, :], p0 + np.arange(s)[:, None]
    mask = (key <= row) & ((row - key < window) if window else True)
    sc = np.where(mask, sc, -np.inf)
    e = np.exp(sc - sc.max(-1, keepdims=True))
    return np.einsum("bhsk,bhkd->bshd", e / e.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("kernel", ["decode", "prefill", "flash"])
@pytest.mark.parametrize("window,softcap", [(5, 0.0), (0, 0.5), (37, 0.8), (200, 0.0)])
@pytest.mark.parametrize("s,p0", [(1, 0), (1, 90), (20, 0), (33, 70)])
def test_window_and_softcap(backend, monkeypatch, kernel, window, softcap, s, p0):
    from webrlx.compiler import lower_decoder
    monkeypatch.setattr(lower_decoder, "PREFILL_KERNEL", kernel)
    monkeypatch.setattr(lower_decoder, "cpu_adapter", lambda L: False)   # several key chunks
    h, hkv, d, t = 6, 2, 32, 256
    q = rand(1, s, h, d, seed=s + p0, low=-2, high=2)
    kc, vc = rand(1, hkv, t, d, seed=41, low=-2, high=2), rand(1, hkv, t, d, seed=42)
    kc[:, :, p0 + s:] = 1e30           # past the valid length: never read
    g = wr.Graph()
    qi, ki, vi = g.input("q", q.shape), g.input("k", kc.shape), g.input("v", vc.shape)
    y = nn.cached_attention(qi, ki, vi, g.input("pos", (1,), "int32"), window=window,
                            softcap=softcap)
    (got,) = wr.compile(g, outputs=[y], device=backend).run(
        {"q": q, "k": kc, "v": vc, "pos": np.array([p0], np.int32)})
    want = _attention_np(q, kc[:, :, :p0 + s], vc[:, :, :p0 + s], p0, window, softcap)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


def test_rope_factors_divide_the_frequencies(backend):
    d, p0, s, base = 16, 3000, 5, 500000.0
    factors = tuple(float(f) for f in np.linspace(1.0, 8.0, d // 2))
    x = rand(1, s, 3, d, seed=5)
    g = wr.Graph()
    y = nn.rope(g.input("x", x.shape), g.input("pos", (1,), "int32"), base,
                interleaved=False, factors=factors)
    (got,) = wr.compile(g, outputs=[y], device=backend).run(
        {"x": x, "pos": np.array([p0], np.int32)})
    inv = base ** (-2.0 * np.arange(d // 2) / d) / np.array(factors)
    ang = (p0 + np.arange(s))[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[None, :, None, :], np.sin(ang)[None, :, None, :]
    x1, x2 = x[..., :d // 2].astype(np.float64), x[..., d // 2:].astype(np.float64)
    want = np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
