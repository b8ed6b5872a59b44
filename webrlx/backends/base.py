"""The Backend contract shared by every GPU backend, and the pipeline cache.

A compiled run costs: write changed inputs, one submit of one encoder, one readback of the
requested outputs. Nothing is created per run; `stats` counts creations so tests can check it.
"""
from __future__ import annotations

import abc
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..device_info import DeviceInfo


class GPUError(RuntimeError):
    """The device rejected something (a shader, a pipeline, a command) or was lost."""


class DeviceLostError(GPUError):
    """The GPU device was lost (destroy(), a driver reset, a browser tab in the background too
    long). Executables built on it stay unusable; webrlx.device() then makes a fresh device."""


# Limits webrlx asks for at device creation (up to what the adapter offers).
WANTED_LIMITS = ("max-storage-buffer-binding-size", "max-buffer-size",
                 "max-storage-buffers-per-shader-stage", "max-compute-workgroup-storage-size",
                 "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x",
                 "max-compute-workgroup-size-y")
# Optional features webrlx uses when the adapter has them (WebGPU spellings).
# chromium-experimental-subgroup-matrix: Dawn's tensor-core matrices (compiler/smat.py); the
# browser offers it behind allow_unsafe_apis (the Dawn runner's flags), wgpu not at all
WANTED_FEATURES = ("shader-f16", "subgroups", "timestamp-query",
                   "chromium-experimental-subgroup-matrix")
# probe_subgroups' kernel: per thread, its subgroup's size, its lane, the first lane's thread
# and subgroupAdd(1)
SUBGROUP_PROBE = """
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(subgroup_size) sg: u32,
        @builtin(subgroup_invocation_id) lane: u32) {
    out[4u * lid] = sg;
    out[4u * lid + 1u] = lane;
    out[4u * lid + 2u] = subgroupBroadcastFirst(lid);
    out[4u * lid + 3u] = u32(subgroupAdd(1.0));
}
"""
SCRUB_BYTES = 32 << 20      # time_dispatch's copy: 32 MiB read + 32 written > an H100's L2


@dataclass
class Dispatch:
    """One compute dispatch: a pipeline, its bind group and a workgroup grid."""
    pipeline: Any
    bind_group: Any
    grid: tuple[int, int, int]


@dataclass
class Copy:
    """One buffer-to-buffer copy, encoded after the dispatches of the same submit."""
    src: Any
    src_offset: int
    dst: Any
    dst_offset: int
    nbytes: int


@dataclass
class Timestamps:
    """A timestamp query set with its resolve buffer and a readback buffer (8 bytes each)."""
    query_set: Any
    resolve: Any
    readback: Any


def quantized(stamps: np.ndarray) -> bool:
    """Whether timestamps (ns) were rounded to a coarse grid (a browser's timestamp
    quantization: Dawn clears their low bits, 65.5 us steps): their greatest common divisor is
    1 us or more (all zero included), which a true GPU clock's stamps almost never share."""
    t = np.asarray(stamps).astype(np.int64)
    if len(t) < 2:
        return False
    step = int(np.gcd.reduce(t))
    return step == 0 or step >= 1000


class QueueIdle:
    """Whether the GPU has nothing left to do, as far as the host knows, without asking it:
    submits are counted, each copy's destination remembers the submit that wrote it, and a
    completed read of a buffer shows every submit up to that one done (a map waits for the
    buffer's last use, Dawn's and wgpu's alike). A run submitted right after reading the
    previous run's output finds the GPU idle; a decode step read back two steps late does
    not."""

    def __init__(self) -> None:
        self.submitted = 0                  # submits so far
        self.drained = 0                    # submits known finished
        self.written: dict[int, int] = {}   # id(buffer) -> the submit whose copy wrote it

    def submit(self, copies: Sequence[Copy] = ()) -> bool:
        """Count a submit (and where its copies write); return whether the GPU was idle when
        it came."""
        idle = self.drained == self.submitted
        self.submitted += 1
        for c in copies:
            self.written[id(c.dst)] = self.submitted
        return idle

    def read_issued(self, buf: Any) -> int:
        """A read of buf is starting: the submits it will show finished."""
        return self.written.pop(id(buf), self.submitted)

    def read_done(self, mark: int) -> None:
        self.drained = max(self.drained, mark)


