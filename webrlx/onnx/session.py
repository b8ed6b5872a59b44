"""InferenceSession: onnxruntime's surface over webrlx. A plan (imported graph + compiled
Executable) is built per concrete input shapes (and per value of inputs that feed shapes) and
cached, so runs with the same dims reuse the compiled executable. Plans share one device copy
of the weights and the kernels (the device caches pipelines); past max_plans (a decoder's
growing past length makes a plan a step) the least recently used plan's memory is freed."""
from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime.engines import DEFAULT_MAX_PLANS
from ..runtime.executable import Executable
from ..runtime.executable import compile as compile_graph
from ..tensor import Tensor
from .context import NeedsHostValue, OnnxImportError, OptValue, SeqValue
from .importer import Imported, check_supported, check_tensors, import_graph
from .reader import Model, TypeInfo, ValueInfo, load
from .tensors import ELEM_TYPES, elem_name


@dataclass(frozen=True)
class NodeArg:
    """A graph input or output as onnxruntime describes it."""

    name: str
    shape: list[int | str | None]
    type: str


@dataclass
class _Plan:
    imported: Imported
    executable: Executable | None
    device_outputs: list[int]       # index into imported.outputs of each executable output


class InferenceSession:
    """Run an ONNX model with webrlx: `InferenceSession(path).run(None, feeds)`.

    Args:
        path_or_bytes: the .onnx file's path or contents.
        device: a webrlx device, "reference", or None for the default adapter.
        external_data: a directory or a dict of file name -> bytes holding external tensors.
        max_plans: plans (one per set of input dims) kept compiled; default WEBRLX_MAX_PLANS
            or 16.
    """

    def __init__(self, path_or_bytes: str | os.PathLike[str] | bytes, device: Any = None,
                 external_data: Mapping[str, bytes] | str | None = None,
                 max_plans: int | None = None) -> None:
        self.model: Model = load(path_or_bytes, external_data)
        check_supported(self.model)
        check_tensors(self.model)
        self.device = device
        inits = self.model.graph.initializers
        self._inputs = [vi for vi in self.model.graph.inputs if vi.name not in inits]
        self._host_inputs: set[str] = set()
        self._plans: OrderedDict[tuple, _Plan] = OrderedDict()    # least recently used first
        self.max_plans = max_plans or int(os.environ.get("WEBRLX_MAX_PLANS", DEFAULT_MAX_PLANS))
        self.executable: Executable | None = None

    # -- metadata ------------------------------------------------------------------------------
    def get_inputs(self) -> list[NodeArg]:
        """The graph inputs (initializers excluded) with symbolic dims as strings."""
        return [_node_arg(vi) for vi in self._inputs]

    def get_outputs(self) -> list[NodeArg]:
        """The graph outputs."""
        return [_node_arg(vi) for vi in self.model.graph.outputs]

    def get_modelmeta(self) -> dict[str, str]:
        """The model's metadata_props."""
        return dict(self.model.metadata)

    # -- running -------------------------------------------------------------------------------
    def run(self, output_names: Sequence[str] | None, feeds: Mapping[str, Any],
            keep_on_device: bool = False) -> list[Any]:
        """Run once; return the outputs named (all when None) as numpy arrays (a sequence
        output as a list of arrays, an empty optional as None).

        Args:
            output_names: which outputs, in order; None for all.
            feeds: input name -> array (a list of arrays for a sequence input, None for an
                empty optional).
            keep_on_device: return DeviceTensors for values computed on the device.
        """
        plan, arrays = self._plan(feeds)
        values = plan.executable.run(arrays, keep_on_device) if plan.executable else []
        return self._collect(plan, values, output_names, keep_on_device)

    async def run_async(self, output_names: Sequence[str] | None, feeds: Mapping[str, Any],
                        keep_on_device: bool = False) -> list[Any]:
        """Async form of run() (the browser's way)."""
        plan, arrays = self._plan(feeds)
        values = await plan.executable.run_async(arrays, keep_on_device) \
            if plan.executable else []
        return self._collect(plan, values, output_names, keep_on_device)

    def _plan(self, feeds: Mapping[str, Any]) -> tuple[_Plan, dict[str, Any]]:
        arrays, specs = self._check(feeds)
        while True:
            key = tuple((n, tuple(np.shape(a)), str(getattr(a, "dtype", "")))
                        for n, a in arrays.items()) + (repr(specs),) + \
                tuple((n, np.asarray(arrays[n]).tobytes()) for n in sorted(self._host_inputs))
            if key in self._plans:
                plan = self._plans[key]
                self._plans.move_to_end(key)
                break
            try:
                plan = self._build(arrays, specs)
            except NeedsHostValue as e:
                names = {vi.name for vi in self._inputs}
                if not e.inputs or not e.inputs <= names or e.inputs <= self._host_inputs:
                    raise OnnxImportError(f"{self.model.source}: {e}") from None
                self._host_inputs |= e.inputs
                continue
            while len(self._plans) >= self.max_plans:
                _, old = self._plans.popitem(last=False)
                if old.executable is not None:
                    old.executable.release()
            self._plans[key] = plan
            break
        self.executable = plan.executable
        graph_inputs = plan.imported.graph.inputs
        dtypes = plan.imported.input_dtypes
        fed = {n: (a.astype(dtypes[n]) if isinstance(a, np.ndarray) else a)
               for n, a in arrays.items() if n in graph_inputs
               and (plan.executable is None or n in plan.executable.needed_inputs)}
        return plan, fed

    def _check(self, feeds: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        names = [vi.name for vi in self._inputs]
        unknown = set(feeds) - set(names) - set(self.model.graph.initializers)
        missing = [n for n in names if n not in feeds]
        if unknown or missing:
            raise ValueError(f"run(): feeds must name the inputs {names}; missing {missing}, "
                             f"unknown {sorted(unknown)}")
        out: dict[str, Any] = {}
        specs: dict[str, Any] = {}
        for vi in self._inputs:
            a = feeds[vi.name]
            if vi.type.kind != "tensor":    # a sequence / optional: one array per element
                specs[vi.name] = _flatten(vi.name, vi.type, a, out)
                continue
            out[vi.name] = a if hasattr(a, "slot") else np.asarray(a)
            declared = vi.type.shape
            shape = tuple(out[vi.name].shape)
            if declared is not None and (len(declared) != len(shape) or any(
                    isinstance(d, int) and d >= 0 and d != s for d, s in zip(declared, shape))):
                raise ValueError(f"run(): input {vi.name!r} must have shape {list(declared)}, "
                                 f"got {list(shape)}")
        return out, specs

    def _build(self, arrays: Mapping[str, Any], specs: Mapping[str, Any]) -> _Plan:
        shapes = {n: tuple(a.shape) for n, a in arrays.items()} | dict(specs)
        host = {n: np.asarray(arrays[n]) for n in self._host_inputs}
        imp = import_graph(self.model, shapes, host)
        device_outs: list[int] = []
        tensors: list[Tensor] = []
        for i, o in enumerate(imp.outputs):
            for leaf in _leaves(o):
                device_outs.append(i)
                tensors.append(leaf)
        exe = None
        if tensors:
            exe = compile_graph(imp.graph, tensors, self.device)
            donor = next((p.executable for p in reversed(self._plans.values())
                          if p.executable is not None), None)
            shared = set(exe.share_params(donor)) if donor is not None and imp.params else set()
            exe.set_params({n: a for n, a in imp.params.items() if n not in shared})
        return _Plan(imp, exe, device_outs)

    def _collect(self, plan: _Plan, values: list[Any], output_names: Sequence[str] | None,
                 keep: bool) -> list[Any]:
        imp = plan.imported
        computed = iter(values)
        results = [_rebuild(o, computed) for o in imp.outputs]
        wanted = list(output_names) if output_names else imp.output_names
        out = []
        for name in wanted:
            if name not in imp.output_names:
                raise ValueError(f"run(): unknown output {name!r}; outputs are "
                                 f"{imp.output_names}")
            i = imp.output_names.index(name)
            out.append(_to_onnx(results[i], self.model.graph.outputs[i].type, keep))
        return out


def _flatten(name: str, t: TypeInfo, v: Any, out: dict[str, Any]) -> Any:
    """Put the arrays of a sequence / optional feed v into out ('x[i]' for element i of
    sequence x); return its structure: element shapes in lists, None for an empty optional."""
    if t.kind == "optional":
        return None if v is None else _flatten(name, t.elem or TypeInfo(), v, out)
    if t.kind == "sequence":
        return [_flatten(f"{name}[{i}]", t.elem or TypeInfo(), a, out) for i, a in enumerate(v)]
    out[name] = v if hasattr(v, "slot") else np.asarray(v)
    return tuple(out[name].shape)


def _leaves(v: Any) -> list[Tensor]:
    """The Tensors in an output value (a Tensor, host array, sequence or optional)."""
    if isinstance(v, OptValue):
        return _leaves(v.value)
    if isinstance(v, SeqValue):
        return [t for x in v for t in _leaves(x)]
    return [v] if isinstance(v, Tensor) else []


def _rebuild(v: Any, computed: Iterator[Any]) -> Any:
    """v with each Tensor replaced by its computed value (lists for sequences)."""
    if isinstance(v, OptValue):
        return _rebuild(v.value, computed)
    if isinstance(v, SeqValue):
        return [_rebuild(x, computed) for x in v]
    return next(computed) if isinstance(v, Tensor) else v


def _to_onnx(v: Any, t: TypeInfo, keep: bool) -> Any:
    """A computed value as ONNX's type t: arrays of its element type, lists, None."""
    if v is None:
        return None
    if t.kind in ("sequence", "optional") and t.elem is not None:
        if t.kind == "sequence":
            return [_to_onnx(x, t.elem, keep) for x in v]
        return _to_onnx(v, t.elem, keep)
    if isinstance(v, list):
        return [_to_onnx(x, TypeInfo(), keep) for x in v]
    if keep and not isinstance(v, np.ndarray):
        return v
    np_dtype = ELEM_TYPES.get(t.elem_type, ("", None))[1]
    arr = np.asarray(v)
    return arr.astype(np_dtype) if np_dtype is not None else arr


def _node_arg(vi: ValueInfo) -> NodeArg:
    t = vi.type
    if t.kind != "tensor":
        return NodeArg(vi.name, [], f"{t.kind}")
    return NodeArg(vi.name, list(t.shape or ()), f"tensor({elem_name(t.elem_type)})")
