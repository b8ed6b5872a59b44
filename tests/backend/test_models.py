"""Small whole models built with the API agree with a numpy formulation (1e-4 relative)."""
from __future__ import annotations

import numpy as np
from helpers import rand
from test_nn import _conv, _pool

import webrlx as wr


def test_mlp_two_layers(backend):
    g = wr.Graph()
    x = g.input("x", ("batch", 64))
    w1, b1 = g.param("w1", (64, 128)), g.param("b1", (128,))
    w2, b2 = g.param("w2", (128, 10)), g.param("b2", (10,))
    h = wr.nn.linear(x, w1, b1, activation="relu")
    y = wr.nn.linear(h, w2, b2).softmax(-1)
    exe = wr.compile(g, outputs=[y], device=backend)
    p = {"w1": rand(64, 128, seed=1) * 0.3, "b1": rand(128, seed=2),
         "w2": rand(128, 10, seed=3) * 0.3, "b2": rand(10, seed=4)}
    exe.set_params(p)
    xv = rand(5, 64, low=0, high=16)
    (out,) = exe.run({"x": xv})
    q = {k: v.astype(np.float64) for k, v in p.items()}
    logits = np.maximum(xv @ q["w1"] + q["b1"], 0) @ q["w2"] + q["b2"]
    e = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=1e-4, atol=1e-7)


def test_small_cnn(backend):
    g = wr.Graph()
    x = g.input("x", ("batch", 1, 8, 8))
    c1w, c1b = g.param("c1w", (8, 1, 3, 3)), g.param("c1b", (8,))
    c2w, c2b = g.param("c2w", (16, 8, 3, 3)), g.param("c2b", (16,))
    fw, fb = g.param("fw", (64, 10)), g.param("fb", (10,))
    h = wr.nn.max_pool2d(wr.nn.conv2d(x, c1w, c1b, padding=1).relu(), 2)        # (B, 8, 4, 4)
    h = wr.nn.avg_pool2d(wr.nn.conv2d(h, c2w, c2b, padding=1).relu(), 2)        # (B, 16, 2, 2)
    y = wr.nn.linear(h.reshape(-1, 64), fw, fb).log_softmax(-1)
    exe = wr.compile(g, outputs=[y], device=backend)
    p = {"c1w": rand(8, 1, 3, 3, seed=1), "c1b": rand(8, seed=2),
         "c2w": rand(16, 8, 3, 3, seed=3) * 0.5, "c2b": rand(16, seed=4),
         "fw": rand(64, 10, seed=5), "fb": rand(10, seed=6)}
    exe.set_params(p)
    xv = rand(3, 1, 8, 8, low=0, high=1)
    (out,) = exe.run({"x": xv})
    q = {k: v.astype(np.float64) for k, v in p.items()}
    r = _pool(np.maximum(_conv(xv.astype(np.float64), q["c1w"], q["c1b"], padding=1), 0),
              2, 2, 0, "max")
    r = _pool(np.maximum(_conv(r, q["c2w"], q["c2b"], padding=1), 0), 2, 2, 0, "avg")
    logits = r.reshape(-1, 64) @ q["fw"] + q["fb"]
    m = logits.max(-1, keepdims=True)
    want = logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-6)
