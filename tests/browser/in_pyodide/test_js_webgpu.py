"""Browser-only checks of the js_webgpu backend; they run inside Pyodide (see ../conftest.py).

Natively this module only imports (for collecting node ids); the fixtures need `js`.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from webrlx.backends import js_webgpu
from webrlx.backends.base import Copy, DeviceLostError, Dispatch

ADD = """
// out = a + b * SCALE; bindings: a, b (read), out (read_write); grid: ceil(n / 64)
override SCALE: f32 = 1.0;
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&out)) { out[id.x] = a[id.x] + b[id.x] * SCALE; }
}
"""


class AddKernel:
    """Buffers, pipeline and bind group of ADD, built once; `run` = write, submit, read."""

    def __init__(self, backend: Any, n: int, scale: float = 1.0) -> None:
        self.backend, self.n = backend, n
        self.a, self.b, self.out = (backend.create_buffer(4 * n, "storage") for _ in range(3))
        self.staging = backend.create_buffer(4 * n, "readback")
        pipeline = backend.pipeline(ADD, "main", {"SCALE": scale})
        group = backend.bind_group(pipeline, [(buf, 0, 4 * n) for buf in
                                              (self.a, self.b, self.out)])
        self.dispatch = Dispatch(pipeline, group, (-(-n // 64), 1, 1))
        self.copy = Copy(self.out, 0, self.staging, 0, 4 * n)

    def submit(self, a: np.ndarray, b: np.ndarray) -> None:
        self.backend.write_buffer(self.a, 0, a)
        self.backend.write_buffer(self.b, 0, b)
        self.backend.submit([self.dispatch], [self.copy])

    def run(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        self.submit(a, b)
        return np.frombuffer(self.backend.read_buffer(self.staging, 0, 4 * self.n), np.float32)

    async def run_async(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        self.submit(a, b)
        view = await self.backend.read_buffer_async(self.staging, 0, 4 * self.n)
        return np.frombuffer(view, np.float32)


@pytest.fixture(scope="module")
def backend() -> Iterator[js_webgpu.JsWebGPUBackend]:
    dev = js_webgpu.create_backend()
    yield dev
    dev.destroy()


@pytest.fixture
def no_jspi(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the backend behave as in a browser without JSPI (Firefox, Safari today)."""
    monkeypatch.setattr(js_webgpu, "can_run_sync", lambda: False)


def inputs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)


def test_jspi_sync_wait_works_here() -> None:
    from pyodide.ffi import can_run_sync

    assert can_run_sync(), "Chromium + runPythonAsync should give JSPI: exe.run() needs it"


def test_device_info(backend: js_webgpu.JsWebGPUBackend) -> None:
    import js

    info = backend.info
    assert info.backend == "navigator.gpu" and info.name != "unknown adapter"
    js_limit = backend.js_device.limits.maxComputeInvocationsPerWorkgroup
    assert info.max_workgroup_invocations == js_limit
    assert info.limit("max-storage-buffer-binding-size") > 0
    assert set(info.features) == set(js.Array.from_(backend.js_device.features).to_py())


@pytest.mark.parametrize("n", [1, 64, 1000])
def test_add_matches_numpy(backend: js_webgpu.JsWebGPUBackend, n: int) -> None:
    a, b = inputs(n)
    np.testing.assert_allclose(AddKernel(backend, n, scale=2.0).run(a, b), a + 2 * b, rtol=1e-6)


def test_read_buffer_async(backend: js_webgpu.JsWebGPUBackend) -> None:
    from pyodide.ffi import run_sync

    a, b = inputs(300)
    np.testing.assert_allclose(run_sync(AddKernel(backend, 300).run_async(a, b)), a + b)


def test_write_survives_wasm_memory_growth(backend: js_webgpu.JsWebGPUBackend) -> None:
    kernel = AddKernel(backend, 256)
    a, b = inputs(256)
    kernel.run(a, b)
    grow = np.ones(64 << 20, np.uint8)   # grows the wasm heap: HEAPU8 is replaced
    a2, b2 = inputs(256, seed=1)
    np.testing.assert_allclose(kernel.run(a2, b2), a2 + b2)
    del grow


