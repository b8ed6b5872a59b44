"""DeviceTensor: a run's output kept on the device. Feed it back as an input with no CPU round
trip (a KV cache, a recurrent state), or read it with .numpy() / await .numpy_async()."""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import dtype as dt


class StaleTensorError(RuntimeError):
    """A DeviceTensor whose device memory a later run has reused."""


class HandleSlot:
    """A device buffer that holds one output between runs; `generation` counts its writes."""

    def __init__(self, buf: Any, nbytes: int) -> None:
        self.buf = buf
        self.nbytes = nbytes
        self.generation = 0


class DeviceTensor:
    """An output that stayed on the device. Valid until the same executable has run twice
    more (outputs alternate between two slots); using it later raises StaleTensorError."""

    def __init__(self, backend: Any, slot: HandleSlot | None, shape: tuple[int, ...],
                 dtype: dt.DType, storage: np.dtype, array: np.ndarray | None = None) -> None:
        self.backend = backend
        self.slot = slot
        self.generation = slot.generation if slot else 0
        self.shape = shape
        self.dtype = dtype
        self.storage = storage          # numpy dtype of the device bytes
        self.array = array              # the value itself on the reference device

    def __repr__(self) -> str:
        return f"DeviceTensor(shape={self.shape}, dtype={self.dtype})"

    def check(self) -> None:
        if self.slot is not None and self.slot.generation != self.generation:
            raise StaleTensorError("DeviceTensor: a later run reused this output's memory "
                                   "(an output stays valid for one more run); read it or feed "
                                   "it back before running the executable twice more")

    def _unpack(self, raw: memoryview) -> np.ndarray:
        n = int(np.prod(self.shape))
        arr = np.frombuffer(raw, np.uint8)[:n * self.storage.itemsize].view(self.storage)
        return arr.reshape(self.shape).astype(self.dtype.np_dtype)

    def _copy_out(self) -> tuple[Any, int]:
        """(staging buffer, bytes) of a copy of the slot's value."""
        from ..backends.base import Copy
        self.check()
        assert self.slot is not None        # a DeviceTensor holds an array or a slot
        nbytes = self.slot.nbytes
        staging = self.backend.staging(nbytes)
        self.backend.submit([], [Copy(self.slot.buf, 0, staging, 0, nbytes)])
        return staging, nbytes

    def numpy(self) -> np.ndarray:
        """Read the value back (waits for the device)."""
        if self.array is not None:
            return self.array.copy()
        with self.backend.lock:
            staging, nbytes = self._copy_out()
            return self._unpack(self.backend.read_buffer(staging, 0, nbytes))

    async def numpy_async(self) -> np.ndarray:
        """Async form of numpy() (the browser's form)."""
        if self.array is not None:
            return self.array.copy()
        staging, nbytes = self._copy_out()
        return self._unpack(await self.backend.read_buffer_async(staging, 0, nbytes))
