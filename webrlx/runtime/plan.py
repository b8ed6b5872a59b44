"""Plan: a Program made real on one backend. Every buffer, pipeline, uniform and bind group is
created here, once; a run is then: write changed inputs, one submit, one readback."""
from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any

import numpy as np

from ..backends.base import Backend, Copy, Dispatch
from ..compiler.memory import check_binding_limits, plan_memory
from ..compiler.program import Program
from ..dtype import storage_np
from ..kernels import read_only_bindings, writable
from . import autotune
from .device_tensor import DeviceTensor, HandleSlot

UNIFORM_WORDS_ALIGN = 4   # a uniform struct's size is a multiple of 16 bytes
# A call that binds a state (a KV cache that the fused GEMVs write and attention reads) is
# timed with each state binding swapped for a scratch buffer of the binding's size: its trial
# runs must not write stale rows into a live cache. Before 2026-11-29 such calls were never
# timed, so q/k/v's GEMV (decode) and tensor-core kernel (prefill) always ran the compiler's
# default. Bindings over STATE_SCRATCH_MAX bytes are still not timed (the table's or the
# default pick): tuning never doubles a big cache. TIME_STATE_CALLS: "gpu" on hardware
# adapters only (on lavapipe, timing them added 125 s to three model test files, 391 -> 516 s,
# where the software defaults are measured choices: lower_quant.gemv_shape), "all", or "off"
# (the old rule).
TIME_STATE_CALLS = "gpu"
STATE_SCRATCH_MAX = 64 << 20


def _no_timing(variant: Any) -> None:
    """An autotune timer that measures nothing (choose() then takes a table's or the default
    pick)."""
    return None


def _aliased_reads(source: str, names: tuple[str, ...],
                   entries: list[tuple[Any, int, int]]) -> frozenset[str]:
    """The read-only bindings of source (kernels.read_only_storage) whose device buffer is
    also bound writable in the same dispatch: windows of one arena, an input and the output.
    WebGPU forbids a read-only and a writable use of one buffer in a dispatch, so these are
    declared read_write again for this dispatch (kernels.writable)."""
    ro = read_only_bindings(source)
    if not ro:
        return frozenset()
    written = {id(e[0]) for n, e in zip(names, entries) if n not in ro}
    return frozenset(n for n, e in zip(names, entries) if n in ro and id(e[0]) in written)


def _for_dispatch(v: Any, names: tuple[str, ...], entries: list[tuple[Any, int, int]]) -> Any:
    """Variant v with its source fit for these bind group entries (_aliased_reads)."""
    fix = _aliased_reads(v.source, names, entries)
    return dataclasses.replace(v, source=writable(v.source, fix)) if fix else v


