"""Deferred submits on the native backend (wgpu_native.DEFER_SUBMITS): runs held back while the
GPU is busy must give exactly what runs submitted at once give, in the same order. lavapipe
runs every submit before the next, so HOLD_ALWAYS holds them all here as a busy GPU would.
Native only (here, not in tests/backend, which also runs in the browser: it submits at once)."""
from __future__ import annotations

import numpy as np
import pytest

import webrlx as wr
from webrlx.backends.base import DeviceLostError


@pytest.fixture(params=["gpu"])
def held(request, monkeypatch):
    """The native device with every submit held until a flush point (or MAX_HELD)."""
    from webrlx.backends import wgpu_native
    monkeypatch.setattr(wgpu_native, "HOLD_ALWAYS", True)
    dev = wr.device(request.param)
    assert dev.name == "wgpu"
    return dev


def _exe(dev, n=64, **kw):
    g = wr.Graph()
    x = g.input("x", (n,))
    return wr.compile(g, outputs=[(x * 2.0 + 1.0).softmax(-1)], device=dev, **kw)


def _want(a):
    e = np.exp(a * 2.0 + 1.0 - (a * 2.0 + 1.0).max())
    return e / e.sum()


def test_held_gpu_runs_feed_each_other_in_order(held):
    """A chain of runs kept on the device, each fed the last one's output: all held until
    the read, then one queue submit, and the value of the whole chain."""
    exe = _exe(held)
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    before = dict(held.stats)
    y = exe.run({"x": a}, keep_on_device=True)[0]
    want = _want(a.astype(np.float64))
    for _ in range(5):
        y = exe.run({"x": y}, keep_on_device=True)[0]
        want = _want(want)
    assert held.stats["submits_held"] - before.get("submits_held", 0) == 6
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-7)
    assert not held._held


