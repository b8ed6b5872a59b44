"""Soak: many runs keep host memory and device buffers flat, and the plan cache stays bounded.

A bounded slice runs by default (and a smaller one in the browser, where each run costs more);
WEBRLX_SOAK=1 runs the full counts: 5,000 GEMV runs, 10,000 runs of a small graph, 2,000
keep_on_device steps and 2,000 varied inputs. RSS is read from /proc (native Linux only); the
device-buffer counts are checked everywhere."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from helpers import rand
from helpers import rss_mb as _rss_mb

import webrlx as wr

FULL = os.environ.get("WEBRLX_SOAK") == "1"
BROWSER = sys.platform == "emscripten"
RSS_SLACK_MB = 20


def _count(full: int, default: int, browser: int) -> int:
    return full if FULL else browser if BROWSER else default


def _live_buffers(device) -> int:
    return device.stats["buffers"] - device.stats["buffers_released"]


def _soak(device, step, runs: int, warmup: int = 50) -> None:
    """Run step(i) `runs` times after a warm-up; host RSS and live device buffers stay flat."""
    for i in range(warmup):
        step(i)
    rss0, live0 = _rss_mb(), _live_buffers(device)
    for i in range(runs):
        step(i)
    rss1 = _rss_mb()
    if rss0 is not None and rss1 is not None:
        assert rss1 - rss0 < RSS_SLACK_MB, f"host RSS grew {rss1 - rss0:.0f} MB over {runs} runs"
    assert _live_buffers(device) == live0


def test_gemv_soak_keeps_memory_flat(backend):
    # lavapipe leaked 512 KB per batch-1 matmul (a uniform loop bound in gemv.wgsl)
    g = wr.Graph()
    x = g.input("x", (1, 384))
    w = g.param("w", (384, 1536))
    exe = wr.compile(g, outputs=[x @ w], device=backend)
    wv = rand(384, 1536, seed=1)
    exe.set_params({"w": wv})
    xs = [rand(1, 384, seed=s) for s in range(2)]
    _soak(backend, lambda i: exe.run({"x": xs[i % 2]}), _count(5000, 800, 40))
    np.testing.assert_allclose(exe.run({"x": xs[1]})[0], xs[1].astype(np.float64) @ wv,
                               rtol=1e-4, atol=1e-5)


def test_small_graph_soak(backend):
    g = wr.Graph()
    x = g.input("x", (4, 16))
    exe = wr.compile(g, outputs=[(x * 2 + 1).softmax(-1).sum(axis=0)], device=backend)
    xs = [rand(4, 16, seed=s) for s in range(3)]
    _soak(backend, lambda i: exe.run({"x": xs[i % 3]}), _count(10_000, 2000, 60))


def test_keep_on_device_soak(backend):
    g = wr.Graph()
    h = g.input("h", (64,))
    exe = wr.compile(g, outputs=[(h * 0.5 + 1.0)], device=backend)
    state = {"h": np.zeros(64, np.float32)}

    def step(_):
        state["h"] = exe.run({"h": state["h"]}, keep_on_device=True)[0]
    _soak(backend, step, _count(2000, 600, 40))
    np.testing.assert_allclose(state["h"].numpy(), np.full(64, 2.0), rtol=1e-6)   # h -> 2


def test_varied_inputs_keep_the_plan_cache_bounded(backend):
    g = wr.Graph()
    x = g.input("x", ("n", 8))
    exe = wr.compile(g, outputs=[(x @ g.constant(np.eye(8, dtype=np.float32))).sum(axis=0)],
                     device=backend, max_plans=4)
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 300, _count(2000, 400, 30))

    def step(i):
        xv = rand(int(sizes[i % len(sizes)]), 8, seed=i % 7)
        np.testing.assert_allclose(exe.run({"x": xv})[0], xv.sum(0), rtol=1e-4, atol=1e-4)
        if hasattr(exe.engine, "plans"):
            assert len(exe.engine.plans) <= 4
    live0 = _live_buffers(backend)
    step(0)
    per_plan = _live_buffers(backend) - live0
    for i in range(1, 20):
        step(i)
    rss0 = _rss_mb()
    for i in range(20, len(sizes)):
        step(i)
    rss1 = _rss_mb()
    if rss0 is not None and rss1 is not None:
        assert rss1 - rss0 < RSS_SLACK_MB, f"host RSS grew {rss1 - rss0:.0f} MB"
    if hasattr(exe.engine, "plans"):       # every plan past 4 was freed: 4 plans' buffers
        assert 0 < per_plan and _live_buffers(backend) - live0 <= 4 * per_plan


def test_evicted_plans_device_tensors_go_stale(backend):
    g = wr.Graph()
    x = g.input("x", ("n",))
    exe = wr.compile(g, outputs=[x + 1], device=backend, max_plans=1)
    kept = exe.run({"x": np.ones(3, np.float32)}, keep_on_device=True)[0]
    exe.run({"x": np.ones(5, np.float32)})           # another binding evicts the first plan
    if hasattr(exe.engine, "plans"):
        with pytest.raises(wr.StaleTensorError):
            kept.numpy()
    np.testing.assert_array_equal(exe.run({"x": np.ones(3, np.float32)})[0], [2, 2, 2])
    with pytest.raises(ValueError, match=r"max_plans must be an int >= 1, got 0"):
        wr.compile(g, outputs=[x + 1], device=backend, max_plans=0)
