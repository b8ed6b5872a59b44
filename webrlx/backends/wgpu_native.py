"""Native backend over wgpu-py (wgpu-native: Vulkan / Metal / DX12; lavapipe on CPU boxes)."""
from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..device_info import DeviceInfo, alloc_bytes
from ..kernels import RUNTIME_CHECKS_MARK
from .base import WANTED_FEATURES, WANTED_LIMITS, Backend, GPUError

# Deferred submits: runs recorded into one open command encoder. A run that comes in a burst
# (the last submit call ended under BURST_S ago) or while the GPU is still busy is appended to
# the open encoder (its dispatches to the open compute pass) and not submitted; the encoder is
# finished and submitted once MAX_HELD runs are in it, or when anything needs them done or
# ordered: a read, a write, a release, a timed submit (flush()). A lone run on an idle GPU is
# submitted at once. Why (H200, bench/probes/host_submit_probe.py,
# bench/probes/subgroup_defer_probe.py): a
# run that makes its own encoder, pass and command buffer costs ~20 us of host time in
# wgpu-native whatever its kernel does, and the GPU idles ~17 us between two submits
# (bench/probes/submit_gap_probe.py): a 9 us softmax ran 22 us a run back to back. Holding finished
# command buffers and submitting them together gave nothing (the cost is in making each one),
# and a background thread that submitted what was held 0.5 ms ago slowed bursts by 1.5-2x (GIL
# handoffs), so held runs wait for the next flush point: the next read of a result, a write,
# or the MAX_HELD-th run. Runs of over HOLD_MAX_DISPATCHES dispatches are not held (their
# fixed cost is small beside their recording): held in one pass, a 100-dispatch chain cost 4.5
# us a dispatch against 2.7 submitted run by run (H200).
DEFER_SUBMITS = True    # False: every run submits at once
MAX_HELD = 32
HOLD_MAX_DISPATCHES = 16
BURST_S = 50e-6
HOLD_ALWAYS = False     # (tests) hold every run as in a burst: lavapipe's runs are too slow
# A run of more than SUBMIT_FIRST dispatches that finds the GPU idle (base.QueueIdle: the last
# read showed every submit done) goes out in pieces of
# SUBMIT_FIRST, 2x, 4x ... dispatches, each submitted once recorded, so that the GPU starts
# while the host still records the rest (~3 us a dispatch here: a 194-dispatch prefill spent
# ~0.6 ms recording before the GPU had anything); as js_webgpu.SUBMIT_FIRST. 0: one command
# buffer.
SUBMIT_FIRST = 16

# Shader runtime checks (WGPUShaderRuntimeChecks flags: 1 bounds checks, 2 loop bounding) of
# webrlx's own kernels, made through wgpuDeviceCreateShaderModuleTrusted; None: wgpu-py's
# module, every check on. User kernels (kernels.from_source marks them: RUNTIME_CHECKS_MARK) always
# keep every check. WEBRLX_SHADER_CHECKS overrides it: "all" for None, else the flags.
# Why none (H200, bench/probes/shader_checks_probe.py --settings all,0,2,all,0,
# bench/results/2026-11-26-h200-shader-checks-probe.json; ms, all -> 0): naga clamps every
# workgroup-array index (min per shared-memory load in the matmul's inner loop) and counts
# every loop's iterations, and the driver cannot take them out: f32 matmul 4096^3 5.51 ->
# 4.21 (2048^3 0.753 -> 0.594), attention 1x12x2048x64 0.822 -> 0.614, layer_norm 4096^2
# 0.073 -> 0.050-0.061, softmax 4096^2 0.076 -> 0.064. Bounds checks alone (1) gave 4.49 at
# 4096^3, loop bounding alone (2) 5.14. Storage buffers stay guarded without them: wgpu-hal
# turns on Vulkan's robustBufferAccess, and the kernels guard their own reads and writes.
_SHADER_CHECKS_DEFAULT: int | None = 0
_env_checks = os.environ.get("WEBRLX_SHADER_CHECKS", "")
SHADER_CHECKS: int | None = (_SHADER_CHECKS_DEFAULT if not _env_checks else
                             None if _env_checks == "all" else int(_env_checks))


# wgpu-py spells the WebGPU feature "subgroups" as "subgroup".
_FEATURE_NAMES = {"subgroups": "subgroup"}


