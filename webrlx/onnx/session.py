"""InferenceSession: onnxruntime's surface over webrlx. A plan (imported graph + compiled
Executable) is built per concrete input shapes (and per value of inputs that feed shapes) and
cached, so runs with the same dims reuse the compiled executable."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..runtime.executable import Executable
from ..runtime.executable import compile as compile_graph
from ..tensor import Tensor
from .context import NeedsHostValue, OnnxImportError
from .importer import Imported, check_supported, check_tensors, import_graph
from .reader import Model, ValueInfo, load
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
    """

    def __init__(self, path_or_bytes: str | os.PathLike[str] | bytes, device: Any = None,
                 external_data: Mapping[str, bytes] | str | None = None) -> None:
        self.model: Model = load(path_or_bytes, external_data)
        check_supported(self.model)
        check_tensors(self.model)
        self.device = device
        inits = self.model.graph.initializers
        self._inputs = [vi for vi in self.model.graph.inputs if vi.name not in inits]
        self._host_inputs: set[str] = set()
        self._plans: dict[tuple, _Plan] = {}
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
        """Run once; return the outputs named (all when None) as numpy arrays.

        Args:
            output_names: which outputs, in order; None for all.
            feeds: input name -> array.
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
        arrays = self._check(feeds)
        while True:
            key = tuple((n, tuple(np.shape(a)), str(getattr(a, "dtype", "")))
                        for n, a in arrays.items()) + \
                tuple((n, np.asarray(arrays[n]).tobytes()) for n in sorted(self._host_inputs))
            if key in self._plans:
                plan = self._plans[key]
                break
            try:
                plan = self._build(arrays)
            except NeedsHostValue as e:
                names = {vi.name for vi in self._inputs}
                if not e.inputs or not e.inputs <= names or e.inputs <= self._host_inputs:
                    raise OnnxImportError(f"{self.model.source}: {e}") from None
                self._host_inputs |= e.inputs
                continue
            self._plans[key] = plan
            break
        self.executable = plan.executable
        graph_inputs = plan.imported.graph.inputs
        dtypes = plan.imported.input_dtypes
        fed = {n: (a.astype(dtypes[n]) if isinstance(a, np.ndarray) else a)
               for n, a in arrays.items() if n in graph_inputs
               and (plan.executable is None or n in plan.executable.needed_inputs)}
        return plan, fed

    def _check(self, feeds: Mapping[str, Any]) -> dict[str, Any]:
        names = [vi.name for vi in self._inputs]
        unknown = set(feeds) - set(names) - set(self.model.graph.initializers)
        missing = [n for n in names if n not in feeds]
        if unknown or missing:
            raise ValueError(f"run(): feeds must name the inputs {names}; missing {missing}, "
                             f"unknown {sorted(unknown)}")
        out = {}
        for vi in self._inputs:
            a = feeds[vi.name]
            out[vi.name] = a if hasattr(a, "slot") else np.asarray(a)
            declared = vi.type.shape
            shape = tuple(out[vi.name].shape)
            if declared is not None and (len(declared) != len(shape) or any(
                    isinstance(d, int) and d >= 0 and d != s for d, s in zip(declared, shape))):
                raise ValueError(f"run(): input {vi.name!r} must have shape {list(declared)}, "
                                 f"got {list(shape)}")
        return out

    def _build(self, arrays: Mapping[str, Any]) -> _Plan:
        shapes = {n: tuple(a.shape) for n, a in arrays.items()}
        host = {n: np.asarray(arrays[n]) for n in self._host_inputs}
        imp = import_graph(self.model, shapes, host)
        device_outs: list[int] = []
        tensors: list[Tensor] = []
        for i, o in enumerate(imp.outputs):
            if isinstance(o, Tensor):
                device_outs.append(i)
                tensors.append(o)
        exe = None
        if tensors:
            exe = compile_graph(imp.graph, tensors, self.device)
            exe.set_params(imp.params)
        return _Plan(imp, exe, device_outs)

    def _collect(self, plan: _Plan, values: list[Any], output_names: Sequence[str] | None,
                 keep: bool) -> list[Any]:
        imp = plan.imported
        results: list[Any] = list(imp.outputs)
        for i, v in zip(plan.device_outputs, values):
            results[i] = v
        wanted = list(output_names) if output_names else imp.output_names
        out = []
        for name in wanted:
            if name not in imp.output_names:
                raise ValueError(f"run(): unknown output {name!r}; outputs are "
                                 f"{imp.output_names}")
            i = imp.output_names.index(name)
            v = results[i]
            if keep and not isinstance(v, np.ndarray):
                out.append(v)
                continue
            np_dtype = ELEM_TYPES.get(imp.output_types[i], ("", None))[1]
            arr = np.asarray(v)
            out.append(arr.astype(np_dtype) if np_dtype is not None else arr)
        return out


def _node_arg(vi: ValueInfo) -> NodeArg:
    t = vi.type
    if t.kind != "tensor":
        return NodeArg(vi.name, [], f"{t.kind}")
    return NodeArg(vi.name, list(t.shape or ()), f"tensor({elem_name(t.elem_type)})")
