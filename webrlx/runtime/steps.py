"""One body for sync and async work: a generator yields the readbacks it needs (ReadRequest),
and `drive` (sync) or `drive_async` (await) fulfils them. run / run_async, the debug tools and
their async forms all share their logic this way."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generator, TypeVar

T = TypeVar("T")


@dataclass
class ReadRequest:
    """Read nbytes at offset of a MAP_READ buffer of backend (the GPU's work ends first)."""
    backend: Any
    buf: Any
    offset: int
    nbytes: int


Steps = Generator[ReadRequest, memoryview, T]


def drive(steps: Steps[T]) -> T:
    """Run steps to completion, waiting for each readback synchronously."""
    try:
        req = next(steps)
        while True:
            req = steps.send(req.backend.read_buffer(req.buf, req.offset, req.nbytes))
    except StopIteration as done:
        return done.value


async def drive_async(steps: Steps[T]) -> T:
    """Run steps to completion, awaiting each readback (works everywhere, browsers included)."""
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
    yield  # noqa: unreachable - makes this a generator
