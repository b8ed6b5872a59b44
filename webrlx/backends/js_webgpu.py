"""Browser backend: the Backend contract over `navigator.gpu`, bridged with `pyodide.ffi`.

Works on the main thread, in a Web Worker and in the JupyterLite kernel (`navigator`, never
`window`). Imports cleanly outside Pyodide (IN_PYODIDE guard) so its pure parts are tested natively.

Waiting is async in the browser. The sync forms (`create_backend`, `read_buffer`, validation
checks at pipeline creation) use `pyodide.ffi.run_sync`, which needs JSPI: Python must have been
entered through `pyodide.runPythonAsync` on a browser that has it (Chromium 137+). Without JSPI,
pipeline validation errors are collected and raised by the next `read_buffer_async`, the one
await of every run. Other errors (bind groups, encoding) always surface at the next read, through
the device's `uncapturederror` event.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..device_info import DeviceInfo, alloc_bytes
from .base import (
    WANTED_FEATURES,
    WANTED_LIMITS,
    Backend,
    Copy,
    Dispatch,
    GPUError,
    Timestamps,
)

IN_PYODIDE = "_pyodide_core" in sys.modules
if IN_PYODIDE:
    import js
    import pyodide_js
    from js import navigator
    from pyodide.ffi import can_run_sync, create_once_callable, create_proxy, run_sync, to_js

# GPUBufferUsage and GPUMapMode flags, fixed by the WebGPU spec.
MAP_READ, COPY_SRC, COPY_DST, UNIFORM, STORAGE = 0x1, 0x4, 0x8, 0x40, 0x80
QUERY_RESOLVE = 0x200
BUFFER_USAGE = {"storage": STORAGE | COPY_DST | COPY_SRC, "uniform": UNIFORM | COPY_DST,
                "readback": MAP_READ | COPY_DST, "query": QUERY_RESOLVE | COPY_SRC}
MAP_MODE_READ = 0x1


class WebGPUError(GPUError):
    """A WebGPU validation or out-of-memory error reported by the browser."""


def dashed(name: str) -> str:
    """Spell a JS limit name the way wgpu-py does: maxBufferSize -> max-buffer-size."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"-\1", name).lower()


def camel(name: str) -> str:
    """Spell a dashed limit name the JS way: max-buffer-size -> maxBufferSize."""
    head, *rest = name.split("-")
    return head + "".join(word.capitalize() for word in rest)


def adapter_name(info: dict[str, str]) -> str:
    """Name an adapter from its GPUAdapterInfo fields (description is often empty)."""
    if info.get("description"):
        return info["description"]
    words = [info.get(k, "") for k in ("vendor", "architecture", "device")]
    return " ".join(w for w in words if w) or "unknown adapter"


def device_request(adapter_limits: dict[str, int], adapter_features: set[str]
                   ) -> dict[str, Any]:
    """Build the requestDevice descriptor: WANTED_LIMITS/FEATURES, as far as the adapter goes."""
    return {"requiredFeatures": [f for f in WANTED_FEATURES if f in adapter_features],
            "requiredLimits": {camel(k): adapter_limits[k] for k in WANTED_LIMITS
                               if k in adapter_limits}}


def subgroup_matrix_configs(js_info: Any) -> tuple[tuple[str, str, int, int, int], ...]:
    """GPUAdapterInfo.subgroupMatrixConfigs as (component, result, M, N, K) tuples (Dawn's
    chromium-experimental-subgroup-matrix); empty where the browser has none."""
    configs = getattr(js_info, "subgroupMatrixConfigs", None)
    if configs is None:
        return ()
    return tuple((str(c.componentType), str(c.resultComponentType), int(c.M), int(c.N),
                  int(c.K)) for c in configs)


def subgroup_sizes(js_info: Any) -> tuple[int, int]:
    """GPUAdapterInfo's (subgroupMinSize, subgroupMaxSize); (0, 0) where the browser has
    none (DeviceInfo.subgroup_sizes)."""
    try:
        return int(js_info.subgroupMinSize), int(js_info.subgroupMaxSize)
    except (AttributeError, TypeError, ValueError):
        return 0, 0


