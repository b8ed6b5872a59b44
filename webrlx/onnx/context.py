"""The state an op row builds with: the webrlx Graph, the values of ONNX names (webrlx Tensors
or numpy arrays known on the host), and the helpers rows use to lift or demand host values."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from ..tensor import Graph, Tensor
from .reader import GraphDef, NodeDef

Value = Any      # Tensor | np.ndarray | SeqValue | OptValue | None
# importer.import_nodes, handed in by the importer (which imports this module)
NodesImporter = Callable[["Context", Sequence[NodeDef]], None]


class SeqValue(list):  # type: ignore[type-arg]
    """An ONNX sequence: a Python list of values (Tensors or host arrays)."""


class OptValue:
    """An ONNX optional: value is None (empty) or a tensor or sequence value."""

    def __init__(self, value: Any) -> None:
        self.value = value


class OnnxImportError(ValueError):
    """The model cannot be imported: unsupported ops (all listed) or a rule that failed."""


class NeedsHostValue(Exception):
    """A row needs, on the host, a value computed from graph inputs (a shape fed as data)."""

    def __init__(self, inputs: set[str], what: str) -> None:
        super().__init__(f"{what} must be known when the plan is built, but it is computed "
                         f"from the graph inputs {sorted(inputs)}")
        self.inputs = inputs


def device_dtype(np_dtype: Any) -> str:
    """The webrlx dtype holding an ONNX/numpy dtype (int64 as int32, float64 as float32)."""
    d = np.dtype(np_dtype)
    if d == np.bool_:
        return "bool"
    if d == np.float16:
        return "float16"
    if d.kind == "f":
        return "float32"
    if d in (np.dtype(np.uint32), np.dtype(np.uint64)):
        return "uint32"
    if d.kind in "iu":
        return "int32"
    raise OnnxImportError(f"webrlx.onnx: numpy dtype {d} has no webrlx dtype")


class Context:
    """The import of one graph: name -> value, plus lifting of host arrays into the Graph."""

    def __init__(self, graph: Graph, opsets: dict[str, int], params: dict[str, np.ndarray],
                 initializer_names: dict[int, str], import_nodes: NodesImporter | None = None
                 ) -> None:
        self.g = graph
        self._import_nodes = import_nodes        # how inline() imports a subgraph's nodes
        self.opsets = opsets
        self.params = params
        self.values: dict[str, Value] = {}
        # ONNX element types of names where the device dtype loses them (uint8 and float8 are
        # both held as int32 / float32): graph inputs, initializers, outputs of typed rows
        self.elem_types: dict[str, int] = {}
        self._initializer_names = initializer_names
        self._lifted: dict[int, tuple[np.ndarray, Tensor]] = {}
        self.derived: dict[str, np.ndarray] = {}     # param_from's arrays (the model's, shared)
        self.node_name = ""

    # -- values --------------------------------------------------------------------------------
    def tensor(self, v: Value, dtype: Any = None) -> Tensor:
        """v as a graph Tensor: an initializer becomes a param, another host array a constant."""
        if isinstance(v, Tensor):
            return v if dtype is None else v.cast(dtype)
        arr = np.asarray(v)
        key = id(v)
        if key in self._lifted and self._lifted[key][0] is v and dtype is None:
            return self._lifted[key][1]
        target = dtype or device_dtype(arr.dtype)
        name = self._initializer_names.get(key)
        if name is not None and arr.size > 1 and dtype is None:
            self.params[name] = arr.astype(np.dtype(target), copy=False)
            t = self.g.param(name, arr.shape, target)
        else:
            t = self.g.constant(arr.astype(np.dtype(target)), target)
        if dtype is None:
            self._lifted[key] = (v, t)
        return t

    def param_from(self, v: Value, make: Callable[[np.ndarray], np.ndarray], tag: str) -> Tensor:
        """A graph Tensor holding make(v), an array the host computes from v (a weight padded
        or laid out anew): for an initializer v a param named after it and tag, computed once
        per model and shared by the plans of a session; else a constant."""
        name = self._initializer_names.get(id(v))
        if name is None:
            arr = make(np.asarray(v))
            return self.g.constant(arr, device_dtype(arr.dtype))
        name = f"{name}#{tag}"
        if name not in self.derived:
            arr = make(np.asarray(v))
            self.derived[name] = arr.astype(np.dtype(device_dtype(arr.dtype)), copy=False)
        arr = self.params[name] = self.derived[name]
        return self.g.param(name, arr.shape, device_dtype(arr.dtype))

    def host(self, v: Value, what: str) -> np.ndarray:
        """v's value on the host; a value computed from graph inputs raises NeedsHostValue."""
        if isinstance(v, Tensor):
            raise NeedsHostValue(self.g.inputs_read_by([v.id]), f"{self.node_name}: {what}")
        return np.asarray(v)

    @staticmethod
    def is_host(v: Value) -> bool:
        """Whether v is known on the host (a numpy array)."""
        return isinstance(v, np.ndarray)

    @staticmethod
    def shape(v: Value) -> tuple[Any, ...]:
        """The shape of a Tensor or a host array."""
        return tuple(v.shape)

    def inline(self, body: GraphDef, inputs: Iterable[Value]) -> list[Value]:
        """Import a subgraph (If branch, Loop body) in this graph; outer names stay visible."""
        if self._import_nodes is None:
            raise OnnxImportError(f"{self.node_name}: this context imports no subgraphs")
        saved = dict(self.values)
        for vi, v in zip(body.inputs, inputs):
            self.values[vi.name] = v
        for name, t in body.initializers.items():
            arr = t.numpy()
            self.values[name] = arr
        self._import_nodes(self, body.nodes)
        outs = [self.values[o.name] for o in body.outputs]
        self.values = saved
        return outs
