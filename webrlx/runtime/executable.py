"""Executable: a graph compiled for a device. Checks feeds, binds symbols, caches one Plan per
binding, and runs it (sync natively / under JSPI, async everywhere)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .. import dtype as dt
from ..backends import auto
from ..backends.reference import interpret
from ..compiler.lower import lower, storage_np
from ..graph import Graph
from ..shape import Shape, bind, symbols
from ..tensor import Tensor
from ..backends.base import Copy
from .device_tensor import DeviceTensor
from .plan import Plan, write_padded


class InputError(ValueError):
    """A feed or param does not match what the graph declared."""


def _fmt(shape: Shape) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _coerce(where: str, what: str, value: Any, shape: Shape, d: dt.DType) -> Any:
    """Return value as a C-contiguous array of dtype d (a DeviceTensor passes through after its
    shape and dtype are checked), or raise InputError saying why."""
    want = f"{_fmt(shape)} {d}"
    if isinstance(value, DeviceTensor):
        value.check()
        if value.dtype != d or len(value.shape) != len(shape) or any(
                isinstance(s, int) and s != a for s, a in zip(shape, value.shape)):
            raise InputError(f"{where}: {what} must be {want}, got a DeviceTensor "
                             f"{_fmt(value.shape)} {value.dtype}")
        return value
    arr = np.asarray(value)
    got = f"{_fmt(arr.shape)} {arr.dtype}"
    if arr.dtype != d.np_dtype:
        kind_ok = (arr.dtype.kind == "f" and d.is_float) or \
                  (arr.dtype.kind in "iu" and d.is_int) or (arr.dtype == np.bool_ == d.np_dtype)
        if not kind_ok:
            raise InputError(f"{where}: {what} must be {want}, got {got}. "
                             f"Cast it with .astype(np.{d.np_dtype.name}) if that is intended")
        if arr.dtype.kind in "iu" and arr.size:
            info = np.iinfo(d.np_dtype)
            if arr.min() < info.min or arr.max() > info.max:
                raise InputError(f"{where}: {what} must be {want}; values of {got} do not fit "
                                 f"in {d}")
        arr = arr.astype(d.np_dtype)
    if arr.ndim != len(shape) or any(isinstance(s, int) and s != a
                                     for s, a in zip(shape, arr.shape)):
        raise InputError(f"{where}: {what} must be {want}, got {got}")
    return np.asarray(arr, order="C")


class Executable:
    """A compiled graph: set params once, then run many times with numpy feeds."""

    def __init__(self, graph: Graph, outputs: Sequence[Tensor], device: Any = None,
                 fuse: bool = True) -> None:
        if not outputs:
            raise ValueError("compile(): outputs must name at least one Tensor")
        for t in outputs:
            if not isinstance(t, Tensor) or t.graph is not graph:
                raise ValueError(f"compile(): {t!r} is not a Tensor of this graph")
        graph.verify()
        self.graph = graph
        self.outputs = [t.id for t in outputs]
        self._device = device
        self.fuse = fuse
        self._params: dict[str, np.ndarray] = {}
        self._param_bufs: dict[str, Any] = {}
        self._plans: dict[tuple, Plan] = {}
        self.last_plan: Plan | None = None

    # -- device ---------------------------------------------------------------------------------
    @property
    def device(self) -> Any:
        """The device this executable runs on (the default one is acquired on first use)."""
        if self._device is None:
            self._device = auto.device()
        return self._device

    async def _device_async(self) -> Any:
        if self._device is None:
            self._device = await auto.device_async()
        return self._device

    @property
    def stats(self) -> dict[str, int]:
        """Counts of device objects created so far (buffers, pipelines, bind_groups, submits)."""
        return dict(getattr(self.device, "stats", {}))

    # -- params ---------------------------------------------------------------------------------
    def set_params(self, params: Mapping[str, Any]) -> None:
        """Upload weights by name; they stay on the device across runs.

        Args:
            params: name -> array of the declared shape (same-kind dtypes are converted).
        """
        checked = {}
        for name, value in params.items():
            if name not in self.graph.params:
                raise InputError(f"set_params(): unknown param {name!r}; params are "
                                 f"{sorted(self.graph.params)}")
            node = self.graph.nodes[self.graph.params[name]]
            checked[name] = _coerce("set_params()", f"param {name!r}", value, node.shape,
                                    node.dtype)
        self._params.update(checked)
        if self._device is not None and not isinstance(self._device, auto.ReferenceDevice):
            for name in checked:
                self._upload_param(name)

    def _upload_param(self, name: str) -> None:
        backend = self.device
        arr = self._params[name]
        sd = storage_np(self.graph.nodes[self.graph.params[name]].dtype, backend.info.has_f16)
        if name not in self._param_bufs:
            self._param_bufs[name] = backend.create_buffer(arr.size * sd.itemsize, "storage")
        write_padded(backend, self._param_bufs[name], arr.astype(sd, copy=False))

    # -- running --------------------------------------------------------------------------------
    def check_feeds(self, feeds: Mapping[str, Any]) -> tuple[dict[str, np.ndarray],
                                                              dict[str, int]]:
        """Return (arrays, symbol binding) for feeds, or raise InputError naming the input."""
        if not isinstance(feeds, Mapping):
            raise InputError(f"run(): feeds must be a dict of input name -> array, got "
                             f"{type(feeds).__name__}")
        g = self.graph
        for name in feeds:
            if name not in g.inputs:
                raise InputError(f"run(): unknown input {name!r}; inputs are {sorted(g.inputs)}")
        arrays: dict[str, np.ndarray] = {}
        env: dict[str, int] = {}
        for name, nid in g.inputs.items():
            node = g.nodes[nid]
            if name not in feeds:
                raise InputError(f"run(): missing input {name!r} ({_fmt(node.shape)} "
                                 f"{node.dtype})")
            arr = _coerce("run()", f"input {name!r}", feeds[name], node.shape, node.dtype)
            for dim, n in zip(node.shape, arr.shape):
                if isinstance(dim, str) and "*" not in dim:
                    if env.setdefault(dim, n) != n:
                        raise InputError(f"run(): input {name!r} has {dim}={n}, but an earlier "
                                         f"input bound {dim}={env[dim]}")
            for dim, n in zip(node.shape, arr.shape):
                if isinstance(dim, str) and "*" in dim and bind((dim,), env)[0] != n:
                    raise InputError(f"run(): input {name!r} dim {dim} must be "
                                     f"{bind((dim,), env)[0]}, got {n}")
            arrays[name] = arr
        missing = [n for n in g.params if n not in self._params]
        if missing:
            node = g.nodes[g.params[missing[0]]]
            raise InputError(f"run(): param {missing[0]!r} ({_fmt(node.shape)} {node.dtype}) "
                             f"was never set; call exe.set_params({{{missing[0]!r}: array}})")
        return arrays, env

    def plan(self, env: Mapping[str, int]) -> Plan:
        """Return the Plan for a symbol binding, compiling it on first use."""
        key = tuple(sorted(env.items()))
        plan = self._plans.get(key)
        if plan is None:
            backend = self.device
            for name in self._params:
                if name not in self._param_bufs:
                    self._upload_param(name)
            program = lower(self.graph, self.outputs, env, backend.info, self.fuse)
            plan = Plan(program, backend, self._param_bufs)
            self._plans[key] = plan
        return plan

    def _start(self, feeds: Mapping[str, Any], keep: bool = False
               ) -> tuple[Plan | None, dict, dict, list[DeviceTensor]]:
        arrays, env = self.check_feeds(feeds)
        if isinstance(self.device, auto.ReferenceDevice):
            arrays = {k: v.array if isinstance(v, DeviceTensor) else v for k, v in arrays.items()}
            return None, arrays, env, []
        plan = self.plan(env)
        before = []
        for name, arr in arrays.items():
            if name not in plan.inputs:
                continue
            if isinstance(arr, DeviceTensor):      # on the device already: copy, no round trip
                if arr.backend is not plan.backend:
                    raise InputError(f"run(): input {name!r} is a DeviceTensor of another device")
                before.append(Copy(arr.slot.buf, 0, plan.inputs[name], 0, arr.slot.nbytes))
                plan.last_fed.pop(name, None)
            else:
                plan.upload(name, arr)
        kept = plan.submit_keep(before) if keep else []
        if not keep:
            plan.submit(before)
        self.last_plan = plan
        return plan, arrays, env, kept

    def _kept_reference(self, arrays: dict, env: dict) -> list[DeviceTensor]:
        outs = self._interpret(arrays, env)
        return [DeviceTensor(self.device, None, o.shape, dt.as_dtype(o.dtype), o.dtype, o)
                for o in outs]

    def _interpret(self, arrays: dict[str, np.ndarray], env: dict[str, int]) -> list[np.ndarray]:
        from ..compiler.simplify import bind_shapes, live_nodes
        g = self.graph
        shapes = bind_shapes(g, env, live_nodes(g, self.outputs))
        sources = {g.inputs[n]: a for n, a in arrays.items()}
        sources.update({g.params[n]: a for n, a in self._params.items()})
        sources.update({n.id: n.value for n in g.nodes if n.op == "constant"})
        return interpret(g, shapes, sources, self.outputs)

    def run(self, feeds: Mapping[str, Any], keep_on_device: bool = False) -> list[Any]:
        """Run once and return the outputs as numpy arrays (waits for the device).

        Args:
            feeds: input name -> numpy array (or anything np.asarray accepts), or a
                DeviceTensor from an earlier run (copied on the device, no CPU round trip).
            keep_on_device: return DeviceTensors and skip the readback (nothing waits).
        """
        if self._device is None or not isinstance(self._device, auto.ReferenceDevice):
            dev = self.device
            if not getattr(dev, "can_run_sync", True):
                raise RuntimeError("run(): this browser cannot wait synchronously here; use "
                                   "`await exe.run_async(feeds)`")
        plan, arrays, env, kept = self._start(feeds, keep_on_device)
        if plan is None:
            return self._kept_reference(arrays, env) if keep_on_device else \
                self._interpret(arrays, env)
        if keep_on_device:
            return kept
        return plan.unpack(plan.backend.read_buffer(plan.staging, 0, plan.readback_bytes))

    async def run_async(self, feeds: Mapping[str, Any], keep_on_device: bool = False
                        ) -> list[Any]:
        """Run once; await the readback (the form that works everywhere, browsers included)."""
        await self._device_async()
        plan, arrays, env, kept = self._start(feeds, keep_on_device)
        if plan is None:
            return self._kept_reference(arrays, env) if keep_on_device else \
                self._interpret(arrays, env)
        if keep_on_device:
            return kept
        raw = await plan.backend.read_buffer_async(plan.staging, 0, plan.readback_bytes)
        return plan.unpack(raw)

    def schedule(self, **dims: int) -> str:
        """Return the dispatch list and memory plan for a binding of the symbolic dims."""
        needed = set().union(*(symbols(self.graph.nodes[i].shape)
                               for i in self.graph.inputs.values()))
        if needed - set(dims):
            raise InputError(f"schedule(): bind the symbolic dims {sorted(needed - set(dims))}")
        return self.plan(dims).program.schedule()


def compile(graph: Graph, outputs: Sequence[Tensor], device: Any = None,  # noqa: A001
            fuse: bool = True) -> Executable:
    """Compile graph for device (None: the default adapter, acquired on first run).

    Args:
        graph: the Graph holding the outputs.
        outputs: the Tensors to compute, in the order run() returns them.
        device: a device from webrlx.device(), "reference", or None.
        fuse: fuse elementwise chains and epilogues (False: one kernel per op).
    """
    if isinstance(device, str):
        device = auto.device(device)
    return Executable(graph, outputs, device, fuse)
