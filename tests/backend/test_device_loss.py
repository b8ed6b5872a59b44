"""A lost GPU device raises webrlx.DeviceLostError with its reason; executables built on it say
so when used; webrlx.device() then makes a fresh device on which a new executable works.
Natively and in the browser (the numpy reference has no device to lose). Each test loses a
private device installed as the default, so the session's device survives."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from helpers import run_coroutine

import webrlx as wr
from webrlx.backends import auto


def _private_gpu():
    if sys.platform == "emscripten":
        from webrlx.backends.js_webgpu import create_backend
        return create_backend()
    gpu, why = auto._native_gpu()
    assert gpu is not None, why
    return gpu


@pytest.fixture
def doomed(monkeypatch):
    dev = _private_gpu()
    monkeypatch.setitem(auto._default, "gpu", dev)      # restored after the test
    return dev


def _exe(device=None):
    g = wr.Graph()
    x = g.input("x", (64,))
    w = g.param("w", (64, 8))
    exe = wr.compile(g, outputs=[(x @ w).relu()], device=device)
    exe.set_params({"w": np.linspace(-1, 1, 512, dtype=np.float32).reshape(64, 8)})
    return exe


def _want(exe, xv):
    return np.maximum(xv.astype(np.float64) @ exe._params["w"], 0)


def test_destroy_in_a_stream_of_runs_then_a_fresh_device(doomed):
    exe = _exe()
    assert exe.device is doomed
    for i in range(12):
        xv = np.full(64, i, np.float32)
        if i == 6:
            doomed.destroy()
        if i < 6:
            np.testing.assert_allclose(exe.run({"x": xv})[0], _want(exe, xv), rtol=1e-5)
            continue
        with pytest.raises(wr.DeviceLostError, match=r"was lost \(destroyed.*webrlx\.device\(\)"):
            exe.run({"x": xv})
    with pytest.raises(wr.DeviceLostError):
        run_coroutine(exe.run_async({"x": np.ones(64, np.float32)}))
    fresh = wr.device()
    assert fresh is not doomed and fresh.lost is None
    fresh_exe = _exe()
    xv = np.arange(64, dtype=np.float32)
    np.testing.assert_allclose(fresh_exe.run({"x": xv})[0], _want(fresh_exe, xv), rtol=1e-5)
    with pytest.raises(wr.DeviceLostError):              # the old one stays unusable
        exe.run({"x": xv})
    if sys.platform != "emscripten":
        fresh.destroy()                                 # private to this test


def test_a_device_lost_behind_webrlxs_back_is_reported(doomed):
    exe = _exe(doomed)
    xv = np.ones(64, np.float32)
    exe.run({"x": xv})
    if sys.platform == "emscripten":
        from pyodide.ffi import run_sync
        doomed.js_device.destroy()
        run_sync(doomed.js_device.lost)                 # the browser reports it as an event
    else:
        doomed.device.destroy()                         # wgpu-py only logs it: found by a call
    with pytest.raises(wr.DeviceLostError, match="was lost"):
        exe.run({"x": xv + 1})
    assert doomed.lost is not None and wr.device() is not doomed
