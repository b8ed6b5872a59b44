"""Memory plan: liveness of temp buffers over the call list -> offsets in one or more arenas.

Greedy by size (largest first, lowest free offset among buffers whose lifetimes overlap),
offsets aligned to the device's minStorageBufferOffsetAlignment. A buffer never straddles a
multiple of `capacity` (the largest binding), so arena k is simply [k*capacity, (k+1)*capacity).
A temp bigger than `capacity` (kernels bind windows of it, split.py) gets an arena of its own.
"""
from __future__ import annotations

from .program import Program


class BindingLimitError(MemoryError):
    """A kernel would bind more bytes than the device allows (maxStorageBufferBindingSize);
    raised while a plan is built, before anything is created or submitted."""


def check_binding_limits(program: Program, limit: int, buffer_limit: int) -> None:
    """Raise BindingLimitError naming the first kernel (its op, node and binding) that binds
    over `limit` bytes, or a tensor over `buffer_limit` (maxBufferSize).

    Elementwise kernels, row ops, matmuls and gathers bind windows of a bigger tensor
    (split.py); a kernel that cannot split binds it whole and lands here."""
    for call in program.calls:
        for i, b in enumerate(call.buffers):
            if call.bound_bytes(i) > limit:
                names = call.binding_names
                binding = names[i] if i < len(names) else f"binding {i}"
                label = program.labels.get(call.node, f"node {call.node}")
                raise BindingLimitError(
                    f"{call.name} (node {call.node}: {label}): its {binding!r} tensor needs "
                    f"{b.nbytes} bytes, over this device's maxStorageBufferBindingSize of "
                    f"{limit} bytes, and this kernel cannot split it over several bindings "
                    f"(elementwise ops, reductions, norms, softmax, matmuls and gathers can): "
                    f"use smaller pieces (e.g. a smaller batch)")
    for b in program.temps():
        if b.nbytes > buffer_limit:
            raise BindingLimitError(f"an intermediate tensor needs {b.nbytes} bytes, over "
                                    f"this device's maxBufferSize of {buffer_limit} bytes")
    for name, (b, shape, _) in program.inputs.items():
        if b.nbytes > buffer_limit:
            raise BindingLimitError(f"input {name!r} {shape} needs {b.nbytes} bytes, over this "
                                    f"device's maxBufferSize of {buffer_limit} bytes")
    for k, o in enumerate(program.outputs):
        if o.buf.nbytes > buffer_limit:
            raise BindingLimitError(f"output {k} {o.shape} needs {o.buf.nbytes} bytes, over "
                                    f"this device's maxBufferSize of {buffer_limit} bytes")


def lifetimes(program: Program) -> dict[int, tuple[int, int]]:
    """Return temp buffer id -> (first call writing it, last call reading it) in call indices."""
    life: dict[int, list[int]] = {}
    for i, call in enumerate(program.calls):
        for b in call.buffers:
            if b.kind == "temp":
                span = life.setdefault(b.id, [i, i])
                span[1] = i
    end = len(program.calls)
    for o in program.outputs:        # outputs stay alive until they are read back
        if o.buf.kind == "temp" and o.buf.id in life:
            life[o.buf.id][1] = end
    return {k: (v[0], v[1]) for k, v in life.items()}


def peak_live_bytes(program: Program, align: int) -> int:
    """Return the largest total (aligned) size of temps alive at once: a lower bound on arenas."""
    life = lifetimes(program)
    sizes = {b.id: _aligned(b.nbytes, align) for b in program.temps()}
    events = [0] * (len(program.calls) + 2)
    for bid, (a, z) in life.items():
        events[a] += sizes[bid]
        events[z + 1] -= sizes[bid]
    peak = cur = 0
    for e in events:
        cur += e
        peak = max(peak, cur)
    return peak


def _aligned(n: int, align: int) -> int:
    return max(-(-n // align) * align, align)


def plan_memory(program: Program, align: int, capacity: int) -> None:
    """Assign program.offsets (temp id -> (arena, offset)) and program.arena_sizes."""
    life = lifetimes(program)
    for b in program.temps():        # no call touches it (a zero-size output): live throughout
        life.setdefault(b.id, (0, len(program.calls)))
    temps = [b for b in program.temps() if _aligned(b.nbytes, align) <= capacity]
    big = [b for b in program.temps() if _aligned(b.nbytes, align) > capacity]
    placed: list[tuple[int, int, int, int]] = []   # (offset, end, first, last)
    offsets: dict[int, int] = {}
    for buf in sorted(temps, key=lambda b: (-b.nbytes, b.id)):
        size = _aligned(buf.nbytes, align)
        first, last = life[buf.id]
        clashes = sorted((o, e) for o, e, f, la in placed if f <= last and first <= la)
        off = 0
        for o, e in clashes:
            off = _fit(off, size, capacity)
            if off + size <= o:
                break
            off = max(off, e)
        off = _fit(off, size, capacity)
        offsets[buf.id] = off
        placed.append((off, off + size, first, last))
    program.offsets = {bid: (off // capacity, off % capacity) for bid, off in offsets.items()}
    sizes: dict[int, int] = {}
    for buf in temps:
        arena, local = divmod(offsets[buf.id], capacity)
        sizes[arena] = max(sizes.get(arena, 0), local + _aligned(buf.nbytes, align))
    program.arena_sizes = [sizes.get(i, 0) for i in range(max(sizes, default=-1) + 1)]
    for buf in big:                  # bound only through windows: an arena of its own
        program.offsets[buf.id] = (len(program.arena_sizes), 0)
        program.arena_sizes.append(_aligned(buf.nbytes, align))


def _fit(off: int, size: int, capacity: int) -> int:
    """Move off to the next arena when [off, off+size) would cross an arena boundary."""
    if off // capacity != (off + size - 1) // capacity:
        return (off // capacity + 1) * capacity
    return off