class Backend(abc.ABC):
    """A WebGPU device: buffers, cached pipelines, bind groups, one submit per run."""

    name: str
    info: DeviceInfo

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()   # buffers, pipelines, bind_groups, submits
        self.queue_idle = QueueIdle()          # pieced submits (js_webgpu, wgpu_native)
        # held around a whole run (uploads, submit, readback through shared staging buffers):
        # executables and devices are safe to share between threads (runs serialize)
        self.lock = threading.RLock()
        self._pipelines: dict[tuple, Any] = {}
        self._staging: dict[int, Any] = {}
        self._probe: tuple[Any, Any, Any] | None = None   # (storage, readback, timestamps)
        self._scrub: Copy | None = None     # time_dispatch's L2-evicting copy (GPUs)
        self.lost: str | None = None                  # why the device was lost, once it is

    # -- loss -----------------------------------------------------------------------------
    def destroy(self) -> None:
        """Destroy the device (as WebGPU's GPUDevice.destroy()); later use raises
        DeviceLostError and webrlx.device() makes a fresh device."""
        if self.lost is None:
            self.lost = "destroyed"
            self._destroy()

    def _destroy(self) -> None:  # noqa: B027 - optional hook: a backend may hold nothing to free
        """Destroy the underlying device object."""

    def check_alive(self, where: str) -> None:
        """Raise DeviceLostError (naming `where` and the reason) once the device is lost."""
        if self.lost is not None:
            raise DeviceLostError(
                f"{where}: the GPU device {self.info.name!r} was lost ({self.lost}). Everything "
                f"built on it is unusable: get a fresh device with webrlx.device() (or await "
                f"webrlx.device_async()) and compile the graph again")

    # -- the contract -------------------------------------------------------------------
    @abc.abstractmethod
    def create_buffer(self, nbytes: int, usage: str) -> Any:
        """Create a buffer; usage is "storage", "uniform", "readback" (MAP_READ staging) or
        "query" (a timestamp resolve target)."""

    @abc.abstractmethod
    def write_buffer(self, buf: Any, offset: int, data: np.ndarray) -> None:
        """Queue a write of a C-contiguous array's bytes into buf at offset."""

    @abc.abstractmethod
    def _create_pipeline(self, source: str, entry: str, overrides: dict[str, float]) -> Any:
        """Compile WGSL into a compute pipeline (uncached; use `pipeline`)."""

    @abc.abstractmethod
    def bind_group(self, pipeline: Any, entries: Sequence[tuple[Any, int, int]]) -> Any:
        """Create a bind group for group 0 from (buffer, offset, size) in binding order."""

    @abc.abstractmethod
    def _command_encoder(self) -> Any:
        """Return a command encoder with wgpu-py's method names (copy_buffer_to_buffer,
        begin_compute_pass(timestamp_writes=...), resolve_query_set, finish)."""

    @abc.abstractmethod
    def _queue_submit(self, command_buffer: Any) -> None:
        """Submit one finished command buffer to the queue."""

    def flush(self) -> None:  # noqa: B027 - optional: only a deferring backend holds submits
        """Hand every held-back command buffer to the queue (see WgpuBackend's deferred
        submits); a no-op where submits are never held."""

    def release(self, buffers: Sequence[Any]) -> None:
        """Destroy buffers nothing will use again (a plan evicted from a cache)."""
        if self.lost is None:
            self.flush()                # (held-back work may still use them)
        for buf in buffers:
            if self.lost is None:
                buf.destroy()
            self.stats["buffers_released"] += 1

    def create_query_set(self, count: int) -> Any:
        """Return a timestamp query set of `count` entries, or None without timestamp-query."""
        return None

    @abc.abstractmethod
    def read_buffer(self, buf: Any, offset: int, nbytes: int) -> memoryview:
        """Map a readback buffer, copy nbytes out, unmap (waits for the GPU)."""

    @abc.abstractmethod
    async def read_buffer_async(self, buf: Any, offset: int, nbytes: int) -> memoryview:
        """Async form of read_buffer: the only form that works everywhere in the browser."""

    # -- shared ---------------------------------------------------------------------------
    def submit(self, dispatches: Sequence[Dispatch], copies: Sequence[Copy] = (),
               before: Sequence[Copy] = (), timestamps: Timestamps | None = None,
               scrub: Copy | None = None, repeat: int = 1, between: Sequence[Copy] = ()
               ) -> None:
        """Encode the `before` copies, the dispatches, then the copies; submit once.

        The dispatches share one compute pass; with `timestamps`, each gets its own pass
        with begin/end timestamps, resolved and copied to timestamps.readback, and `scrub`
        (a copy bigger than the GPU's L2) runs before each, outside the timed passes.
        With `repeat` > 1 the dispatches run that many times, each time in its own pass after
        the `between` copies (a step's outputs copied into the next step's inputs).
        """
        if repeat > 1 and timestamps is not None:
            raise ValueError("submit(): repeat > 1 cannot be timed (one pass per dispatch)")
        enc = self._command_encoder()
        for c in before:
            enc.copy_buffer_to_buffer(c.src, c.src_offset, c.dst, c.dst_offset, c.nbytes)
        if dispatches and timestamps is None:
            for step in range(repeat):
                for c in between if step else ():
                    enc.copy_buffer_to_buffer(c.src, c.src_offset, c.dst, c.dst_offset,
                                              c.nbytes)
                cpass = enc.begin_compute_pass()
                self._encode_dispatches(cpass, dispatches)
                cpass.end()
        elif dispatches and timestamps is not None:
            for i, d in enumerate(dispatches):
                if scrub is not None:
                    enc.copy_buffer_to_buffer(scrub.src, scrub.src_offset, scrub.dst,
                                              scrub.dst_offset, scrub.nbytes)
                cpass = enc.begin_compute_pass(timestamp_writes={
                    "query_set": timestamps.query_set, "beginning_of_pass_write_index": 2 * i,
                    "end_of_pass_write_index": 2 * i + 1})
                cpass.set_pipeline(d.pipeline)
                cpass.set_bind_group(0, d.bind_group)
                cpass.dispatch_workgroups(*d.grid)
                cpass.end()
            n = 2 * len(dispatches)
            enc.resolve_query_set(timestamps.query_set, 0, n, timestamps.resolve, 0)
            enc.copy_buffer_to_buffer(timestamps.resolve, 0, timestamps.readback, 0, 8 * n)
        for c in copies:
            enc.copy_buffer_to_buffer(c.src, c.src_offset, c.dst, c.dst_offset, c.nbytes)
        self._queue_submit(enc.finish())
        self.stats["submits"] += 1

    def _encode_dispatches(self, cpass: Any, dispatches: Sequence[Dispatch]) -> None:
        """Record dispatches into one compute pass (the hot loop of every run)."""
        last = None
        for d in dispatches:
            if d.pipeline is not last:          # a repeated pipeline is still bound
                cpass.set_pipeline(d.pipeline)
                last = d.pipeline
            cpass.set_bind_group(0, d.bind_group)
            cpass.dispatch_workgroups(*d.grid)

    def timestamps(self, dispatches: int) -> Timestamps | None:
        """Return what `submit` needs to time each of `dispatches` passes (None where the
        device has no timestamp-query)."""
        qs = self.create_query_set(2 * dispatches) if dispatches else None
        if qs is None:
            return None
        return Timestamps(qs, self.create_buffer(16 * dispatches, "query"),
                          self.create_buffer(16 * dispatches, "readback"))

    def pipeline(self, source: str, entry: str = "main",
                 overrides: dict[str, float] | None = None) -> Any:
        """Return the compute pipeline for (source, entry, overrides), compiling it once."""
        overrides = overrides or {}
        key = (source, entry, tuple(sorted(overrides.items())))
        pipe = self._pipelines.get(key)
        if pipe is None:
            pipe = self._create_pipeline(source, entry, overrides)
            self._pipelines[key] = pipe
            self.stats["pipelines"] += 1
        return pipe

    def prepare_pipelines(self, keys: Sequence[tuple[str, str, dict[str, float] | None]]
                          ) -> None:
        """Compile the pipelines of (source, entry, overrides) keys not compiled yet, all at
        once where the backend can (the browser: createComputePipelineAsync for all, awaited
        together); `pipeline()` then finds them. Here: one by one."""
        for source, entry, overrides in keys:
            self.pipeline(source, entry, overrides)

    def time_dispatch(self, dispatch: Dispatch, repeats: int = 8, cold: bool = False
                      ) -> float | None:
        """Seconds one dispatch takes, for the autotuner. With timestamp-query: the median of
        `repeats` dispatches' GPU times (host timing lost an 8 us GEMV in the host's jitter,
        and the tuner picked variants 2x slower on an H100). Without: (time of 1 + n
        dispatches) - (time of 1), over n, each ended by a 4-byte readback, n growing until
        they take ~2 ms. None where this device cannot wait synchronously (an async-only
        browser)."""
        if not self.can_run_sync:
            return None
        import time
        if self._probe is None:
            self._probe = (self.create_buffer(4, "storage"), self.create_buffer(4, "readback"),
                           self.timestamps(repeats))
        src, dst, ts = self._probe
        if ts is not None:
            if cold and self._scrub is None and not self.info.software:
                self._scrub = Copy(self.create_buffer(SCRUB_BYTES, "storage"), 0,
                                   self.create_buffer(SCRUB_BYTES, "storage"), 0, SCRUB_BYTES)
            self.submit([dispatch] * repeats, [], timestamps=ts,
                        scrub=self._scrub if cold else None)
            t = np.frombuffer(self.read_buffer(ts.readback, 0, 16 * repeats), np.uint64)
            if not quantized(t):
                spans = (t[1::2].astype(np.int64) - t[0::2].astype(np.int64)).clip(0)
                return float(np.median(spans)) * 1e-9
            # a browser's quantized timestamps (Dawn and Chrome clear their low bits, 65.5 us
            # steps, unless developer features are on): short kernels read 0, so time on the host

        def run(n: int) -> float:
            t = time.perf_counter()
            self.submit([dispatch] * n, [Copy(src, 0, dst, 0, 4)])
            self.read_buffer(dst, 0, 4)
            return time.perf_counter() - t
        run(1)
        one = min(run(1) for _ in range(3))
        n = 4
        while True:
            spent = max(min(run(1 + n) for _ in range(2)) - one, 0.0)
            if spent >= 2e-3 or n >= 256:
                return spent / n
            n = min(256, max(2 * n, int(n * 2.5e-3 / max(spent, 1e-5))))

    def probe_subgroups(self) -> int:
        """Run a 256-thread probe kernel; return the subgroup size where every subgroup is a
        run of that many consecutive local_invocation_index values (lane = index % size) and
        subgroupAdd works, else 0. The subgroup row reductions (common/row_reduce_subgroup)
        rely on that layout, which WGSL does not promise. Native only (the browser would
        need `enable subgroups;` and an async read); needs the "subgroups" feature."""
        if "subgroups" not in self.info.features or not self.can_run_sync:
            return 0
        try:
            pipe = self.pipeline(SUBGROUP_PROBE)
        except GPUError:
            return 0
        out, back = self.create_buffer(4096, "storage"), self.create_buffer(4096, "readback")
        try:
            self.submit([Dispatch(pipe, self.bind_group(pipe, [(out, 0, 4096)]), (1, 1, 1))],
                        [Copy(out, 0, back, 0, 4096)])
            a = np.frombuffer(self.read_buffer(back, 0, 4096), np.uint32).reshape(256, 4)
        finally:
            self.release([out, back])
        size = int(a[0, 0])
        lid = np.arange(256)
        ok = (size >= 1 and 256 % size == 0 and bool((a[:, 0] == size).all())
              and bool((a[:, 1] == lid % size).all())
              and bool((a[:, 2] == lid - lid % size).all()) and bool((a[:, 3] == size).all()))
        return size if ok else 0

    def staging(self, nbytes: int) -> Any:
        """Return a pooled readback buffer of at least nbytes (sizes are powers of two)."""
        size = 1 << max(8, (max(nbytes, 1) - 1).bit_length())
        if size not in self._staging:
            self._staging[size] = self.create_buffer(size, "readback")
        return self._staging[size]

    @property
    def can_run_sync(self) -> bool:
        """True where the sync `read_buffer` can wait (native; JSPI in the browser)."""
        return True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.info.name!r} ({self.info.backend})>"
