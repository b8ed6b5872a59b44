"""Executable: a graph compiled for a device. Checks feeds and params, then hands them to the
device's engine (engines.py); run and run_async share one body (steps.py). The debug tools
(validate, check_finite, profile, dump) live in debug.py and are reached from here."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..backends import auto
from ..compiler import int8_scope
from ..graph import Graph
from ..ops import UPDATES_INPUT
from ..shape import bind, symbols
from ..tensor import Tensor
from . import debug
from .engines import DEFAULT_MAX_PLANS, PendingRead, engine_for
from .feeds import InputError, check_feeds, coerce
from .plan import Plan
from .steps import Steps, drive, drive_async

__all__ = ["Executable", "InputError", "compile"]

CARRIES_KEPT = 256    # run(carry=...) checks remembered per executable (shapes and dtypes)


class Executable:
    """A compiled graph: set params once, then run many times with numpy feeds."""

    def __init__(self, graph: Graph, outputs: Sequence[Tensor], device: Any = None,
                 fuse: bool = True, max_plans: int | None = None, int8: Any = None) -> None:
        self.int8 = int8_scope.parse(int8, "compile()")
        if max_plans is None:
            max_plans = int(os.environ.get("WEBRLX_MAX_PLANS", DEFAULT_MAX_PLANS))
        if isinstance(max_plans, bool) or not isinstance(max_plans, int) or max_plans < 1:
            raise ValueError(f"compile(): max_plans must be an int >= 1, got {max_plans!r}")
        self.max_plans = max_plans
        if not outputs:
            raise ValueError("compile(): outputs must name at least one Tensor")
        for t in outputs:
            if not isinstance(t, Tensor) or t.graph is not graph:
                raise ValueError(f"compile(): {t!r} is not a Tensor of this graph")
        graph.verify()
        self.graph = graph
        self.outputs = [t.id for t in outputs]
        self.needed_inputs = graph.inputs_read_by(self.outputs)   # others may go unfed
        self._device = device
        self.fuse = fuse
        self._params: dict[str, np.ndarray] = {}
        self._engine: Any = None
        self._twin: Executable | None = None
        self._carries_ok: set[tuple] = set()    # (input, output index, binding) checked

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
    def engine(self) -> Any:
        """The device's engine (made on first use; params set earlier are uploaded then)."""
        if self._engine is None:
            self._engine = engine_for(self.graph, self.outputs, self.fuse, self.device)
            self._engine.max_plans = self.max_plans
            self._engine.int8 = self.int8
            for name, arr in self._params.items():
                self._engine.set_param(name, arr)
        return self._engine

    @property
    def stats(self) -> dict[str, int]:
        """Counts of device objects created so far (buffers, pipelines, bind_groups, submits)."""
        return dict(self.device.stats)

    @property
    def last_plan(self) -> Plan | None:
        """The Plan of the latest GPU run (None on the reference device)."""
        return self._engine.last_plan if self._engine is not None else None

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
            checked[name] = coerce("set_params()", f"param {name!r}", value, node.shape,
                                   node.dtype)
        self._params.update(checked)
        if self._engine is not None:
            with self.device.lock:
                for name, arr in checked.items():
                    self._engine.set_param(name, arr)

    def share_params(self, other: Executable) -> list[str]:
        """Use other's device copies of the params both graphs declare with the same name,
        shape and dtype, uploading nothing (a graph rebuilt for other dims keeps one copy of
        its weights); return the names shared. Nothing is shared unless other has run on a
        GPU device that this executable was compiled for (or for the default one).

        Args:
            other: an executable that has run (its engine holds the params on the device).
        """
        if other._engine is None or not hasattr(other._engine, "param_bufs") or \
                self._device not in (None, other._device):
            return []
        self._device = other._device
        mine, theirs = self.engine.param_bufs, other._engine.param_bufs
        shared = []
        for name, arr in other._params.items():
            node_id = self.graph.params.get(name)
            if node_id is None or name not in theirs:
                continue
            node = self.graph.nodes[node_id]
            if tuple(node.shape) == arr.shape and node.dtype == other.graph.nodes[
                    other.graph.params[name]].dtype:
                mine[name] = theirs[name]
                self._params[name] = arr
                shared.append(name)
        return shared

    def release(self) -> None:
        """Free the device memory of every compiled plan (arenas, uniforms); params and
        states stay (another executable may share them), as does the executable: a later
        run compiles its plan again."""
        engine = self._engine
        if engine is None or not hasattr(engine, "plans"):
            return
        with self.device.lock:
            for plan in engine.plans.values():
                plan.release()
            engine.plans.clear()
            engine.last_plan = None

    # -- states ---------------------------------------------------------------------------------
    def reset_states(self, names: Sequence[str] | None = None) -> None:
        """Zero the named states (default: all of them)."""
        for name in self.graph.states if names is None else names:
            if name not in self.graph.states:
                raise InputError(f"reset_states(): unknown state {name!r}; states are "
                                 f"{sorted(self.graph.states)}")
            self.engine.reset_state(name)

    def read_state(self, name: str) -> np.ndarray:
        """Read a state's current value back from the device."""
        if name not in self.graph.states:
            raise InputError(f"read_state(): unknown state {name!r}; states are "
                             f"{sorted(self.graph.states)}")
        return drive(self.engine.read_state(name), self.device.lock)

    async def read_state_async(self, name: str) -> np.ndarray:
        """Async form of read_state()."""
        await self._device_async()
        if name not in self.graph.states:
            raise InputError(f"read_state(): unknown state {name!r}; states are "
                             f"{sorted(self.graph.states)}")
        return await drive_async(self.engine.read_state(name), self.device)

    def start_read(self, name: str) -> PendingRead:
        """Start reading a state back without waiting: its value now is copied aside (the
        copy is submitted at once) and finish_read returns it later. Work submitted in
        between keeps the GPU busy while the copy's result comes back."""
        if name not in self.graph.states:
            raise InputError(f"start_read(): unknown state {name!r}; states are "
                             f"{sorted(self.graph.states)}")
        with self.device.lock:
            return self.engine.start_read(name)

    def finish_read(self, pending: PendingRead) -> np.ndarray:
        """The value a start_read took (waits for its copy only)."""
        return drive(self.engine.finish_read(pending), self.device.lock)

    async def finish_read_async(self, pending: PendingRead) -> np.ndarray:
        """Async form of finish_read()."""
        return await drive_async(self.engine.finish_read(pending), self.device)

    def read_param(self, name: str) -> np.ndarray:
        """Read a param's current value back from the device (after training: assign)."""
        if name not in self._params:
            raise InputError(f"read_param(): param {name!r} was never set; set params are "
                             f"{sorted(self._params)}")
        return drive(self.engine.read_param(name), self.device.lock)

    async def read_param_async(self, name: str) -> np.ndarray:
        """Async form of read_param()."""
        await self._device_async()
        if name not in self._params:
            raise InputError(f"read_param(): param {name!r} was never set; set params are "
                             f"{sorted(self._params)}")
        return await drive_async(self.engine.read_param(name), self.device)

    async def ready_async(self) -> None:
        """Acquire the device (the default one, asynchronously: the browser's way)."""
        await self._device_async()

    # -- running --------------------------------------------------------------------------------
    def check_feeds(self, feeds: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
        """Return (arrays, symbol binding) for feeds, or raise InputError naming the input."""
        return check_feeds(self.graph, feeds, self._params, self.needed_inputs)

    def plan(self, env: Mapping[str, int]) -> Plan:
        """Return the Plan for a symbol binding, compiling it on first use (GPU devices)."""
        return self.engine.plan(env)

    def _check_repeat(self, where: str, repeat: Any, carry: Any, env: Mapping[str, int]
                      ) -> dict[str, int]:
        """Check run()'s repeat and carry arguments; return carry as a dict."""
        if isinstance(repeat, bool) or not isinstance(repeat, (int, np.integer)) or repeat < 1:
            raise InputError(f"{where}: repeat must be an int >= 1, got {repeat!r}")
        if carry is None:
            carry = {}
        if not isinstance(carry, Mapping):
            raise InputError(f"{where}: carry must map input names to output indices, e.g. "
                             f"{{'ids': 0}}, got {type(carry).__name__}")
        checked = {}
        binding = tuple(sorted(env.items())) if carry else ()
        for name, index in carry.items():
            if name not in self.needed_inputs:
                raise InputError(f"{where}: carry names input {name!r}, which the outputs do "
                                 f"not read; inputs are {sorted(self.needed_inputs)}")
            if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or \
                    not 0 <= index < len(self.outputs):
                raise InputError(f"{where}: carry[{name!r}] must be an output index in "
                                 f"[0, {len(self.outputs)}), got {index!r}")
            index = int(index)
            if (name, index, binding) not in self._carries_ok:   # (a decode loop: each step)
                src = self.graph.nodes[self.outputs[index]]
                dst = self.graph.nodes[self.graph.inputs[name]]
                got, want = bind(src.shape, env), bind(dst.shape, env)
                if got != want or src.dtype != dst.dtype:
                    raise InputError(f"{where}: carry[{name!r}]: output {index} is {got} "
                                     f"{src.dtype}, input {name!r} is {want} {dst.dtype}; a "
                                     "carried output must match its input's shape and dtype")
                if len(self._carries_ok) >= CARRIES_KEPT:
                    self._carries_ok.clear()
                self._carries_ok.add((name, index, binding))
            checked[name] = index
        if repeat > 1:
            written = {self.graph.written_source(n.id).source_name for n in self.graph.nodes
                       if n.op in UPDATES_INPUT and
                       self.graph.written_source(n.id).op == "input"}
            fixed = sorted((written & self.needed_inputs) - set(checked))
            if fixed:
                raise InputError(f"{where}: repeat > 1 but the graph updates input(s) {fixed} "
                                 "in place, so later steps would not see the fed value; run "
                                 "once per step, or carry them")
        return checked

    def _run(self, feeds: Mapping[str, Any], keep: bool, repeat: Any = 1, carry: Any = None,
             where: str = "run()") -> Steps[list[Any]]:
        arrays, env = self.check_feeds(feeds)
        checked = self._check_repeat(where, repeat, carry, env)
        if os.environ.get("WEBRLX_VALIDATE") == "1":
            report = yield from self._validate_steps(arrays, env)
            report.raise_if_diverged()
        return (yield from self.engine.run(arrays, env, keep, int(repeat), checked))

    def run(self, feeds: Mapping[str, Any], keep_on_device: bool = False, repeat: int = 1,
            carry: Mapping[str, int] | None = None) -> list[Any]:
        """Run once (or `repeat` times in one submit) and return the outputs as numpy arrays
        (waits for the device).

        Args:
            feeds: input name -> numpy array (or anything np.asarray accepts), or a
                DeviceTensor from an earlier run (copied on the device, no CPU round trip).
            keep_on_device: return DeviceTensors and skip the readback (nothing waits).
                Natively, runs kept on the device back to back are recorded together and
                reach the GPU at the next read or write, every 32 runs, or on
                `exe.device.flush()` (wgpu_native.DEFER_SUBMITS says why).
            repeat: run the graph this many times in one submit (one command encoder: the
                host work of a run is paid once) and return the last time's outputs; states
                carry over as between runs.
            carry: input name -> output index: that output of one time is copied into that
                input for the next time (on the device, between the passes), as if fed back;
                the other inputs keep their fed values. Same shape and dtype.
        """
        if not self.device.can_run_sync:
            raise RuntimeError("run(): this browser cannot wait synchronously here; use "
                               "`await exe.run_async(feeds)`")
        return drive(self._run(feeds, keep_on_device, repeat, carry), self.device.lock)

    async def run_async(self, feeds: Mapping[str, Any], keep_on_device: bool = False,
                        repeat: int = 1, carry: Mapping[str, int] | None = None) -> list[Any]:
        """Run once (or `repeat` times, see run()); await the readback (the form that works
        everywhere, browsers included)."""
        await self._device_async()
        return await drive_async(self._run(feeds, keep_on_device, repeat, carry,
                                           "run_async()"), self.device)

    # -- debug tools ----------------------------------------------------------------------------
    def unfused_twin(self) -> Executable:
        """This graph compiled with one kernel per node on the same device, current params."""
        if self._twin is None:
            self._twin = Executable(self.graph, [Tensor(self.graph, i) for i in self.outputs],
                                    self._device, fuse=False, int8=self.int8)
        self._twin._device = self._device
        self._twin.set_params(self._params)
        return self._twin

    def validate(self, feeds: Mapping[str, Any], rtol: float = 2e-3, atol: float = 1e-4
                 ) -> debug.ValidationReport:
        """Run kernel by kernel, compare each kernel's output with the numpy reference of the
        node it computes, and report the first node that diverges (report.ok when none).

        Args:
            feeds: as for run().
            rtol: a value diverges where |got - want| > atol * scale + rtol * |want|,
                scale = max(1, max |want|) of that node; integers must match exactly.
            atol: the absolute part of that bound.
        """
        steps = self._validate_steps(*self.check_feeds(feeds), rtol, atol)
        return drive(steps, self.device.lock)

    async def validate_async(self, feeds: Mapping[str, Any], rtol: float = 2e-3,
                             atol: float = 1e-4) -> debug.ValidationReport:
        """Async form of validate()."""
        await self._device_async()
        steps = self._validate_steps(*self.check_feeds(feeds), rtol, atol)
        return await drive_async(steps, self.device)

    def check_finite(self, feeds: Mapping[str, Any]) -> debug.NonFinite | None:
        """Return the first node (in run order) whose value holds NaN or Inf, or None.

        A fed input holding NaN/Inf is reported as that input. On a GPU the graph runs
        unfused (unfused_twin), one kernel per node, so the op is named exactly."""
        steps = self._check_finite_steps(*self.check_feeds(feeds))
        return drive(steps, self.device.lock)

    async def check_finite_async(self, feeds: Mapping[str, Any]) -> debug.NonFinite | None:
        """Async form of check_finite()."""
        await self._device_async()
        steps = self._check_finite_steps(*self.check_feeds(feeds))
        return await drive_async(steps, self.device)

    def profile(self, feeds: Mapping[str, Any], repeats: int = 3) -> debug.Profile:
        """Return per-kernel GPU time (timestamp queries; host-timed dispatches where the
        device has none) as a table: str() of it prints one line per kernel."""
        steps = self._profile_steps(*self.check_feeds(feeds), repeats)
        return drive(steps, self.device.lock)

    async def profile_async(self, feeds: Mapping[str, Any], repeats: int = 3) -> debug.Profile:
        """Async form of profile()."""
        await self._device_async()
        steps = self._profile_steps(*self.check_feeds(feeds), repeats)
        return await drive_async(steps, self.device)

    # the engine is made inside the steps: under the device's lock, as for run()
    def _validate_steps(self, arrays: dict[str, Any], env: dict[str, int], rtol: float = 2e-3,
                        atol: float = 1e-4) -> Steps[debug.ValidationReport]:
        return (yield from debug.validate_steps(self.engine, self._params, self.device.info.name,
                                                arrays, env, rtol, atol))

    def _check_finite_steps(self, arrays: dict[str, Any], env: dict[str, int]
                            ) -> Steps[debug.NonFinite | None]:
        return (yield from debug.check_finite_steps(self.unfused_twin().engine, arrays, env))

    def _profile_steps(self, arrays: dict[str, Any], env: dict[str, int], repeats: int
                       ) -> Steps[debug.Profile]:
        return (yield from debug.profile_steps(self.engine, self.device.info.name, arrays, env,
                                               repeats))

    def dump(self, directory: str | os.PathLike[str], **dims: int) -> list[Path]:
        """Write each kernel's final WGSL, with its overrides, params, bindings and grid in a
        header, plus schedule.txt, for a binding of the symbolic dims; return the paths."""
        return debug.dump(self.graph, self.plan(self._binding(dims, "dump()")), Path(directory))

    def schedule(self, **dims: int) -> str:
        """Return the dispatch list and memory plan for a binding of the symbolic dims."""
        return self.plan(self._binding(dims, "schedule()")).program.schedule()

    def _binding(self, dims: Mapping[str, int], where: str) -> dict[str, int]:
        needed = set().union(*(symbols(self.graph.nodes[i].shape)
                               for i in self.graph.inputs.values()))
        if needed - set(dims):
            raise InputError(f"{where}: bind the symbolic dims {sorted(needed - set(dims))}")
        return dict(dims)


def compile(graph: Graph, outputs: Sequence[Tensor], device: Any = None,  # noqa: A001
            fuse: bool = True, max_plans: int | None = None, int8: Any = None) -> Executable:
    """Compile graph for device (None: the default adapter, acquired on first run).

    Args:
        graph: the Graph holding the outputs.
        outputs: the Tensors to compute, in the order run() returns them.
        device: a device from webrlx.device(), "reference", or None.
        fuse: fuse elementwise chains and epilogues (False: one kernel per op).
        max_plans: plans (one per binding of the symbolic dims) kept compiled at once; the
            least recently used is freed past it. Default: $WEBRLX_MAX_PLANS, else 16.
        int8: int8 paths to opt into on GPUs (compiler/int8_scope.py): None (none), True or
            "all" (all), "decode" (batched decode GEMVs on x rounded to int8) or "prefill" (long
            prompts' quantized products on int8). Faster on big models, less exact: the
            reference device and every other product stay f32.
    """
    if isinstance(device, str):
        device = auto.device(device)
    return Executable(graph, outputs, device, fuse, max_plans, int8)