def _round4(n: int) -> int:
    return max(4, -(-n // 4) * 4)


class Plan:
    """Device objects for one Program; `params` and `states` map names to the device buffers
    every plan of an executable shares."""

    def __init__(self, program: Program, backend: Backend, params: dict[str, Any],
                 states: dict[str, Any] | None = None) -> None:
        t_build = time.perf_counter()
        info = backend.info
        self.program = program
        self.backend = backend
        self.f16 = info.has_f16
        align = max(info.storage_alignment, 4)
        capacity = info.max_binding_size // align * align
        check_binding_limits(program, info.max_binding_size, info.max_buffer_size)
        plan_memory(program, align, capacity)
        arenas = [backend.create_buffer(n, "storage") for n in program.arena_sizes]
        self.owned: list[Any] = list(arenas)      # buffers this plan alone uses (release())
        self.where: dict[int, tuple[Any, int]] = {}
        for b in program.temps():
            arena, off = program.offsets[b.id]
            self.where[b.id] = (arenas[arena], off)
        self.inputs: dict[str, Any] = {}
        self.last_fed: dict[str, np.ndarray] = {}
        for name, (b, _, _) in program.inputs.items():
            self.inputs[name] = backend.create_buffer(b.nbytes, "storage")
            self.owned.append(self.inputs[name])
            self.where[b.id] = (self.inputs[name], 0)
        for name, b in program.params.items():
            self.where[b.id] = (params[name], 0)
        for name, b in program.states.items():
            self.where[b.id] = ((states or {})[name], 0)
        for b in program.consts:
            gb = backend.create_buffer(b.nbytes, "storage")
            self.owned.append(gb)
            assert b.value is not None           # a const Buf carries its bytes
            write_padded(backend, gb, b.value)
            self.where[b.id] = (gb, 0)
        self.ran: list[str] = []       # the variant each call runs (the autotuner's pick)
        # seconds spent building this plan: lower (set by the engine), pipelines (compiling
        # them), tune (timing variants the autotuner had no pick for), build (all of Plan())
        self.timings: dict[str, float] = {"lower_s": 0.0, "pipelines_s": 0.0, "tune_s": 0.0}
        self.dispatches = self._build_dispatches(info.uniform_alignment)
        self._build_readback(align)
        self.timings["build_s"] = time.perf_counter() - t_build
        self.slots: list[list[HandleSlot]] = []   # two per output, made on first use
        self.keep_copies: list[list[Copy]] = []   # per slot turn: the outputs into the slots
        self.keep_storage: list[np.dtype] = []    # the outputs' storage dtypes
        self.turn = 0

    def _build_dispatches(self, ualign: int) -> list[Dispatch]:
        backend, calls = self.backend, self.program.calls
        blocks, offsets, total = [], [], 0
        for c in calls:
            words = np.zeros(-(-max(len(c.params), 1) // UNIFORM_WORDS_ALIGN)
                             * UNIFORM_WORDS_ALIGN, np.uint32)
            words[:len(c.params)] = c.params
            offsets.append(total)
            blocks.append(words)
            total += -(-words.nbytes // ualign) * ualign
        dispatches: list[Dispatch] = []
        if not calls:
            return dispatches
        self.uniform = backend.create_buffer(total, "uniform")
        self.owned.append(self.uniform)
        data = np.zeros(total // 4, np.uint32)
        for off, words in zip(offsets, blocks):
            data[off // 4: off // 4 + len(words)] = words
        backend.write_buffer(self.uniform, 0, data)
        # at least 16 bytes: a vec4 array binding of an empty tensor needs one element
        call_entries = [[self._entry(c, i) for i in range(len(c.buffers))] for c in calls]
        call_names = [c.binding_names or tuple(f"b{k}" for k in range(len(c.buffers)))
                      for c in calls]
        # compile every pipeline this plan needs at once (the browser compiles them in
        # parallel): the picked variant of each call, or all of a call's variants it will time
        picks = [autotune.known(backend.info.tune_name, c) for c in calls]
        t0 = time.perf_counter()
        backend.prepare_pipelines([(_for_dispatch(v, names, e).source, "main", v.overrides)
                                   for c, pick, names, e in zip(calls, picks, call_names,
                                                                call_entries)
                                   for v in ([pick] if pick else autotune.options(c))])
        self.timings["pipelines_s"] = time.perf_counter() - t0
        state_ids = {b.id for b in self.program.states.values()}
        scratch: list[tuple[Any, int]] = []     # stand-ins for states: (buffer, bytes)
        for c, off, words, pick, names, bound in zip(calls, offsets, blocks, picks,
                                                     call_names, call_entries):
            entries = bound + [(self.uniform, off, words.nbytes)]
            if pick is None:
                t0 = time.perf_counter()
                # quantized kernels stream a model's weights: timed with cold caches; a call
                # that binds a state, on stand-ins for the states (TIME_STATE_CALLS)
                trial = self._trial_entries(c, bound, state_ids, scratch)
                timer = _no_timing if trial is None else autotune.timer(
                    backend, trial + entries[len(bound):], cold=c.shader.startswith("quant/"),
                    fit=functools.partial(_for_dispatch, names=names, entries=trial))
                pick = autotune.choose(backend.info.tune_name, c, timer)
                self.timings["tune_s"] += time.perf_counter() - t0
            v = _for_dispatch(pick, names, bound)
            self.ran.append(v.name)
            pipe = backend.pipeline(v.source, "main", v.overrides)
            dispatches.append(Dispatch(pipe, backend.bind_group(pipe, entries), v.grid))
        if scratch:
            backend.release([buf for buf, _ in scratch])
        return dispatches

    def _trial_entries(self, c: Any, bound: list[tuple[Any, int, int]], state_ids: set[int],
                       scratch: list[tuple[Any, int]]
                       ) -> list[tuple[Any, int, int]] | None:
        """Call c's bindings for the autotuner's trial runs: `bound`, with each state binding
        swapped for a scratch buffer at least its size: one per distinct binding of the call (a
        binding bound twice stays one buffer), taken from `scratch`, the plan's pool, which
        every call reuses (so the stand-ins of a 30-layer cache are a call's few, not 60); None:
        not to be timed (a state binding over STATE_SCRATCH_MAX, or TIME_STATE_CALLS ruling
        this adapter out)."""
        rule = TIME_STATE_CALLS
        timed = rule == "all" or (rule == "gpu" and not self.backend.info.software)
        mine: dict[tuple[int, int, int], Any] = {}      # this call's binding -> its stand-in
        out = []
        for b, (buf, off, size) in zip(c.buffers, bound):
            if b.id not in state_ids:
                out.append((buf, off, size))
                continue
            if not timed or size > STATE_SCRATCH_MAX:
                return None
            key = (id(buf), off, size)
            if key not in mine:
                free = [i for i, (sb, n) in enumerate(scratch)
                        if n >= size and all(sb is not v for v in mine.values())]
                if not free:
                    scratch.append((self.backend.create_buffer(size, "storage"), size))
                    free = [len(scratch) - 1]
                mine[key] = scratch[min(free, key=lambda i: scratch[i][1])][0]
            out.append((mine[key], 0, size))
        return out

    def _entry(self, c: Any, i: int) -> tuple[Any, int, int]:
        """(buffer, offset, size) of binding i of call c: a window (split.py) or the whole."""
        buf, off = self.where[c.buffers[i].id]
        if i in c.windows:
            w_off, w_size = c.windows[i]
            return buf, off + w_off, w_size
        return buf, off, max(16, _round4(c.buffers[i].nbytes))

    def _build_readback(self, align: int) -> None:
        self.copies: list[Copy] = []
        self.out_offsets: list[int] = []
        total = 0
        for o in self.program.outputs:
            self.out_offsets.append(total)
            if o.buf.nbytes:
                src, off = self.where[o.buf.id]
                self.copies.append(Copy(src, off, None, total, _round4(o.buf.nbytes)))
            total += -(-_round4(o.buf.nbytes) // 8) * 8
        self.readback_bytes = max(total, 4)
        self.staging = self.backend.create_buffer(self.readback_bytes, "readback")
        self.owned.append(self.staging)
        for c in self.copies:
            c.dst = self.staging

    def release(self) -> None:
        """Free this plan's device memory (evicted from its executable's plan cache): its
        DeviceTensors go stale, shared params and states stay."""
        for pair in self.slots:
            for slot in pair:
                slot.generation += 1
        self.backend.release(self.owned)
        self.owned, self.dispatches, self.where = [], [], {}

    # -- per run --------------------------------------------------------------------------------
    def upload(self, name: str, arr: np.ndarray) -> None:
        """Write input `name` unless its bytes equal what the device already holds."""
        prev = self.last_fed.get(name)
        if prev is not None and prev.shape == arr.shape and prev.dtype == arr.dtype and \
                same_bytes(prev, arr):
            return
        self.backend.stats["input_uploads"] += 1
        write_padded(self.backend, self.inputs[name], arr.astype(
            storage_np(self.program.inputs[name][2], self.f16), copy=False))
        self.last_fed[name] = arr.copy()

    def carry_copies(self, carry: dict[str, int]) -> list[Copy]:
        """The copies that feed output carry[name] into input name between repeated steps
        (none where the output is that input's own buffer)."""
        copies = []
        for name, i in carry.items():
            o = self.program.outputs[i]
            src, off = self.where[o.buf.id]
            dst = self.inputs.get(name)
            if dst is None or not o.buf.nbytes or (src is dst and off == 0):
                continue
            copies.append(Copy(src, off, dst, 0, _round4(o.buf.nbytes)))
            self.last_fed.pop(name, None)   # the device now holds a step's output, not the feed
        return copies

    def submit(self, before: list[Copy], repeat: int = 1, between: list[Copy] | None = None
               ) -> None:
        """One submit: `before` copies (fed-back device tensors), dispatches (`repeat` times,
        the `between` copies before each later time), readback copies."""
        self.backend.submit(self.dispatches, self.copies, before, repeat=repeat,
                            between=between or [])

    def submit_keep(self, before: list[Copy], repeat: int = 1,
                    between: list[Copy] | None = None) -> list[DeviceTensor]:
        """One submit whose outputs stay on the device, in alternating handle slots (the last
        step's outputs, with `repeat` steps as in submit())."""
        outs = self.program.outputs
        if not self.slots:
            self.slots = [[HandleSlot(self.backend.create_buffer(_round4(o.buf.nbytes),
                                                                 "storage"),
                                      _round4(o.buf.nbytes)) for _ in range(2)] for o in outs]
            self.owned += [slot.buf for pair in self.slots for slot in pair]
            # each turn's copies into its slots, made once (a decode loop's every step)
            self.keep_copies = [[Copy(*self.where[o.buf.id], pair[turn].buf, 0,
                                      pair[turn].nbytes)
                                 for o, pair in zip(outs, self.slots) if o.buf.nbytes]
                                for turn in (0, 1)]
            self.keep_storage = [storage_np(o.dtype, self.f16) for o in outs]
        self.turn ^= 1
        for pair in self.slots:
            pair[self.turn].generation += 1
        self.backend.submit(self.dispatches, self.keep_copies[self.turn], before,
                            repeat=repeat, between=between or [])
        return [DeviceTensor(self.backend, pair[self.turn], o.shape, o.dtype, sd)
                for o, pair, sd in zip(outs, self.slots, self.keep_storage)]

    def unpack(self, raw: memoryview) -> list[np.ndarray]:
        """Split the staging bytes (a fresh, writable copy of the mapped range) into the output
        arrays (user dtypes, own memory). One output in its storage dtype is a view of `raw`,
        not a second copy (a 64 MB result: ~10 ms less per run); several outputs are copied,
        so a small one does not keep the whole readback alive."""
        data = np.frombuffer(raw, np.uint8)
        outs = []
        alone = len(self.program.outputs) == 1
        for o, off in zip(self.program.outputs, self.out_offsets):
            sd = storage_np(o.dtype, self.f16)
            n = int(np.prod(o.shape))
            arr = data[off: off + n * sd.itemsize].view(sd).reshape(o.shape)
            outs.append(arr.astype(o.dtype.np_dtype, copy=not alone))
        return outs


SMALL_FEED_BYTES = 1 << 16   # feeds compared through bytes objects (no numpy calls) below this


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two C-contiguous arrays of one shape and dtype hold the same bytes (the
    device holds bytes: -0.0 differs from 0.0, a NaN equals itself)."""
    if a.nbytes <= SMALL_FEED_BYTES:
        return a.tobytes() == b.tobytes()
    return bool(np.array_equal(a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)))


def write_padded(backend: Backend, buf: Any, arr: np.ndarray) -> None:
    """Write arr's bytes, padding to a multiple of 4 bytes (WebGPU's write granularity)."""
    raw = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    if raw.nbytes % 4:
        raw = np.concatenate([raw, np.zeros(4 - raw.nbytes % 4, np.uint8)])
    if raw.nbytes:
        backend.write_buffer(buf, 0, raw)


