"""Executable behaviour: clear errors for bad feeds/params (and usability afterwards),
symbolic dims, upload-only-when-changed, and no device objects created after the first run."""
from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from helpers import rand, run_coroutine

import webrlx as wr


def _mlp_exe(device):
    g = wr.Graph()
    x = g.input("x", ("batch", 8))
    w = g.param("w", (8, 4))
    y = (x @ w).relu().sum(axis=-1)
    exe = wr.compile(g, outputs=[y], device=device)
    return exe, rand(8, 4, seed=3)


def _ref(xv, wv):
    return np.maximum(xv.astype(np.float64) @ wv, 0).sum(-1)


def test_param_never_set(backend):
    exe, wv = _mlp_exe(backend)
    with pytest.raises(wr.InputError, match=r"param 'w' \(\(8, 4\) float32\) was never set"):
        exe.run({"x": rand(2, 8)})
    exe.set_params({"w": wv})
    np.testing.assert_allclose(exe.run({"x": rand(2, 8)})[0], _ref(rand(2, 8), wv), rtol=1e-5)


BAD_FEEDS = [
    ({"y": np.ones((2, 8), np.float32)}, r"unknown input 'y'; inputs are \['x'\]"),
    ({}, r"missing input 'x' \(\(batch, 8\) float32\)"),
    ({"x": np.ones((2, 7), np.float32)}, r"input 'x' must be \(batch, 8\) float32, "
                                         r"got \(2, 7\) float32"),
    ({"x": np.ones((8,), np.float32)}, r"input 'x' must be \(batch, 8\) float32, got \(8,\)"),
    ({"x": np.ones((2, 8), np.int32)}, r"input 'x' must be \(batch, 8\) float32, got \(2, 8\) "
                                       r"int32. Cast it with .astype\(np.float32\)"),
    ({"x": np.ones((2, 8), bool)}, r"input 'x' must be \(batch, 8\) float32, got \(2, 8\) bool"),
    ([np.ones((2, 8))], r"feeds must be a dict"),
    ({"x": [[1.0] * 8, [1.0] * 7]}, r"input 'x' must be \(batch, 8\) float32; it is not a "
                                    r"rectangular array"),
    ({"x": np.full((2, 8), 1e300)}, r"input 'x' has finite float64 values that overflow "
                                    r"float32 \(largest magnitude 1e\+300"),
    ({"x": {"a": 1}}, r"input 'x' must be \(batch, 8\) float32, got a dict numpy cannot"),
]


@pytest.mark.parametrize("feeds,msg", BAD_FEEDS, ids=range(len(BAD_FEEDS)))
def test_bad_feeds_then_usable(backend, feeds, msg):
    exe, wv = _mlp_exe(backend)
    exe.set_params({"w": wv})
    with pytest.raises(wr.InputError, match=msg):
        exe.run(feeds)
    xv = rand(3, 8)
    np.testing.assert_allclose(exe.run({"x": xv})[0], _ref(xv, wv), rtol=1e-5)


def test_float64_inf_passes_and_unused_inputs_need_no_feed(backend):
    g = wr.Graph()
    x = g.input("x", (2, 3))
    g.input("unused", (4,))
    exe = wr.compile(g, outputs=[x * 2], device=backend)
    xv = np.array([[np.inf, -np.inf, 1.0], [2.0, 3.0, -1e30]])     # float64, explicit infs
    np.testing.assert_array_equal(exe.run({"x": xv})[0], (xv * 2).astype(np.float32))
    with pytest.raises(wr.InputError, match=r"input 'unused' must be \(4,\) float32"):
        exe.run({"x": xv, "unused": np.ones(3)})                    # fed: still checked


def test_bad_params(backend):
    exe, wv = _mlp_exe(backend)
    with pytest.raises(wr.InputError, match=r"unknown param 'v'; params are \['w'\]"):
        exe.set_params({"v": wv})
    with pytest.raises(wr.InputError, match=r"param 'w' must be \(8, 4\) float32, got \(4, 8\)"):
        exe.set_params({"w": wv.T})
    exe.set_params({"w": wv})
    xv = rand(2, 8)
    np.testing.assert_allclose(exe.run({"x": xv})[0], _ref(xv, wv), rtol=1e-5)


