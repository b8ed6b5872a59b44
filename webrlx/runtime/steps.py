"""One body for sync and async work: a generator yields the readbacks it needs (ReadRequest),
and `drive` (sync) or `drive_async` (await) fulfils them. run / run_async, the debug tools and
their async forms all share their logic this way."""
from __future__ import annotations

import asyncio
import weakref
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass
class ReadRequest:
    """Read nbytes at offset of a MAP_READ buffer of backend (the GPU's work ends first)."""
    backend: Any
    buf: Any
    offset: int
    nbytes: int


Steps = Generator[ReadRequest, memoryview, T]


def drive(steps: Steps[T], lock: Any) -> T:
    """Run steps to completion, waiting for each readback synchronously, holding the device's
    lock throughout (another thread's run cannot touch the same staging buffers)."""
    with lock:
        try:
            req = next(steps)
            while True:
                req = steps.send(req.backend.read_buffer(req.buf, req.offset, req.nbytes))
        except StopIteration as done:
            return done.value


_async_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _async_lock(device: Any) -> asyncio.Lock:
    """One asyncio.Lock per (device, event loop): concurrent run_async calls serialize."""
    per_loop = _async_locks.setdefault(device, {})
    loop = asyncio.get_running_loop()
    if loop not in per_loop:
        per_loop.clear()                     # an earlier loop is finished (asyncio.run)
        per_loop[loop] = asyncio.Lock()
    return per_loop[loop]


async def drive_async(steps: Steps[T], device: Any) -> T:
    """Run steps to completion, awaiting each readback (works everywhere, browsers included);
    runs on one device take turns, so their readbacks never overlap."""
    async with _async_lock(device):
        try:
            req = next(steps)
            while True:
                raw = await req.backend.read_buffer_async(req.buf, req.offset, req.nbytes)
                req = steps.send(raw)
        except StopIteration as done:
            return done.value


def no_reads(value: T) -> Steps[T]:
    """Steps that need no readback and return value."""
    return value
    yield  # unreachable: makes this a generator