def test_stats_count_creations_not_runs(backend: js_webgpu.JsWebGPUBackend) -> None:
    before = dict(backend.stats)
    kernel = AddKernel(backend, 128, scale=3.0)
    for seed in range(3):
        kernel.run(*inputs(128, seed))
    after = backend.stats
    assert after["buffers"] - before.get("buffers", 0) == 4
    assert after["bind_groups"] - before.get("bind_groups", 0) == 1
    assert after["pipelines"] - before.get("pipelines", 0) == 1
    assert after["submits"] - before.get("submits", 0) == 3


def live_proxies() -> tuple[int, int]:
    """(PyProxies alive in JS, JS objects held by Python), after a garbage collection."""
    import pyodide_js

    gc.collect()
    module = pyodide_js._module
    return module.pyproxy_alloc_map.size, module._hiwire_num_refs()


def test_no_proxy_leaks_over_1000_runs(backend: js_webgpu.JsWebGPUBackend) -> None:
    import pyodide_js
    from pyodide.ffi import run_sync

    import webrlx as wr

    g = wr.Graph()
    x = g.input("x", ("batch", 8))
    w = g.param("w", (8, 8))
    exe = wr.compile(g, outputs=[(x @ w).softmax(axis=-1), (x * 2).exp()], device=backend)
    exe.set_params({"w": np.eye(8, dtype=np.float32)})
    feeds = [{"x": np.full((n, 8), n, np.float32)} for n in (1, 3)]
    pyodide_js._module.enable_pyproxy_allocation_tracing()
    try:
        for i in range(10):
            exe.run(feeds[i % 2])
            run_sync(exe.run_async(feeds[i % 2]))
        start = live_proxies()
        for i in range(500):
            exe.run(feeds[i % 2])
            run_sync(exe.run_async(feeds[i % 2]))
        assert live_proxies() == start
    finally:
        pyodide_js._module.disable_pyproxy_allocation_tracing()


def test_bad_wgsl_raises_with_the_compiler_message(backend: js_webgpu.JsWebGPUBackend) -> None:
    with pytest.raises(js_webgpu.WebGPUError, match="nonexistent"):
        backend.pipeline(ADD.replace("b[id.x] * SCALE", "nonexistent"), "main")


def test_prepare_pipelines_compiles_a_batch_together(
        backend: js_webgpu.JsWebGPUBackend) -> None:
    """createComputePipelineAsync for every new key, one wait for all; pipeline() then finds
    them (no new creation), and they run."""
    scales = [11.0, 12.0, 13.0]
    keys = [(ADD, "main", {"SCALE": s}) for s in scales] + [(ADD, "main", {"SCALE": 11.0})]
    before = backend.stats["pipelines"]
    backend.prepare_pipelines(keys)
    assert backend.stats["pipelines"] - before == 3         # the repeated key: once
    kernels = [AddKernel(backend, 8, s) for s in scales]
    assert backend.stats["pipelines"] - before == 3
    a, b = inputs(8)
    for kernel, s in zip(kernels, scales):
        np.testing.assert_allclose(kernel.run(a, b), a + b * s, rtol=1e-6)


def test_prepare_pipelines_names_the_bad_shader(backend: js_webgpu.JsWebGPUBackend) -> None:
    bad = ADD.replace("b[id.x] * SCALE", "not_declared_here")
    with pytest.raises(js_webgpu.WebGPUError, match="(?s)out = a \\+ b.*not_declared_here"):
        backend.prepare_pipelines([(ADD, "main", {"SCALE": 21.0}), (bad, "main", None)])


def test_bad_wgsl_without_jspi_raises_at_the_next_read(
        backend: js_webgpu.JsWebGPUBackend, no_jspi: None) -> None:
    from pyodide.ffi import run_sync

    backend.pipeline(ADD.replace("b[id.x] * SCALE", "undefined_name"), "main")
    staging = backend.create_buffer(16, "readback")
    with pytest.raises(js_webgpu.WebGPUError, match="undefined_name"):
        run_sync(backend.read_buffer_async(staging, 0, 16))
    kernel = AddKernel(backend, 16)
    a, b = inputs(16)
    np.testing.assert_allclose(run_sync(kernel.run_async(a, b)), a + b)


