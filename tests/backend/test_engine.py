"""Batched decoding on every backend: rope / cache_write / cached_attention with per-row
positions and KV slots (pos (2, B)) against numpy, and webrlx.models.engine.Engine on a small
llama fixture: each sequence of a batch gives the tokens it gives alone (and transformers'
where the fixture has them), sequences joining and leaving mid-run disturb no other, and over
max_context / max_sequences raise clear errors with the engine still usable."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import rand
from test_decoder_ops import _attention_np, _rope_np

import webrlx as wr
from webrlx import nn
from webrlx.compiler import lower_decoder


@pytest.mark.parametrize("kernel", ["decode", "prefill", "flash"])
@pytest.mark.parametrize("s", [1, 3])
def test_cached_attention_per_row_slots(backend, monkeypatch, kernel, s):
    """Rows b of a batch write and read KV slot slots[b] of a pool, each at its own position."""
    monkeypatch.setattr(lower_decoder, "PREFILL_KERNEL", kernel)
    slots_n, hkv, t, d, h = 4, 2, 64, 32, 4
    positions, slots = np.array([5, 0, 40], np.int32), np.array([2, 0, 3], np.int32)
    b = len(slots)
    pool_k = pool_v = np.zeros((slots_n, hkv, t, d), np.float32)     # states start zeroed
    q, k, v = rand(b, s, h, d, seed=3), rand(b, s, hkv, d, seed=4), rand(b, s, hkv, d, seed=5)
    g = wr.Graph()
    kv = g.input("kv", (2, b), "int32")
    kc = nn.cache_write(g.state("kc", pool_k.shape), g.input("k", k.shape), kv)
    vc = nn.cache_write(g.state("vc", pool_v.shape), g.input("v", v.shape), kv)
    qr = nn.rope(g.input("q", q.shape), kv, base=10000.0, interleaved=True)
    out = nn.cached_attention(qr, kc, vc, kv, 1.0 / np.sqrt(d))
    exe = wr.compile(g, outputs=[out, qr], device=backend)
    got, got_q = exe.run({"kv": np.stack([positions, slots]), "q": q, "k": k, "v": v})
    want_k, want_v = np.zeros_like(pool_k), np.zeros_like(pool_v)
    for i in range(b):
        want_k[slots[i], :, positions[i]:positions[i] + s] = k[i].transpose(1, 0, 2)
        want_v[slots[i], :, positions[i]:positions[i] + s] = v[i].transpose(1, 0, 2)
    np.testing.assert_array_equal(exe.read_state("kc"), want_k)
    np.testing.assert_array_equal(exe.read_state("vc"), want_v)
    for i in range(b):
        p0, sl = int(positions[i]), int(slots[i])
        want_q = _rope_np(q[i:i + 1], p0, 10000.0, True)
        np.testing.assert_allclose(got_q[i:i + 1], want_q, rtol=1e-4, atol=1e-4)
        n = p0 + s
        want = _attention_np(want_q, want_k[sl:sl + 1, :, :n], want_v[sl:sl + 1, :, :n], p0)
        np.testing.assert_allclose(got[i:i + 1], want, rtol=1e-4, atol=1e-4)


def test_pos_shape_error():
    g = wr.Graph()
    q = g.input("q", (3, 1, 4, 32))
    pool = g.state("kc", (4, 2, 64, 32))
    with pytest.raises(ValueError, match=r"pos must be int32 \(1,\).*\(2, 3\)"):
        nn.cached_attention(q, pool, pool, g.input("kv", (2, 2), "int32"), 0.1)