def test_float64_and_noncontiguous_inputs_are_converted(backend):
    exe, wv = _mlp_exe(backend)
    exe.set_params({"w": wv.astype(np.float64)})
    xv = rand(8, 6).T            # non-contiguous view
    x64 = xv.astype(np.float64)
    want = _ref(xv, wv)
    np.testing.assert_allclose(exe.run({"x": xv})[0], want, rtol=1e-5)
    np.testing.assert_allclose(exe.run({"x": x64})[0], want, rtol=1e-5)


def test_symbolic_dims_bind_per_run(backend):
    exe, wv = _mlp_exe(backend)
    exe.set_params({"w": wv})
    for n in (1, 3, 5, 3, 1):
        xv = rand(n, 8, seed=n)
        (out,) = exe.run({"x": xv})
        assert out.shape == (n,)
        np.testing.assert_allclose(out, _ref(xv, wv), rtol=1e-5)


def test_symbols_must_agree_across_inputs(backend):
    g = wr.Graph()
    a, b = g.input("a", ("n", 2)), g.input("b", ("n", 2))
    exe = wr.compile(g, outputs=[a + b], device=backend)
    with pytest.raises(wr.InputError, match=r"input 'b' has n=3, but an earlier input bound n=2"):
        exe.run({"a": np.ones((2, 2), np.float32), "b": np.ones((3, 2), np.float32)})
    (out,) = exe.run({"a": np.ones((3, 2), np.float32), "b": np.ones((3, 2), np.float32)})
    np.testing.assert_array_equal(out, np.full((3, 2), 2, np.float32))


def test_runs_compile_once_and_create_nothing_after_first_run():
    gpu = wr.device("gpu")
    exe, wv = _mlp_exe(gpu)
    exe.set_params({"w": wv})
    x1, x2 = rand(4, 8, seed=1), rand(4, 8, seed=2)
    exe.run({"x": x1})
    before = dict(gpu.stats)
    for i in range(1000):
        (out,) = exe.run({"x": x1 if i % 2 else x2})
    after = dict(gpu.stats)
    np.testing.assert_allclose(out, _ref(x1, wv), rtol=1e-5)
    for key in ("buffers", "pipelines", "bind_groups"):
        assert after.get(key, 0) == before.get(key, 0), (key, before, after)
    assert after["submits"] - before["submits"] == 1000


def test_unchanged_inputs_are_not_uploaded_again():
    gpu = wr.device("gpu")
    exe, wv = _mlp_exe(gpu)
    exe.set_params({"w": wv})
    xv = rand(2, 8)
    exe.run({"x": xv})
    n = gpu.stats["input_uploads"]
    for _ in range(10):
        exe.run({"x": xv.copy()})
    assert gpu.stats["input_uploads"] == n
    exe.run({"x": xv + 1})
    assert gpu.stats["input_uploads"] == n + 1


def test_an_input_is_uploaded_when_its_bytes_change():
    """-0.0 equals 0.0 but is other bytes: uploaded, and its sign reaches the kernel; a NaN
    fed again is the same bytes: not uploaded again."""
    gpu = wr.device("gpu")
    g = wr.Graph()
    x = g.input("x", (4,))
    exe = wr.compile(g, outputs=[1.0 / x], device=gpu)
    zeros = np.zeros(4, np.float32)
    np.testing.assert_array_equal(exe.run({"x": zeros})[0], np.full(4, np.inf, np.float32))
    n = gpu.stats["input_uploads"]
    np.testing.assert_array_equal(exe.run({"x": -zeros})[0], np.full(4, -np.inf, np.float32))
    assert gpu.stats["input_uploads"] == n + 1
    nan = np.full(4, np.nan, np.float32)
    assert np.isnan(exe.run({"x": nan})[0]).all()
    assert np.isnan(exe.run({"x": nan.copy()})[0]).all()
    assert gpu.stats["input_uploads"] == n + 2


