"""Outputs kept on the device and fed back as inputs (the KV-cache path): same values as the
numpy loop, no readback, no new device objects per step, stale handles refused."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import rand, run_coroutine

import webrlx as wr


def _step(device):
    g = wr.Graph()
    state = g.input("state", (4, 8))
    x = g.input("x", (4, 8))
    new = state * 0.5 + x.tanh()
    exe = wr.compile(g, outputs=[new, new.sum(axis=-1)], device=device)
    return exe


def test_feedback_loop_matches_numpy(backend):
    exe = _step(backend)
    xs = [rand(4, 8, seed=i) for i in range(6)]
    state, want = np.zeros((4, 8), np.float32), np.zeros((4, 8))
    for x in xs:
        state, total = exe.run({"state": state, "x": x}, keep_on_device=True)
        want = want * 0.5 + np.tanh(x.astype(np.float64))
    assert isinstance(state, wr.DeviceTensor) and state.shape == (4, 8)
    np.testing.assert_allclose(state.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total.numpy(), want.sum(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run_coroutine(state.numpy_async()), want, rtol=1e-5, atol=1e-6)


def test_kept_outputs_equal_read_outputs(backend):
    exe = _step(backend)
    feeds = {"state": rand(4, 8), "x": rand(4, 8, seed=1)}
    a, b = exe.run(feeds, keep_on_device=True)
    c, d = exe.run(feeds)
    np.testing.assert_array_equal(a.numpy(), c)
    np.testing.assert_array_equal(b.numpy(), d)


def test_stale_handle_is_refused(backend):
    exe = _step(backend)
    feeds = {"state": rand(4, 8), "x": rand(4, 8, seed=1)}
    first, _ = exe.run(feeds, keep_on_device=True)
    exe.run(feeds, keep_on_device=True)
    first.numpy()                                   # one more run: still valid
    exe.run(feeds, keep_on_device=True)
    if backend.info.backend != "reference":         # numpy values never go stale
        with pytest.raises(wr.StaleTensorError, match="reused this output's memory"):
            first.numpy()
        with pytest.raises(wr.StaleTensorError):
            exe.run({"state": first, "x": feeds["x"]})


def test_device_tensor_shape_is_checked(backend):
    exe = _step(backend)
    _, total = exe.run({"state": rand(4, 8), "x": rand(4, 8)}, keep_on_device=True)
    with pytest.raises(wr.InputError, match=r"input 'state' must be \(4, 8\) float32, got a "
                                            r"DeviceTensor \(4,\) float32"):
        exe.run({"state": total, "x": rand(4, 8)})


def test_feedback_creates_nothing_per_step():
    gpu = wr.device("gpu")
    exe = _step(gpu)
    state, _ = exe.run({"state": np.zeros((4, 8), np.float32), "x": rand(4, 8)},
                       keep_on_device=True)
    state, _ = exe.run({"state": state, "x": rand(4, 8)}, keep_on_device=True)
    before = dict(gpu.stats)
    for _ in range(100):
        state, _ = exe.run({"state": state, "x": rand(4, 8)}, keep_on_device=True)
    after = dict(gpu.stats)
    for key in ("buffers", "pipelines", "bind_groups"):
        assert after.get(key, 0) == before.get(key, 0), key
    assert after["submits"] - before["submits"] == 100