def _sync_unavailable(what: str, instead: str) -> RuntimeError:
    return RuntimeError(
        f"{what} must wait for the GPU, and this browser context cannot wait synchronously "
        "(pyodide.ffi.can_run_sync() is False: no JSPI, or Python was not entered through "
        f"pyodide.runPythonAsync). Use {instead} instead.")


def _js(obj: Any) -> Any:
    """Convert a descriptor (dicts, lists, JS objects) into plain JS objects."""
    return to_js(obj, dict_converter=js.Object.fromEntries, create_pyproxies=False)


def _limits(js_limits: Any) -> dict[str, int]:
    # GPUSupportedLimits keeps its attributes on the prototype, not as own keys.
    names = js.Object.keys(js.Object.getPrototypeOf(js_limits))
    return {dashed(n): int(getattr(js_limits, n)) for n in names
            if isinstance(getattr(js_limits, n), (int, float))}


async def request_adapter_async(power_preference: str = "high-performance") -> Any:
    """Return the browser's GPUAdapter, or raise a RuntimeError that says why there is none."""
    gpu = getattr(navigator, "gpu", None)
    if gpu is None:
        raise RuntimeError("js_webgpu: navigator.gpu is missing: this browser has no WebGPU "
                           "(or the page is not a secure context). Use Chrome/Edge 113+, or "
                           "wr.device('reference') for the numpy fallback.")
    adapter = await gpu.requestAdapter(_js({"powerPreference": power_preference}))
    if adapter is None:
        raise RuntimeError("js_webgpu: navigator.gpu.requestAdapter() returned null: WebGPU is "
                           "disabled or blocklisted here. Check chrome://gpu, or use "
                           "wr.device('reference').")
    return adapter


async def create_backend_async(power_preference: str = "high-performance") -> JsWebGPUBackend:
    """Request an adapter and a device with the limits and features webrlx wants."""
    adapter = await request_adapter_async(power_preference)
    request = device_request(_limits(adapter.limits), set(adapter.features))
    device = await adapter.requestDevice(_js(request))
    js_info = adapter.info
    info = {k: str(getattr(js_info, k, "") or "")
            for k in ("vendor", "architecture", "device", "description")}
    return JsWebGPUBackend(device, adapter_name(info), subgroup_matrix_configs(js_info),
                           subgroup_sizes(js_info))


def create_backend(power_preference: str = "high-performance") -> JsWebGPUBackend:
    """Sync form of create_backend_async; needs JSPI (see the module docstring)."""
    if not can_run_sync():
        raise _sync_unavailable("webrlx.device()", "`await webrlx.device_async()`")
    return run_sync(create_backend_async(power_preference))