def test_constant_output_and_params_only_graph(backend):
    g = wr.Graph()
    w = g.param("w", (3,))
    c = g.constant(np.arange(3, dtype=np.float32))
    exe = wr.compile(g, outputs=[w * 2 + c, c * c], device=backend)
    exe.set_params({"w": np.ones(3, np.float32)})
    a, b = exe.run({})
    np.testing.assert_array_equal(a, [2, 3, 4])
    np.testing.assert_array_equal(b, [0, 1, 4])


def test_run_async(backend):
    exe, wv = _mlp_exe(backend)
    exe.set_params({"w": wv})
    xv = rand(2, 8)
    (out,) = run_coroutine(exe.run_async({"x": xv}))
    np.testing.assert_allclose(out, _ref(xv, wv), rtol=1e-5)


def test_invalid_kernel_raises_gpu_error():
    gpu = wr.device("gpu")
    with pytest.raises(wr.GPUError, match=r"pipeline 'main' \(a broken kernel\): WGSL "
                                          r"compilation failed"):
        gpu.pipeline("// a broken kernel\n"
                     "@compute @workgroup_size(1) fn main() { let x: u32 = 1.5; }")
    exe, wv = _mlp_exe(gpu)                       # the device is still usable afterwards
    exe.set_params({"w": wv})
    np.testing.assert_allclose(exe.run({"x": rand(2, 8)})[0], _ref(rand(2, 8), wv), rtol=1e-5)


def test_states_persist_across_runs_and_plans(backend):
    """A state (zeros at first) updated in place by scatter_set keeps its value between runs
    and between plans of different bindings; reset_states zeroes it."""
    g = wr.Graph()
    idx = g.input("idx", ("m",), "int32")
    val = g.input("val", ("m",), "int32")
    log = g.state("log", (8,), "int32")
    written = log.scatter_set(idx, val)
    total = written.sum()
    exe = wr.compile(g, outputs=[total], device=backend)
    (t1,) = exe.run({"idx": np.array([1, 9], np.int32), "val": np.array([5, 7], np.int32)})
    (t2,) = exe.run({"idx": np.array([3], np.int32), "val": np.array([2], np.int32)})
    assert int(t1) == 5 and int(t2) == 7
    np.testing.assert_array_equal(exe.read_state("log"), [0, 5, 0, 2, 0, 0, 0, 0])
    exe.reset_states()
    np.testing.assert_array_equal(exe.read_state("log"), np.zeros(8, np.int32))


def test_start_read_returns_the_state_as_it_was_then(backend):
    """start_read copies a state aside at once; runs after it do not show in finish_read's
    value (a decode loop's read-ahead), and each later start_read sees its own moment."""
    g = wr.Graph()
    idx = g.input("idx", (1,), "int32")
    log = g.state("log", (6,), "int32").scatter_set(idx, idx + 1)
    exe = wr.compile(g, outputs=[log.sum()], device=backend, max_plans=2)
    with pytest.raises(wr.InputError, match="unknown state 'nope'"):
        exe.start_read("nope")
    early = exe.start_read("log")                      # no run yet: zeros
    exe.run({"idx": np.array([0], np.int32)}, keep_on_device=True)
    first = exe.start_read("log")
    for i in (2, 4):
        exe.run({"idx": np.array([i], np.int32)}, keep_on_device=True)
    second = exe.start_read("log")
    exe.run({"idx": np.array([5], np.int32)}, keep_on_device=True)
    np.testing.assert_array_equal(exe.finish_read(early), np.zeros(6, np.int32))
    np.testing.assert_array_equal(exe.finish_read(second), [1, 0, 3, 0, 5, 0])
    np.testing.assert_array_equal(exe.read_state("log"), [1, 0, 3, 0, 5, 6])
    third = exe.start_read("log")
    np.testing.assert_array_equal(exe.finish_read(third), [1, 0, 3, 0, 5, 6])
    np.testing.assert_array_equal(exe.finish_read(first), [1, 0, 0, 0, 0, 0])


def test_a_state_update_nobody_reads_still_runs(backend):
    g = wr.Graph()
    x = g.input("x", (2,))
    idx = g.input("idx", (1,), "int32")
    seen = g.state("seen", (4,), "int32")
    seen.scatter_set(idx, idx * 0 + 1)                    # an effect: no output reads it
    exe = wr.compile(g, outputs=[x * 2.0], device=backend)
    exe.run({"x": np.ones(2, np.float32), "idx": np.array([2], np.int32)})
    np.testing.assert_array_equal(exe.read_state("seen"), [0, 0, 1, 0])


