"""Engines: how an Executable runs on each kind of device, behind one interface.

GpuEngine compiles one Plan per symbol binding and runs it with one submit; ReferenceEngine
interprets the graph in numpy. Both take checked feeds and return Steps (see steps.py), so the
Executable has one code path for every device, sync or async.
"""
from __future__ import annotations

import time
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import dtype as dt
from ..backends.base import Copy
from ..compiler import int8_scope
from ..compiler.lower import lower
from ..compiler.memory import BindingLimitError
from ..compiler.simplify import bind_shapes, live_nodes
from ..graph import Graph
from ..ops import UPDATES_INPUT
from ..reference import interpret
from ..shape import bind
from .device_tensor import DeviceTensor
from .feeds import InputError
from .plan import Plan, write_padded
from .steps import ReadRequest, Steps, no_reads

DEFAULT_MAX_PLANS = 16   # compiled plans an engine keeps (LRU); each holds its own memory


@dataclass
class PendingRead:
    """A state's value on its way back (start_read): the staging buffer its copy went to, or
    the value itself where nothing had to be copied (no buffer yet, the reference device)."""
    node: Any
    staging: Any
    nbytes: int
    value: np.ndarray | None = None


class GpuEngine:
    """Params in device buffers, a Plan per binding, a run = uploads + one submit + a read."""

    def __init__(self, graph: Graph, outputs: list[int], fuse: bool, backend: Any) -> None:
        self.graph = graph
        self.outputs = outputs
        self.fuse = fuse
        self.backend = backend
        self.param_bufs: dict[str, Any] = {}
        self.state_bufs: dict[str, Any] = {}
        self.plans: OrderedDict[tuple, Plan] = OrderedDict()   # least recently used first
        self.max_plans = DEFAULT_MAX_PLANS     # set by the Executable (compile(max_plans=))
        self.int8: frozenset[str] = frozenset()  # int8 paths asked for (compile(int8=))
        # inputs an in-place op writes: their device copy differs from the fed array after
        # a run, so they are uploaded every time
        self.written_inputs = {graph.written_source(n.id).name for n in graph.nodes
                               if n.op in UPDATES_INPUT and
                               graph.written_source(n.id).op == "input"}
        self.last_plan: Plan | None = None
        self._ahead: dict[str, list[Any]] = {}    # start_read's free staging buffers per state

    def set_param(self, name: str, arr: np.ndarray) -> None:
        sd = dt.storage_np(self.graph.nodes[self.graph.params[name]].dtype,
                           self.backend.info.has_f16)
        if name not in self.param_bufs:
            nbytes = arr.size * sd.itemsize
            limit = self.backend.info.max_buffer_size
            if nbytes > limit:
                raise BindingLimitError(f"set_params(): param {name!r} {arr.shape} needs "
                                        f"{nbytes} bytes, over this device's maxBufferSize of "
                                        f"{limit} bytes")
            self.param_bufs[name] = self.backend.create_buffer(nbytes, "storage")
        write_padded(self.backend, self.param_bufs[name], arr.astype(sd, copy=False))

    def plan(self, env: Mapping[str, int]) -> Plan:
        """Return the Plan for a symbol binding, compiling it on first use; past max_plans
        the least recently used plan is freed (its device memory released)."""
        key = tuple(sorted(env.items()))
        plan = self.plans.get(key)
        if plan is not None:
            self.plans.move_to_end(key)
        else:
            t0 = time.perf_counter()
            with int8_scope.scope(self.int8):
                program = lower(self.graph, self.outputs, env, self.backend.info, self.fuse)
            lower_s = time.perf_counter() - t0
            for name, buf in program.states.items():
                if name not in self.state_bufs:
                    self.state_bufs[name] = self.backend.create_buffer(buf.nbytes, "storage")
                    self.reset_state(name)
            plan = Plan(program, self.backend, self.param_bufs, self.state_bufs)
            plan.timings["lower_s"] = lower_s
            while len(self.plans) >= self.max_plans:   # (a plan that fails to build evicts none)
                _, old = self.plans.popitem(last=False)
                old.release()
            self.plans[key] = plan
        return plan

    def reset_state(self, name: str) -> None:
        """Zero a state's device buffer (it is created with the first plan that uses it)."""
        if name in self.state_bufs:
            node = self.graph.nodes[self.graph.states[name]]
            sd = dt.storage_np(node.dtype, self.backend.info.has_f16)
            write_padded(self.backend, self.state_bufs[name],
                         np.zeros(int(np.prod(bind(node.shape, {}))), sd))

    def read_state(self, name: str) -> Steps[np.ndarray]:
        node = self.graph.nodes[self.graph.states[name]]
        return (yield from self._read(node, self.state_bufs.get(name)))

    def read_param(self, name: str) -> Steps[np.ndarray]:
        """A param's current device value (assign may have updated it: training)."""
        return (yield from self._read(self.graph.nodes[self.graph.params[name]],
                                      self.param_bufs.get(name)))

    def _read(self, node: Any, buf: Any) -> Steps[np.ndarray]:
        if buf is None:
            return (yield from no_reads(self._decode(node, None)))
        nbytes = self._nbytes(node)
        staging = self.backend.staging(nbytes)
        self.backend.submit([], [Copy(buf, 0, staging, 0, nbytes)])
        return self._decode(node, (yield ReadRequest(self.backend, staging, 0, nbytes)))

    def start_read(self, name: str) -> PendingRead:
        """Copy a state into a staging buffer of its own and submit the copy now; nothing
        waits. finish_read returns the state as it was here, after more work was queued
        behind the copy: a readback that does not drain the queue (a decode loop reads its
        tokens a few steps late and the GPU never idles for it). Each pending read has a
        staging buffer of its own, back in a pool once the PendingRead is dropped."""
        node = self.graph.nodes[self.graph.states[name]]
        buf = self.state_bufs.get(name)
        if buf is None:
            return PendingRead(node, None, 0, self._decode(node, None))
        nbytes = self._nbytes(node)
        free = self._ahead.setdefault(name, [])
        staging = free.pop() if free else self.backend.create_buffer(nbytes, "readback")
        self.backend.submit([], [Copy(buf, 0, staging, 0, nbytes)])
        self.backend.flush()                    # a deferring backend would hold the copy
        pending = PendingRead(node, staging, nbytes)
        weakref.finalize(pending, free.append, staging)   # back to the pool when dropped
        return pending

    def finish_read(self, pending: PendingRead) -> Steps[np.ndarray]:
        """The state a start_read copied (waits for that copy only, not for what follows)."""
        if pending.staging is None:
            assert pending.value is not None    # the value itself came with the pending read
            return (yield from no_reads(pending.value))
        raw = yield ReadRequest(self.backend, pending.staging, 0, pending.nbytes)
        return self._decode(pending.node, raw)

    def _nbytes(self, node: Any) -> int:
        sd = dt.storage_np(node.dtype, self.backend.info.has_f16)
        return max(4, -(-int(np.prod([int(s) for s in node.shape])) * sd.itemsize // 4) * 4)

    def _decode(self, node: Any, raw: Any) -> np.ndarray:
        """A node's value from its read-back bytes (zeros where it has no buffer yet)."""
        shape = tuple(int(s) for s in node.shape)
        if raw is None:
            return np.zeros(shape, node.dtype.np_dtype)
        sd = dt.storage_np(node.dtype, self.backend.info.has_f16)
        n = int(np.prod(shape))
        return np.frombuffer(raw, np.uint8)[:n * sd.itemsize].view(sd).reshape(shape).astype(
            node.dtype.np_dtype)

    def prepare(self, arrays: Mapping[str, Any], env: Mapping[str, int]
                ) -> tuple[Plan, list[Copy]]:
        """Upload changed inputs; return the plan and the copies that feed DeviceTensors."""
        plan = self.plan(env)
        before = []
        for name, arr in arrays.items():
            if name not in plan.inputs:
                continue
            if isinstance(arr, DeviceTensor):      # on the device already: copy, no round trip
                if arr.backend is not plan.backend:
                    raise InputError(f"run(): input {name!r} is a DeviceTensor of another device")
                assert arr.slot is not None       # a GPU run's DeviceTensor holds a slot
                before.append(Copy(arr.slot.buf, 0, plan.inputs[name], 0, arr.slot.nbytes))
                plan.last_fed.pop(name, None)
            else:
                plan.upload(name, arr)
                if name in self.written_inputs:
                    plan.last_fed.pop(name, None)
        self.last_plan = plan
        return plan, before

    def run(self, arrays: Mapping[str, Any], env: Mapping[str, int], keep: bool,
            repeat: int = 1, carry: Mapping[str, int] | None = None) -> Steps[list[Any]]:
        """Run the plan `repeat` times in one submit, output carry[name] feeding input name
        from one time to the next (the Executable has checked both)."""
        plan, before = self.prepare(arrays, env)
        between = plan.carry_copies(dict(carry or {})) if repeat > 1 else []
        if keep:
            return plan.submit_keep(before, repeat, between)
        plan.submit(before, repeat, between)
        raw = yield ReadRequest(plan.backend, plan.staging, 0, plan.readback_bytes)
        return plan.unpack(raw)


class ReferenceEngine:
    """The graph interpreted in numpy; kept outputs are DeviceTensors holding arrays."""

    def __init__(self, graph: Graph, outputs: list[int], fuse: bool, device: Any) -> None:
        self.graph = graph
        self.outputs = outputs
        self.device = device
        self.params: dict[str, np.ndarray] = {}
        self.states: dict[str, np.ndarray] = {}
        self.last_plan = None

    def set_param(self, name: str, arr: np.ndarray) -> None:
        self.params[name] = arr

    def plan(self, env: Mapping[str, int]) -> Any:
        raise RuntimeError("the reference device interprets the graph and compiles no kernels "
                           "(no plan, schedule or dump); compile for a GPU device to see them")

    def reset_state(self, name: str) -> None:
        self.states.pop(name, None)

    def state(self, name: str) -> np.ndarray:
        node = self.graph.nodes[self.graph.states[name]]
        if name not in self.states:
            self.states[name] = np.zeros(tuple(int(s) for s in node.shape), node.dtype.np_dtype)
        return self.states[name]

    def read_state(self, name: str) -> Steps[np.ndarray]:
        return (yield from no_reads(self.state(name).copy()))

    def start_read(self, name: str) -> PendingRead:
        return PendingRead(self.graph.nodes[self.graph.states[name]], None, 0,
                           self.state(name).copy())

    def finish_read(self, pending: PendingRead) -> Steps[np.ndarray]:
        assert pending.value is not None        # start_read here always holds the value
        return (yield from no_reads(pending.value))

    def read_param(self, name: str) -> Steps[np.ndarray]:
        return (yield from no_reads(np.array(self.params[name])))

    def values(self, arrays: Mapping[str, Any], env: Mapping[str, int], keep_all: bool = False
               ) -> Any:
        """Interpret the graph: the outputs in order, or (keep_all) every node's value.
        States updated in place by an op (ops.UPDATES_INPUT) take that op's result."""
        g = self.graph
        effects = g.effects()
        shapes = bind_shapes(g, env, live_nodes(g, self.outputs + effects))
        sources: dict[int, Any] = {g.inputs[n]: a.array if isinstance(a, DeviceTensor) else a
                                   for n, a in arrays.items()}
        sources.update({g.params[n]: a for n, a in self.params.items()})
        sources.update({g.states[n]: self.state(n) for n in g.states})
        sources.update({n.id: n.value for n in g.nodes if n.op == "constant"})
        values = interpret(g, shapes, sources, self.outputs + effects, keep_all=True)
        for nid in effects:                  # write updated states back, in graph order
            root = g.written_source(nid)
            if root.op == "state":
                self.states[root.source_name] = values[nid]
            elif root.op == "param":          # assign (an optimizer's update)
                self.params[root.source_name] = values[nid]
        return values if keep_all else [values[i] for i in self.outputs]

    def run(self, arrays: Mapping[str, Any], env: Mapping[str, int], keep: bool,
            repeat: int = 1, carry: Mapping[str, int] | None = None) -> Steps[list[Any]]:
        arrays = dict(arrays)
        outs = self.values(arrays, env)
        for _ in range(repeat - 1):
            arrays.update({name: outs[i] for name, i in (carry or {}).items()})
            outs = self.values(arrays, env)
        if keep:
            outs = [DeviceTensor(self.device, None, o.shape, dt.as_dtype(o.dtype), o.dtype, o)
                    for o in outs]
        return (yield from no_reads(outs))


# device name -> engine; every other device is a GPU backend
ENGINES = {"reference": ReferenceEngine}


def engine_for(graph: Graph, outputs: list[int], fuse: bool, device: Any) -> Any:
    """Return the engine that runs graph on device."""
    return ENGINES.get(device.name, GpuEngine)(graph, outputs, fuse, device)