def test_invalid_copy_raises_at_the_next_read(backend: js_webgpu.JsWebGPUBackend) -> None:
    src = backend.create_buffer(64, "storage")
    staging = backend.create_buffer(64, "readback")
    backend.submit([], [Copy(src, 0, staging, 0, 4096)])
    with pytest.raises(js_webgpu.WebGPUError, match="submit|read_buffer"):
        backend.read_buffer(staging, 0, 64)


def test_invalid_bind_group_raises_at_the_next_read(backend: js_webgpu.JsWebGPUBackend) -> None:
    kernel = AddKernel(backend, 64)
    small = backend.create_buffer(16, "storage")
    group = backend.bind_group(kernel.dispatch.pipeline, [(small, 0, 256), (kernel.b, 0, 256),
                                                          (kernel.out, 0, 256)])
    backend.submit([Dispatch(kernel.dispatch.pipeline, group, (1, 1, 1))], [kernel.copy])
    with pytest.raises(js_webgpu.WebGPUError, match="WebGPU reported"):
        backend.read_buffer(kernel.staging, 0, 256)
    np.testing.assert_allclose(kernel.run(*inputs(64)), np.add(*inputs(64)))


def test_sync_forms_without_jspi_say_what_to_use(
        backend: js_webgpu.JsWebGPUBackend, no_jspi: None) -> None:
    staging = backend.create_buffer(16, "readback")
    with pytest.raises(RuntimeError, match=r"await exe\.run_async"):
        backend.read_buffer(staging, 0, 16)
    with pytest.raises(RuntimeError, match=r"await webrlx\.device_async"):
        js_webgpu.create_backend()
    assert not backend.can_run_sync


def test_device_loss_becomes_a_python_exception() -> None:
    from pyodide.ffi import run_sync

    dev = js_webgpu.create_backend()
    buf = dev.create_buffer(16, "storage")
    dev.destroy()
    with pytest.raises(DeviceLostError, match="destroyed"):
        dev.create_buffer(16, "storage")
    run_sync(dev.js_device.lost)
    with pytest.raises(DeviceLostError, match="device_async"):
        dev.write_buffer(buf, 0, np.zeros(4, np.float32))
    with pytest.raises(DeviceLostError):
        dev.create_buffer(16, "storage")


def test_public_api_without_jspi_runs_async_only(
        backend: js_webgpu.JsWebGPUBackend, no_jspi: None) -> None:
    from pyodide.ffi import run_sync

    import webrlx as wr

    g = wr.Graph()
    x = g.input("x", (2, 3))
    exe = wr.compile(g, outputs=[(x * 2).exp()], device=backend)
    feeds = {"x": np.ones((2, 3), np.float32)}
    with pytest.raises(RuntimeError, match=r"await exe\.run_async"):
        exe.run(feeds)
    (out,) = run_sync(exe.run_async(feeds))
    np.testing.assert_allclose(out, np.exp(2 * feeds["x"]), rtol=1e-6)


def test_the_autotuner_times_variants_in_the_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    import webrlx as wr
    from webrlx.runtime import autotune

    monkeypatch.setattr(autotune, "TIME_VARIANTS", True)     # the backend session turns it off
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", True)           # not what IndexedDB holds
    g = wr.Graph()
    a, b = g.input("a", (64, 96)), g.input("b", (96, 128))
    exe = wr.compile(g, outputs=[a @ b], device=wr.device())
    av, bv = np.ones((64, 96), np.float32), np.ones((96, 128), np.float32)
    np.testing.assert_array_equal(exe.run({"a": av, "b": bv})[0], av @ bv)
    (tuned,) = autotune._memory.values()                    # timed, and the choice recorded
    assert any(key.startswith("matmul") for key in tuned), tuned