# Records a plan's dispatches into a compute pass in ONE call from Python: per dispatch the
# FFI crossings (setPipeline, setBindGroup, dispatchWorkgroups) cost microseconds each in
# Pyodide, ~3 per dispatch; a 160-dispatch decode step of SmolLM2 spent about a millisecond
# there (H100 under Dawn: 318 tok/s against 740 natively).
_ENCODE_JS = """(pass, pipes, groups, grids, start = 0, end = pipes.length) => {
    let last = null;
    for (let i = start; i < end; i++) {
        if (pipes[i] !== last) { last = pipes[i]; pass.setPipeline(last); }
        pass.setBindGroup(0, groups[i]);
        pass.dispatchWorkgroups(grids[3 * i], grids[3 * i + 1], grids[3 * i + 2]);
    }
}"""
# A whole submit (Backend.submit without timestamps) in ONE call from Python: the command
# encoder, the copies (flattened into the call's arguments, 5 numbers or buffers each), the
# passes and queue.submit; where Backend.submit made about 20 FFI calls, 8 of them only to look
# up the encoder's and the pass's methods.
# With `first` > 0 and more dispatches than that (one pass), they go out in pieces of first,
# 2 first, 4 first, ... dispatches, each its own command buffer submitted as soon as it is
# recorded: the GPU starts on the first piece while the host still encodes the rest (Dawn
# encodes ~4-10 us a dispatch on the JS thread; a 194-dispatch prefill spent ~1 ms there
# before the GPU had anything). Queue order keeps the pieces in order; the `before` copies go
# with the first piece, the others with the last.
_SUBMIT_JS = """(device, queue, encode, pipes, groups, grids, repeat, nBefore, nBetween, first,
                 ...copies) => {
    const copy = (enc, from, n) => {
        for (let i = 5 * from; i < 5 * (from + n); i += 5) {
            enc.copyBufferToBuffer(copies[i], copies[i + 1], copies[i + 2], copies[i + 3],
                                   copies[i + 4]);
        }
    };
    const nAfter = copies.length / 5 - nBefore - nBetween;
    if (repeat === 1 && pipes.length) {            // one piece when first is 0
        for (let start = 0, size = first || pipes.length; start < pipes.length; size *= 2) {
            const end = Math.min(pipes.length, start + size);
            const enc = device.createCommandEncoder();
            if (start === 0) copy(enc, 0, nBefore);
            const pass = enc.beginComputePass();
            encode(pass, pipes, groups, grids, start, end);
            pass.end();
            if (end === pipes.length) copy(enc, nBefore + nBetween, nAfter);
            queue.submit([enc.finish()]);
            start = end;
        }
        return;
    }
    const enc = device.createCommandEncoder();     // several steps, or copies alone
    copy(enc, 0, nBefore);
    for (let step = 0; pipes.length && step < repeat; step++) {
        if (step) copy(enc, nBefore, nBetween);
        const pass = enc.beginComputePass();
        encode(pass, pipes, groups, grids);
        pass.end();
    }
    copy(enc, nBefore + nBetween, nAfter);
    queue.submit([enc.finish()]);
}"""
ENCODE_CACHE = 64       # dispatch lists whose JS arrays are kept (a plan's list is reused)
ONE_CALL_ENCODE = True  # False: one FFI call per pass method (A/B runs, a debugging aid)
ONE_CALL_SUBMIT = True  # False: Backend.submit's calls from Python (A/B runs, as above)
# Dispatches in the first piece of a pieced submit (_SUBMIT_JS; 0: one command buffer). Only a
# submit that finds the GPU idle goes out in pieces (base.QueueIdle): a decode step submitted
# while earlier steps still run gains nothing from an early start and would pay the extra
# submits.
# H200s under Dawn, SmolLM2-shaped Q4_1, a 128-token prompt to its first token, min of 5 a
# round, modes alternating (bench/probes/pieced_submit_probe.py, 5 calls): one command buffer
# 4.30-5.66 ms (7.1 cold), F = 16 3.50-4.33, F = 32 3.80-4.51; decode unchanged
# (2026-11-28-h200-dawn-pieced-submit.json).
SUBMIT_FIRST = 16


class _JsPass:
    """A GPUComputePassEncoder under wgpu-py's method names (Backend.submit encodes with them)."""

    def __init__(self, js_pass: Any) -> None:
        self.js_pass = js_pass
        self.set_pipeline = js_pass.setPipeline
        self.set_bind_group = js_pass.setBindGroup
        self.dispatch_workgroups = js_pass.dispatchWorkgroups
        self.end = js_pass.end


class _JsEncoder:
    """A GPUCommandEncoder under wgpu-py's method names."""

    def __init__(self, js_encoder: Any) -> None:
        self.js_encoder = js_encoder
        self.copy_buffer_to_buffer = js_encoder.copyBufferToBuffer
        self.resolve_query_set = js_encoder.resolveQuerySet
        self.finish = js_encoder.finish

    def begin_compute_pass(self, timestamp_writes: dict[str, Any] | None = None) -> _JsPass:
        if timestamp_writes is None:
            return _JsPass(self.js_encoder.beginComputePass())
        w = timestamp_writes
        return _JsPass(self.js_encoder.beginComputePass(_js({"timestampWrites": {
            "querySet": w["query_set"],
            "beginningOfPassWriteIndex": w["beginning_of_pass_write_index"],
            "endOfPassWriteIndex": w["end_of_pass_write_index"]}})))