def _quiet_xdg() -> None:
    # wgpu-native warns loudly when XDG_RUNTIME_DIR is unset or not 0700
    if not os.environ.get("XDG_RUNTIME_DIR"):
        path = os.path.join(tempfile.gettempdir(), f"webrlx-xdg-{os.getuid()}")
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.environ["XDG_RUNTIME_DIR"] = path


def request_adapter(power_preference: str = "high-performance") -> Any:
    """Return the default wgpu adapter, or None when the machine has none."""
    _quiet_xdg()
    import wgpu
    return wgpu.gpu.request_adapter_sync(power_preference=power_preference)


def gpu_adapters() -> list[Any]:
    """The adapters of the default adapter's backend and type (e.g. every NVIDIA GPU over
    Vulkan), in the driver's enumeration order: what `device("gpu:N")` indexes."""
    _quiet_xdg()
    import wgpu
    default = request_adapter()
    if default is None:
        return []
    key = (default.info.get("backend_type"), default.info.get("adapter_type"))
    return [a for a in wgpu.gpu.enumerate_adapters_sync()
            if (a.info.get("backend_type"), a.info.get("adapter_type")) == key]


class WgpuBackend(Backend):
    """The Backend contract over wgpu-py."""

    name = "wgpu"

    def __init__(self, adapter: Any) -> None:
        super().__init__()
        import wgpu
        self._wgpu = wgpu
        features = [_FEATURE_NAMES.get(f, f) for f in WANTED_FEATURES]
        features = [f for f in features if f in adapter.features]
        limits = {k: adapter.limits[k] for k in WANTED_LIMITS if k in adapter.limits}
        self.js_device = None
        self.device = adapter.request_device_sync(required_features=features,
                                                  required_limits=limits)
        inv = {v: k for k, v in _FEATURE_NAMES.items()}
        info = adapter.info
        name = info.get("device") or info.get("description") or "unknown adapter"
        driver = info.get("description") or ""
        self.info = DeviceInfo(
            name=name, backend=f"wgpu ({info.get('backend_type', '?')})",
            limits=dict(self.device.limits),
            features=frozenset(inv.get(f, f) for f in self.device.features),
            driver=driver if driver != name else "")
        self.queue = self.device.queue
        self._usage = {
            "storage": wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST
            | wgpu.BufferUsage.COPY_SRC,
            "uniform": wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST,
            "readback": wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST,
            "query": wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC,
        }
        self._open: Any = None         # the open command encoder of held runs (a C handle)
        self._open_pass: Any = None    # its open compute pass, if any
        self._held = 0                 # runs recorded into it
        self._last_end = 0.0           # when the last submit call ended (bursts)
        if not self.info.software:     # (tests probe lavapipe's: helpers.force_subgroup_rows)
            self.info.subgroup_size = self.probe_subgroups()

    # -- loss: wgpu-py only logs the device-lost callback, so a lost device is found by our own
    # destroy() or by the "device is lost" errors of the calls made on it
    def _destroy(self) -> None:
        self._drop_held()
        self.device.destroy()

    def _drop_held(self) -> None:
        """Release the open encoder without running its runs (the device is gone)."""
        if self._open is not None:
            lib = self._held_api()[0]
            if self._open_pass is not None:
                lib.wgpuComputePassEncoderRelease(self._open_pass)
            lib.wgpuCommandEncoderRelease(self._open)
        self._open = self._open_pass = None
        self._held = 0

    def _raise_if_lost(self, where: str, error: Exception) -> None:
        if "lost" in str(error).lower():        # wgpu-native: "Parent device is lost"
            self.lost = str(error).strip().splitlines()[-1].strip()
            self.check_alive(where)

    @contextlib.contextmanager
    def _guard(self, where: str) -> Iterator[None]:
        self.check_alive(where)
        try:
            yield
        except self._wgpu.GPUError as e:
            self._raise_if_lost(where, e)
            raise

    def create_buffer(self, nbytes: int, usage: str) -> Any:
        with self._guard("create_buffer"):
            buf = self.device.create_buffer(size=alloc_bytes(nbytes),
                                            usage=self._usage[usage])
        self.stats["buffers"] += 1
        return buf

    def write_buffer(self, buf: Any, offset: int, data: np.ndarray) -> None:
        # a queued write runs before the next submit: held-back runs that came first must
        # be submitted before it, or they would read what this writes
        self.flush()
        with self._guard("write_buffer"):
            self.queue.write_buffer(buf, offset, data.data.cast("B"))

    def _create_pipeline(self, source: str, entry: str, overrides: dict[str, float]) -> Any:
        compute: dict[str, Any] = {"entry_point": entry}
        if overrides:
            compute["constants"] = dict(overrides)
        self.check_alive("pipeline")
        try:
            compute["module"] = self._shader_module(source)
            return self.device.create_compute_pipeline(layout="auto", compute=compute)
        except self._wgpu.GPUError as e:   # same wording as the browser backend
            self._raise_if_lost("pipeline", e)
            header = next((line.strip("/ ") for line in source.splitlines()
                           if line.startswith("//")), "")
            raise GPUError(f"pipeline '{entry}' ({header[:80]}): WGSL compilation failed: "
                           f"{e}") from e

    def _shader_module(self, source: str) -> Any:
        """A WGSL module: wgpu-py's (every runtime check on) for user kernels and with
        SHADER_CHECKS None, else one made through wgpuDeviceCreateShaderModuleTrusted with
        only the SHADER_CHECKS checks."""
        trusted = SHADER_CHECKS is not None and not source.startswith(RUNTIME_CHECKS_MARK)
        c = self._c_api() if trusted else None
        if c is None or not hasattr(c[0], "wgpuDeviceCreateShaderModuleTrusted"):
            return self.device.create_shader_module(code=source)
        from wgpu.backends.wgpu_native import _api
        lib, libf, ffi = c
        src = _api.new_struct_p("WGPUShaderSourceWGSL *", code=_api.to_c_string_view(source))
        src[0].chain.next = ffi.NULL
        src[0].chain.sType = lib.WGPUSType_ShaderSourceWGSL
        desc = _api.new_struct_p("WGPUShaderModuleDescriptor *",
                                 nextInChain=ffi.cast("WGPUChainedStruct *", src),
                                 label=_api.to_c_string_view(""))
        handle = libf.wgpuDeviceCreateShaderModuleTrusted(self.device._internal, desc,
                                                          SHADER_CHECKS)
        if handle == ffi.NULL:
            raise self._wgpu.GPUError("shader module creation failed")
        return _api.GPUShaderModule("", handle, self.device)

    def prepare_pipelines(self, keys: Sequence[tuple[str, str, dict[str, float] | None]]
                          ) -> None:
        """Compile a plan's new pipelines on a thread pool: wgpu-native compiles with the GIL
        released, Vulkan pipeline creation is thread-safe, and wgpu-py captures errors per
        thread. bench/probes/compile_probe.py (25 distinct kernels, first run): H100 host
        1.09 / 0.84 s one by one -> 0.60 / 0.47 s pooled; this 2-core box 0.75 / 0.52 -> 0.48 s."""
        todo: dict[tuple, tuple[str, str, dict[str, float]]] = {}
        for source, entry, overrides in keys:
            overrides = overrides or {}
            key = (source, entry, tuple(sorted(overrides.items())))
            if key not in self._pipelines:
                todo[key] = (source, entry, overrides)
        workers = min(len(todo), os.cpu_count() or 1, 8)
        if workers < 2:
            super().prepare_pipelines(keys)
            return
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(workers, thread_name_prefix="webrlx-compile") as pool:
            futures = {key: pool.submit(self._create_pipeline, *args)
                       for key, args in todo.items()}
        for key, future in futures.items():      # the first failure, in the plan's order
            self._pipelines[key] = future.result()
            self.stats["pipelines"] += 1

    def bind_group(self, pipeline: Any, entries: Sequence[tuple[Any, int, int]]) -> Any:
        with self._guard("bind_group"):
            group = self.device.create_bind_group(
                layout=pipeline.get_bind_group_layout(0),
                entries=[{"binding": i, "resource": {"buffer": b, "offset": o, "size": s}}
                         for i, (b, o, s) in enumerate(entries)])
        self.stats["bind_groups"] += 1
        return group

    def _command_encoder(self) -> Any:
        with self._guard("submit"):
            return self.device.create_command_encoder()

    # -- the hot path: one run's submit straight on wgpu-native's C API -------------------
    # wgpu-py builds a descriptor struct, a label and a wrapper object per encoder, pass and
    # command buffer, and wraps every call in error capture: on an H100 host a one-kernel run
    # cost ~98 us of host time per submit against 5-47 us of GPU time
    # (bench/probes/submit_probe.py).
    # Recording (pipelines, bind groups, dispatches, copies) uses the raw C calls: WebGPU
    # reports an encoding error at finish(), which, like creating the encoder and submitting,
    # goes through wgpu-py's error-capturing wrappers (libf), so errors and device loss still
    # raise here. The Plan keeps its pipelines, bind groups and buffers alive while it can run.
    def _c_api(self) -> tuple[Any, Any, Any] | None:
        if not hasattr(self, "_c"):
            try:
                from wgpu.backends.wgpu_native import _api
                self._c: tuple[Any, Any, Any] | None = (_api.lib, _api.libf, _api.ffi)
                self._c[0].wgpuComputePassEncoderSetPipeline   # noqa: B018 - present?
            except (ImportError, AttributeError):
                self._c = None
        return self._c

    def _held_api(self) -> tuple[Any, Any, Any]:
        """The C API, while an encoder is held open (only submits through it hold one)."""
        c = self._c_api()
        assert c is not None, "an open encoder without wgpu-native's C API"
        return c

    def _encode_dispatches(self, cpass: Any, dispatches: Sequence[Any]) -> None:
        c = self._c_api()
        if c is None:
            super()._encode_dispatches(cpass, dispatches)
        else:
            self._record(c[0], c[2], cpass._internal, dispatches)

    @staticmethod
    def _record(lib: Any, ffi: Any, cid: Any, dispatches: Sequence[Any]) -> None:
        set_pipeline, set_group = (lib.wgpuComputePassEncoderSetPipeline,
                                   lib.wgpuComputePassEncoderSetBindGroup)
        dispatch, null, last = lib.wgpuComputePassEncoderDispatchWorkgroups, ffi.NULL, None
        for d in dispatches:
            pipe = d.pipeline._internal
            if pipe != last:                    # a repeated pipeline is still bound
                set_pipeline(cid, pipe)
                last = pipe
            set_group(cid, 0, d.bind_group._internal, 0, null)
            dispatch(cid, *d.grid)

    def submit(self, dispatches: Sequence[Any], copies: Sequence[Any] = (),
               before: Sequence[Any] = (), timestamps: Any = None, scrub: Any = None,
               repeat: int = 1, between: Sequence[Any] = ()) -> None:
        c = self._c_api()
        if c is None or timestamps is not None:
            super().submit(dispatches, copies, before, timestamps, scrub, repeat, between)
            return
        lib, libf, ffi = c
        start = time.perf_counter()
        self.check_alive("submit")
        with self.lock:
            hold = DEFER_SUBMITS and self._held + 1 < MAX_HELD and \
                len(dispatches) * repeat <= HOLD_MAX_DISPATCHES and (
                HOLD_ALWAYS or start - self._last_end < BURST_S
                or not lib.wgpuDevicePoll(self.device._internal, 0, ffi.NULL))
            idle = self.queue_idle.submit((*before, *between, *copies))
            pieces = (idle and not hold and repeat == 1 and 0 < SUBMIT_FIRST < len(dispatches)
                      and self._open is None)
            try:
                if pieces:
                    self._submit_pieces(dispatches, copies, before)
                    self._last_end = time.perf_counter()
                    return
                if self._open is None:
                    self._open = libf.wgpuDeviceCreateCommandEncoder(self.device._internal,
                                                                     ffi.NULL)
                enc = self._open
                if before:
                    self._end_pass()
                self._copy(lib, enc, before)
                for step in range(repeat if dispatches else 0):
                    if step and between:       # copies end the pass; the next step opens one
                        self._end_pass()
                        self._copy(lib, enc, between)
                    if self._open_pass is None:
                        self._open_pass = lib.wgpuCommandEncoderBeginComputePass(enc, ffi.NULL)
                    self._record(lib, ffi, self._open_pass, dispatches)
                if copies:
                    self._end_pass()
                self._copy(lib, enc, copies)
                self._held += 1
                self.stats["submits"] += 1
                if hold:
                    self.stats["submits_held"] += 1
                else:
                    self._submit_held()
            except self._wgpu.GPUError as e:
                self._raise_if_lost("submit", e)
                raise
        self._last_end = time.perf_counter()

    def _submit_pieces(self, dispatches: Sequence[Any], copies: Sequence[Any],
                       before: Sequence[Any]) -> None:
        """One run in pieces of SUBMIT_FIRST, 2 SUBMIT_FIRST, ... dispatches, each its own
        command buffer submitted at once; `before` with the first, `copies` with the last."""
        lib, libf, ffi = self._held_api()
        start, size = 0, SUBMIT_FIRST
        while start < len(dispatches):
            end = min(len(dispatches), start + size)
            self._open = libf.wgpuDeviceCreateCommandEncoder(self.device._internal, ffi.NULL)
            self._copy(lib, self._open, before if start == 0 else ())
            self._open_pass = lib.wgpuCommandEncoderBeginComputePass(self._open, ffi.NULL)
            self._record(lib, ffi, self._open_pass, dispatches[start:end])
            if end == len(dispatches):
                self._end_pass()
                self._copy(lib, self._open, copies)
            self._held = 1
            self._submit_held()
            start, size = end, 2 * size
        self.stats["submits"] += 1
        self.stats["submits_pieced"] += 1

    @staticmethod
    def _copy(lib: Any, enc: Any, copies: Sequence[Any]) -> None:
        """Record buffer-to-buffer copies into encoder enc."""
        for cp in copies:
            lib.wgpuCommandEncoderCopyBufferToBuffer(enc, cp.src._internal, cp.src_offset,
                                                     cp.dst._internal, cp.dst_offset, cp.nbytes)

    def _end_pass(self) -> None:
        if self._open_pass is not None:
            lib = self._held_api()[0]
            lib.wgpuComputePassEncoderEnd(self._open_pass)
            lib.wgpuComputePassEncoderRelease(self._open_pass)
            self._open_pass = None

    def flush(self) -> None:
        if self._open is not None:
            with self.lock:
                if self.lost is not None:
                    self._drop_held()
                    self.check_alive("flush")
                try:
                    self._submit_held()
                except self._wgpu.GPUError as e:
                    self._raise_if_lost("flush", e)
                    raise

    def _submit_held(self) -> None:
        """Finish the open encoder and submit it: every held run, in the order recorded."""
        if self._open is None:
            return
        lib, libf, ffi = self._held_api()
        self._end_pass()
        enc, self._open, self._held = self._open, None, 0
        try:
            cb = libf.wgpuCommandEncoderFinish(enc, ffi.NULL)
        finally:
            lib.wgpuCommandEncoderRelease(enc)
        try:
            libf.wgpuQueueSubmit(self.queue._internal, 1, ffi.new("WGPUCommandBuffer[1]", [cb]))
        finally:
            lib.wgpuCommandBufferRelease(cb)
        self.stats["queue_submits"] += 1

    def _queue_submit(self, command_buffer: Any) -> None:
        self.queue_idle.submit()
        self.flush()
        with self._guard("submit"):
            self.queue.submit([command_buffer])

    def create_query_set(self, count: int) -> Any:
        if "timestamp-query" not in self.info.features:
            return None
        return self.device.create_query_set(type="timestamp", count=count)

    def read_buffer(self, buf: Any, offset: int, nbytes: int) -> memoryview:
        self.stats["readbacks"] += 1
        mark = self.queue_idle.read_issued(buf)
        self.flush()
        with self._guard("read_buffer"):
            buf.map_sync(self._wgpu.MapMode.READ, offset, nbytes)
        self.queue_idle.read_done(mark)
        try:
            return buf.read_mapped(offset, nbytes, copy=True)
        finally:
            buf.unmap()

    async def read_buffer_async(self, buf: Any, offset: int, nbytes: int) -> memoryview:
        self.stats["readbacks"] += 1
        mark = self.queue_idle.read_issued(buf)
        self.flush()
        with self._guard("read_buffer_async"):
            await buf.map_async(self._wgpu.MapMode.READ, offset, nbytes)
        self.queue_idle.read_done(mark)
        try:
            return buf.read_mapped(offset, nbytes, copy=True)
        finally:
            buf.unmap()
