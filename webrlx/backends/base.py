"""The Backend contract shared by every GPU backend, plus DeviceInfo and the pipeline cache.

A compiled run costs: write changed inputs, one submit of one encoder, one readback of the
requested outputs. Nothing is created per run; `stats` counts creations so tests can check it.
"""
from __future__ import annotations

import abc
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np


class GPUError(RuntimeError):
    """The device rejected something (a shader, a pipeline, a command) or was lost."""


@dataclass
class DeviceInfo:
    """What a device is and what it can do; kernels read limits from here, never assume them."""
    name: str                      # adapter name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
    backend: str                   # "wgpu (Vulkan)", "navigator.gpu", "reference"
    limits: dict[str, int] = field(default_factory=dict)   # WebGPU names, dashed
    features: frozenset[str] = frozenset()   # "shader-f16", "subgroups", "timestamp-query"

    def limit(self, name: str, default: int = 0) -> int:
        return int(self.limits.get(name, default))

    @property
    def max_workgroup_invocations(self) -> int:
        return self.limit("max-compute-invocations-per-workgroup", 256)

    @property
    def storage_alignment(self) -> int:
        return self.limit("min-storage-buffer-offset-alignment", 256)

    @property
    def uniform_alignment(self) -> int:
        return self.limit("min-uniform-buffer-offset-alignment", 256)

    @property
    def max_binding_size(self) -> int:
        return min(self.limit("max-storage-buffer-binding-size", 1 << 27),
                   self.limit("max-buffer-size", 1 << 28))

    @property
    def has_f16(self) -> bool:
        return "shader-f16" in self.features


# Limits webrlx asks for at device creation (up to what the adapter offers).
WANTED_LIMITS = ("max-storage-buffer-binding-size", "max-buffer-size",
                 "max-storage-buffers-per-shader-stage", "max-compute-workgroup-storage-size",
                 "max-compute-invocations-per-workgroup", "max-compute-workgroup-size-x",
                 "max-compute-workgroup-size-y")
# Optional features webrlx uses when the adapter has them (WebGPU spellings).
WANTED_FEATURES = ("shader-f16", "subgroups", "timestamp-query")


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


class Backend(abc.ABC):
    """A WebGPU device: buffers, cached pipelines, bind groups, one submit per run."""

    name: str
    info: DeviceInfo

    def __init__(self) -> None:
        self.stats: Counter[str] = Counter()   # buffers, pipelines, bind_groups, submits
        self._pipelines: dict[tuple, Any] = {}
        self._staging: dict[int, Any] = {}
        self._probe: tuple[Any, Any] | None = None    # (storage, readback) for timing

    # -- the contract -------------------------------------------------------------------
    @abc.abstractmethod
    def create_buffer(self, nbytes: int, usage: str) -> Any:
        """Create a buffer; usage is "storage", "uniform" or "readback" (MAP_READ staging)."""

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
    def submit(self, dispatches: Sequence[Dispatch], copies: Sequence[Copy] = (),
               before: Sequence[Copy] = ()) -> None:
        """Encode the `before` copies, all dispatches in one compute pass, then the copies;
        submit once."""

    @abc.abstractmethod
    def read_buffer(self, buf: Any, offset: int, nbytes: int) -> memoryview:
        """Map a readback buffer, copy nbytes out, unmap (waits for the GPU)."""

    @abc.abstractmethod
    async def read_buffer_async(self, buf: Any, offset: int, nbytes: int) -> memoryview:
        """Async form of read_buffer: the only form that works everywhere in the browser."""

    # -- shared ---------------------------------------------------------------------------
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

    def time_dispatch(self, dispatch: Dispatch, repeats: int = 4) -> float | None:
        """Seconds one dispatch takes, for the autotuner: (time of 1 + repeats dispatches) -
        (time of 1), each ended by a 4-byte readback. None where this device cannot wait
        synchronously (an async-only browser)."""
        if not self.can_run_sync:
            return None
        import time
        if self._probe is None:
            self._probe = (self.create_buffer(4, "storage"), self.create_buffer(4, "readback"))
        src, dst = self._probe

        def run(n: int) -> float:
            t = time.perf_counter()
            self.submit([dispatch] * n, [Copy(src, 0, dst, 0, 4)])
            self.read_buffer(dst, 0, 4)
            return time.perf_counter() - t
        run(1)
        one = min(run(1) for _ in range(3))
        many = min(run(1 + repeats) for _ in range(2))
        return max(many - one, 0.0) / repeats

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