class JsWebGPUBackend(Backend):
    """The Backend contract over a GPUDevice of `navigator.gpu`."""

    name = "webgpu"

    def __init__(self, js_device: Any, adapter: str,
                 matrix_configs: tuple[tuple[str, str, int, int, int], ...] = (),
                 sizes: tuple[int, int] = (0, 0)) -> None:
        super().__init__()
        self.js_device = js_device
        self.js_queue = js_device.queue
        features = frozenset(js_device.features)
        self.info = DeviceInfo(name=adapter, backend="navigator.gpu",
                               limits=_limits(js_device.limits), features=features,
                               subgroup_matrix_configs=matrix_configs
                               if "chromium-experimental-subgroup-matrix" in features else (),
                               subgroup_sizes=sizes if "subgroups" in features else (0, 0))
        self._errors: list[str] = []               # uncaptured errors, raised at the next read
        self._encode: Any = None                   # _ENCODE_JS, made on first use
        self._submit_js: Any = None                # _SUBMIT_JS, made with it
        self._no_dispatches: Any = None            # an empty JS array, made with it
        self._encoded: dict[int, tuple[Any, ...]] = {}   # id(list) -> (list, JS arrays)
        self._pending_scopes: list[tuple[str, Any]] = []   # (what, popErrorScope promise)
        self._js_on_error = create_proxy(self._on_uncaptured_error)
        js_device.addEventListener("uncapturederror", self._js_on_error)
        js_device.lost.then(create_once_callable(self._on_lost))

    # -- events from JS -----------------------------------------------------------------
    def _on_uncaptured_error(self, event: Any) -> None:
        self._errors.append(str(event.error.message))

    def _on_lost(self, info: Any) -> None:
        self.lost = f"{info.reason}: {info.message}" if info.message else str(info.reason)
        self.js_device.removeEventListener("uncapturederror", self._js_on_error)
        self._js_on_error.destroy()

    def _check(self, where: str) -> None:
        self.check_alive(where)
        if self._errors:
            errors, self._errors = self._errors, []
            raise WebGPUError(f"{where}: WebGPU reported: " + "\n".join(errors))

    def _scoped(self, what: str, create: Any) -> Any:
        """Call create() inside a validation error scope; raise its error (or defer it)."""
        self.js_device.pushErrorScope("validation")
        try:
            result = create()
        finally:
            scope = self.js_device.popErrorScope()
        if can_run_sync():
            error = run_sync(scope)
            if error is not None:
                raise WebGPUError(f"{what}: {error.message}")
        else:
            self._pending_scopes.append((what, scope))
        return result

    def _destroy(self) -> None:
        self.js_device.destroy()

    # -- the contract -------------------------------------------------------------------
    @property
    def can_run_sync(self) -> bool:
        return bool(can_run_sync())

    def probe_subgroups(self) -> int:
        """0: browsers want `enable subgroups;` in every shader that uses them, which the
        row kernels do not emit yet, so the page keeps the workgroup-memory reductions."""
        return 0

    def create_buffer(self, nbytes: int, usage: str) -> Any:
        self._check("create_buffer")
        self.stats["buffers"] += 1
        return self.js_device.createBuffer(
            _js({"size": alloc_bytes(nbytes), "usage": BUFFER_USAGE[usage]}))

    def write_buffer(self, buf: Any, offset: int, data: np.ndarray) -> None:
        # Zero-copy: the queue reads straight out of the wasm heap. HEAPU8 is re-read every
        # call because it is replaced when the wasm memory grows.
        self._check("write_buffer")
        data = np.ascontiguousarray(data)
        self.js_queue.writeBuffer(buf, offset, pyodide_js._module.HEAPU8, data.ctypes.data,
                                  data.nbytes)

    @staticmethod
    def _what(source: str, entry: str) -> str:
        header = next((line.strip("/ ") for line in source.splitlines()
                       if line.startswith("//")), "")
        return f"pipeline '{entry}' ({header[:80]}): WGSL compilation failed"

    def _pipeline_desc(self, module: Any, entry: str, overrides: dict[str, float]) -> Any:
        compute: dict[str, Any] = {"module": module, "entryPoint": entry}
        if overrides:
            # numbers only: dawn.node refuses a boolean constant that Chrome converts
            compute["constants"] = {k: float(v) for k, v in overrides.items()}
        return _js({"layout": "auto", "compute": compute})

    def _create_pipeline(self, source: str, entry: str, overrides: dict[str, float]) -> Any:
        self._check("pipeline")

        def create() -> Any:
            module = self.js_device.createShaderModule(_js({"code": source}))
            return self.js_device.createComputePipeline(
                self._pipeline_desc(module, entry, overrides))
        return self._scoped(self._what(source, entry), create)

    def prepare_pipelines(self, keys: Sequence[tuple[str, str, dict[str, float] | None]]
                          ) -> None:
        """Start createComputePipelineAsync for every new key, then wait for all of them and
        their shader modules' error scopes together (one wait instead of one per pipeline:
        Chromium compiles them side by side). Without JSPI nothing can wait: the sync path
        (its scopes deferred) runs instead."""
        if not can_run_sync():
            super().prepare_pipelines(keys)
            return
        todo: dict[tuple, tuple[str, str, dict[str, float]]] = {}
        for source, entry, overrides in keys:
            overrides = overrides or {}
            key = (source, entry, tuple(sorted(overrides.items())))
            if key not in self._pipelines:
                todo[key] = (source, entry, overrides)
        if not todo:
            return
        self._check("pipeline")
        promises = []
        for source, entry, overrides in todo.values():
            self.js_device.pushErrorScope("validation")
            module = self.js_device.createShaderModule(_js({"code": source}))
            promises.append(self.js_device.popErrorScope())
            promises.append(self.js_device.createComputePipelineAsync(
                self._pipeline_desc(module, entry, overrides)))
        settled = run_sync(js.Promise.allSettled(to_js(promises)))
        for i, (key, (source, entry, _)) in enumerate(todo.items()):
            scope, made = settled[2 * i], settled[2 * i + 1]
            error = scope.value if scope.status == "fulfilled" else scope.reason
            if error is not None or made.status != "fulfilled":
                reason = error if error is not None else made.reason
                raise WebGPUError(f"{self._what(source, entry)}: "
                                  f"{getattr(reason, 'message', reason)}")
            self._pipelines[key] = made.value
            self.stats["pipelines"] += 1

    def bind_group(self, pipeline: Any, entries: Sequence[tuple[Any, int, int]]) -> Any:
        self._check("bind_group")
        self.stats["bind_groups"] += 1
        desc = {"layout": pipeline.getBindGroupLayout(0),
                "entries": [{"binding": i, "resource": {"buffer": b, "offset": o, "size": s}}
                            for i, (b, o, s) in enumerate(entries)]}
        # No error scope (a wait each): a bad bind group is reported by the next read.
        return self.js_device.createBindGroup(_js(desc))

    def _command_encoder(self) -> Any:
        self._check("submit")
        return _JsEncoder(self.js_device.createCommandEncoder())

    def _make_js(self) -> bool:
        """Make the JS functions of the one-call paths once; False where the page's CSP
        forbids eval (then every pass method is one call from Python)."""
        if self._encode is None:
            try:
                self._encode = js.Function("return " + _ENCODE_JS)()
                self._submit_js = js.Function("return " + _SUBMIT_JS)()
                self._no_dispatches = js.Array.new()
            except Exception:           # noqa: BLE001 - any refusal means the slow path
                self._encode = False
        return self._encode is not False

    def submit(self, dispatches: Sequence[Dispatch], copies: Sequence[Copy] = (),
               before: Sequence[Copy] = (), timestamps: Timestamps | None = None,
               scrub: Copy | None = None, repeat: int = 1, between: Sequence[Copy] = ()
               ) -> None:
        """Backend.submit in one call into JS (_SUBMIT_JS), the same commands in the same
        order; timed submits (one pass per dispatch) take Backend.submit's path."""
        if timestamps is not None or not ONE_CALL_SUBMIT or not ONE_CALL_ENCODE or \
                not self._make_js():
            super().submit(dispatches, copies, before, timestamps, scrub, repeat, between)
            return
        self._check("submit")
        arrays = self._js_arrays(dispatches) if dispatches else \
            (None, self._no_dispatches, self._no_dispatches, self._no_dispatches)
        flat = [x for c in (*before, *between, *copies)
                for x in (c.src, c.src_offset, c.dst, c.dst_offset, c.nbytes)]
        first = SUBMIT_FIRST if self.queue_idle.submit((*before, *between, *copies)) else 0
        self._submit_js(self.js_device, self.js_queue, self._encode, arrays[1], arrays[2],
                        arrays[3], repeat, len(before), len(between), first, *flat)
        self.stats["submits"] += 1

    def _js_arrays(self, dispatches: Sequence[Dispatch]) -> tuple[Any, ...]:
        """(dispatches, JS arrays of their pipelines, bind groups and grids, length). A plan
        submits the same list every run, so its arrays are built once (held with the list:
        ids are reused only after the list is gone; its length is compared in Python, where
        the JS array's `length` would be one more FFI call a run)."""
        key = id(dispatches)
        hit = self._encoded.get(key)
        if hit is None or hit[0] is not dispatches or hit[4] != len(dispatches):
            grids = [int(g) for d in dispatches for g in d.grid]
            hit = (dispatches, js.Array.of(*[d.pipeline for d in dispatches]),
                   js.Array.of(*[d.bind_group for d in dispatches]), js.Array.of(*grids),
                   len(dispatches))
            self._encoded[key] = hit
            while len(self._encoded) > ENCODE_CACHE:
                self._encoded.pop(next(iter(self._encoded)))
        return hit

    def _encode_dispatches(self, cpass: Any, dispatches: Sequence[Dispatch]) -> None:
        """Record the dispatches with one call into JS (the arrays of _js_arrays)."""
        if not self._make_js() or not dispatches or not ONE_CALL_ENCODE:
            super()._encode_dispatches(cpass, dispatches)
            return
        hit = self._js_arrays(dispatches)
        self._encode(cpass.js_pass, hit[1], hit[2], hit[3])

    def _queue_submit(self, command_buffer: Any) -> None:
        self.queue_idle.submit()
        self.js_queue.submit(js.Array.of(command_buffer))

    def create_query_set(self, count: int) -> Any:
        if "timestamp-query" not in self.info.features:
            return None
        return self.js_device.createQuerySet(_js({"type": "timestamp", "count": count}))

    def _copy_mapped(self, buf: Any, offset: int, nbytes: int) -> memoryview:
        out = np.empty(nbytes, np.uint8)
        try:
            js.Uint8Array.new(buf.getMappedRange(offset, nbytes)).assign_to(out)
        finally:
            buf.unmap()
        return out.data

    def read_buffer(self, buf: Any, offset: int, nbytes: int) -> memoryview:
        if not can_run_sync():
            raise _sync_unavailable("read_buffer", "`await exe.run_async(...)`")
        self._check("read_buffer")
        self.stats["readbacks"] += 1
        mark = self.queue_idle.read_issued(buf)
        try:
            run_sync(buf.mapAsync(MAP_MODE_READ, offset, nbytes))
        except Exception:
            self._check("read_buffer")
            raise
        self.queue_idle.read_done(mark)
        result = self._copy_mapped(buf, offset, nbytes)
        self._check("read_buffer")
        return result

    async def read_buffer_async(self, buf: Any, offset: int, nbytes: int) -> memoryview:
        self._check("read_buffer_async")
        self.stats["readbacks"] += 1
        # Only the first read after creating pipelines without JSPI has scopes to wait for.
        pending, self._pending_scopes = self._pending_scopes, []
        for what, scope in pending:
            error = await scope
            if error is not None:
                raise WebGPUError(f"{what}: {error.message}")
        mark = self.queue_idle.read_issued(buf)
        try:
            await buf.mapAsync(MAP_MODE_READ, offset, nbytes)
        except Exception:
            self._check("read_buffer_async")
            raise
        self.queue_idle.read_done(mark)
        result = self._copy_mapped(buf, offset, nbytes)
        self._check("read_buffer_async")
        return result