def test_a_write_after_held_gpu_runs_does_not_reach_them(held):
    """queue.writeBuffer runs before the next submit: held runs that read the input must be
    submitted before it is overwritten."""
    exe = _exe(held)
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    b = a[::-1].copy()
    ya = exe.run({"x": a}, keep_on_device=True)[0]
    assert held._held                      # held, and its input about to be rewritten
    yb = exe.run({"x": b}, keep_on_device=True)[0]
    np.testing.assert_allclose(ya.numpy(), _want(a.astype(np.float64)), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(yb.numpy(), _want(b.astype(np.float64)), rtol=1e-5, atol=1e-7)


def test_held_gpu_runs_reach_the_queue_every_max_held(held, monkeypatch):
    from webrlx.backends import wgpu_native
    monkeypatch.setattr(wgpu_native, "MAX_HELD", 4)
    exe = _exe(held)
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    exe.run({"x": a}, keep_on_device=True)
    held.flush()
    assert not held._held
    before = held.stats["queue_submits"]
    for _ in range(8):
        exe.run({"x": a}, keep_on_device=True)
    assert held.stats["queue_submits"] - before == 2 and not held._held


def test_a_plan_evicted_with_held_gpu_runs_finishes_them_first(held):
    """Releasing a plan's buffers flushes the runs still holding them."""
    g = wr.Graph()
    x = g.input("x", ("n",))
    exe = wr.compile(g, outputs=[(x * 2.0 + 1.0).softmax(-1)], device=held, max_plans=1)
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    ya = exe.run({"x": a}, keep_on_device=True)[0]
    y = exe.run({"x": np.ones(5, np.float32)})[0]      # evicts the first plan
    np.testing.assert_allclose(y, np.full(5, 0.2), rtol=1e-6)
    with pytest.raises(wr.StaleTensorError):
        ya.numpy()


def test_held_gpu_runs_and_a_lost_device(monkeypatch):
    """Runs held when the device is lost never run; the next read says the device was lost.
    (A private device: the session's survives.)"""
    from webrlx.backends import auto, wgpu_native
    monkeypatch.setattr(wgpu_native, "HOLD_ALWAYS", True)
    dev, why = auto._native_gpu()
    assert dev is not None, why
    exe = _exe(dev)
    y = exe.run({"x": np.zeros(64, np.float32)}, keep_on_device=True)[0]
    assert dev._held
    dev.destroy()
    assert not dev._held
    with pytest.raises(DeviceLostError):
        y.numpy()


def test_held_gpu_runs_go_in_one_submit_with_the_next_read(held):
    """Runs kept on the device are recorded into one encoder (their dispatches into one compute
    pass) and reach the queue in one submit with the run that reads its result."""
    exe = _exe(held)
    a = np.linspace(-2, 2, 64, dtype=np.float32)
    exe.run({"x": a})
    before = held.stats["queue_submits"]
    y = exe.run({"x": a}, keep_on_device=True)[0]
    for _ in range(3):
        y = exe.run({"x": y}, keep_on_device=True)[0]
    assert held._held == 4 and held.stats["queue_submits"] == before
    got = exe.run({"x": y})[0]
    assert held.stats["queue_submits"] == before + 1 and not held._held
    want = _want(a.astype(np.float64))
    for _ in range(4):
        want = _want(want)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_a_gpu_run_of_many_dispatches_is_not_held(held, monkeypatch):
    """A run over HOLD_MAX_DISPATCHES goes to the queue at once, with the runs held before it."""
    from webrlx.backends import wgpu_native
    exe = _exe(held)
    a = np.linspace(-1, 1, 64, dtype=np.float32)
    y = exe.run({"x": a}, keep_on_device=True)[0]
    assert held._held == 1
    monkeypatch.setattr(wgpu_native, "HOLD_MAX_DISPATCHES", 0)
    before = held.stats["queue_submits"]
    y = exe.run({"x": y}, keep_on_device=True)[0]
    assert not held._held and held.stats["queue_submits"] == before + 1
    np.testing.assert_allclose(y.numpy(), _want(_want(a.astype(np.float64))), rtol=1e-5,
                               atol=1e-7)


def test_every_device_can_be_flushed():
    """exe.device.flush() (named in Executable.run's docstring) exists on every device."""
    for name in ("gpu", "reference"):
        wr.device(name).flush()


def test_a_long_run_on_an_idle_gpu_goes_out_in_pieces(monkeypatch):
    """wgpu_native.SUBMIT_FIRST: a run of 40 dispatches that finds the GPU idle is submitted
    as pieces of 4, 8, 16 and 12 dispatches (four command buffers), its result that of one
    command buffer; with SUBMIT_FIRST 0 it is one."""
    from webrlx.backends import wgpu_native
    dev = wr.device("gpu")
    g = wr.Graph()
    x, w = g.input("x", (8, 8)), g.input("w", (8, 8))
    y = x
    for _ in range(20):                    # 20 matmuls and scalings: 40 dispatches
        y = (y @ w) * 0.5
    exe = wr.compile(g, outputs=[y], device=dev)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 8)).astype(np.float32), \
        rng.standard_normal((8, 8)).astype(np.float32)
    want = a.astype(np.float64)
    for _ in range(20):
        want = want @ b * 0.5
    got = {}
    for first in (4, 0):
        monkeypatch.setattr(wgpu_native, "SUBMIT_FIRST", first)
        exe.run({"x": a, "w": b})                      # compile and upload first
        before = dict(dev.stats)
        got[first] = exe.run({"x": a, "w": b})[0]
        n = len(exe.last_plan.dispatches)
        assert n == 40, n
        pieced = dev.stats["submits_pieced"] - before.get("submits_pieced", 0)
        queued = dev.stats["queue_submits"] - before.get("queue_submits", 0)
        assert (pieced, queued) == ((1, 4) if first else (0, 1)), (first, pieced, queued)
    np.testing.assert_allclose(got[4], want, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(got[4], got[0])