def test_an_input_written_in_place_is_uploaded_again(backend):
    """scatter_set on an input writes its device copy: feeding the same array again must not
    reuse those bytes (the upload skip for unchanged feeds must not apply)."""
    g = wr.Graph()
    buf = g.input("buf", (4,), "int32")
    idx = g.input("idx", (1,), "int32")
    out = buf.scatter_set(idx, idx * 0 + 9).sum()
    exe = wr.compile(g, outputs=[out], device=backend)
    zeros = np.zeros(4, np.int32)
    assert int(exe.run({"buf": zeros, "idx": np.array([1], np.int32)})[0]) == 9
    assert int(exe.run({"buf": zeros, "idx": np.array([2], np.int32)})[0]) == 9


def test_validate_starts_from_the_devices_states(backend):
    g = wr.Graph()
    idx = g.input("idx", (1,), "int32")
    log = g.state("log", (4,), "int32").scatter_set(idx, idx + 1)
    exe = wr.compile(g, outputs=[log.sum()], device=backend)
    exe.run({"idx": np.array([0], np.int32)})
    report = exe.validate({"idx": np.array([3], np.int32)})
    assert report.ok, str(report)
    np.testing.assert_array_equal(exe.read_state("log"), [1, 0, 0, 4])


def _thread_workload(exe, seed: int, runs: int, results: list) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(runs):
        x = rng.uniform(-1, 1, (3, 16)).astype(np.float32)
        (got,) = exe.run({"x": x})
        want = np.tanh(x.astype(np.float64) @ np.full((16, 8), 0.25)).sum(-1)
        results.append(bool(np.allclose(got, want, rtol=1e-4, atol=1e-5)))


@pytest.mark.parametrize("shared", [True, False], ids=["one-executable", "one-per-thread"])
def test_threads_share_executables_and_devices(backend, shared):
    """8 threads x 200 runs (one shared executable, or one each on one device): no crash, and
    every result right. Pyodide cannot start threads: there the same runs go one by one."""
    def make():
        g = wr.Graph()
        x = g.input("x", ("n", 16))
        w = g.param("w", (16, 8))
        exe = wr.compile(g, outputs=[(x @ w).tanh().sum(-1)], device=backend)
        exe.set_params({"w": np.full((16, 8), 0.25, np.float32)})
        return exe
    shared_exe = make()
    results: list = []
    runs = 20 if sys.platform == "emscripten" else 200
    jobs = [(shared_exe if shared else make(), seed, runs, results) for seed in range(8)]
    if sys.platform == "emscripten":
        for job in jobs:
            _thread_workload(*job)
    else:
        threads = [threading.Thread(target=_thread_workload, args=job) for job in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(results) == 8 * runs and all(results)


def test_concurrent_run_async_calls_serialize(backend):
    g = wr.Graph()
    x = g.input("x", (4,))
    exe = wr.compile(g, outputs=[x * 3.0], device=backend)

    async def many():
        import asyncio
        feeds = [np.full(4, i, np.float32) for i in range(16)]
        return await asyncio.gather(*(exe.run_async({"x": f}) for f in feeds))
    outs = run_coroutine(many())
    for i, (out,) in enumerate(outs):
        np.testing.assert_array_equal(out, np.full(4, 3.0 * i, np.float32))


def test_outputs_are_writable_and_independent_of_later_runs(backend):
    """run() returns arrays the caller owns: writable, and not overwritten by the next run
    (one output is a view of its own readback copy, several are copied apart)."""
    g = wr.Graph()
    x = g.input("x", (4, 8))
    for outs in ([x * 2.0], [x * 2.0, x.sum()]):
        exe = wr.compile(g, outputs=outs, device=backend)
        a = np.arange(32, dtype=np.float32).reshape(4, 8)
        first = exe.run({"x": a})
        first[0][0, 0] = -1.0
        second = exe.run({"x": a + 1})
        assert first[0][0, 0] == -1.0 and first[0][1, 0] == 16.0
        np.testing.assert_array_equal(second[0], (a + 1) * 2)
