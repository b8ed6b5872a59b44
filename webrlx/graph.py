"""Graph IR: an SSA list of Nodes in topological order, typed by the op table as they are added.

Each node has one output: a tensor of a known (possibly symbolic) shape and dtype. Users build
graphs through tensor.py (Graph.input / param / constant return Tensors); the compiler reads
only this IR.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import dtype as dt
from .ops import OPS, UPDATES_INPUT
from .shape import Dim, Shape, ShapeError, as_shape, symbols

SOURCES = ("input", "param", "constant", "state")


@dataclass
class Node:
    id: int
    op: str
    inputs: tuple[int, ...]
    attrs: dict[str, Any]
    shape: Shape
    dtype: dt.DType
    name: str | None = None              # inputs and params
    value: np.ndarray | None = field(default=None, repr=False)   # constants

    @property
    def source_name(self) -> str:
        """The name of an input, param or state node."""
        if self.name is None:
            raise ValueError(f"{self}: only inputs, params and states have a name")
        return self.name

    def __str__(self) -> str:
        args = ", ".join(f"%{i}" for i in self.inputs)
        attrs = "".join(f", {k}={v}" for k, v in self.attrs.items())
        label = f"{self.name!r}" if self.name else ""
        shape = "x".join(map(str, self.shape)) or "scalar"
        return f"%{self.id} = {self.op}({label}{args}{attrs}) : {shape} {self.dtype}"


class Graph:
    """The IR of a tensor graph: nodes, and the input and param names that index them."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.inputs: dict[str, int] = {}
        self.params: dict[str, int] = {}
        self.states: dict[str, int] = {}

    # -- sources --------------------------------------------------------------------------
    def add_input(self, name: str, shape: Iterable[Dim] | Dim, dtype: Any = "float32") -> Node:
        """Append a run-time input node; string dims are symbols bound from the fed arrays."""
        self._check_name(name)
        node = self._add_source("input", as_shape(shape), dt.as_dtype(dtype), name=name)
        self.inputs[name] = node.id
        return node

    def add_param(self, name: str, shape: Iterable[Dim] | Dim, dtype: Any = "float32") -> Node:
        """Append a param node: a weight set once and kept on the device (static shape)."""
        self._check_name(name)
        shape = as_shape(shape)
        if symbols(shape):
            raise ShapeError(f"param {name!r}: shape {shape} must be static (ints only)")
        node = self._add_source("param", shape, dt.as_dtype(dtype), name=name)
        self.params[name] = node.id
        return node

    def add_state(self, name: str, shape: Iterable[Dim] | Dim, dtype: Any = "float32") -> Node:
        """Append a state node: a device buffer that persists across runs (zeros at first),
        shared by every plan of an executable and updated in place by ops such as
        cache_write (a KV cache). Static shape."""
        self._check_name(name)
        shape = as_shape(shape)
        if symbols(shape):
            raise ShapeError(f"state {name!r}: shape {shape} must be static (ints only)")
        node = self._add_source("state", shape, dt.as_dtype(dtype), name=name)
        self.states[name] = node.id
        return node

    def written_source(self, node_id: int) -> Node:
        """The source node an in-place op (ops.UPDATES_INPUT) ultimately writes into."""
        node = self.nodes[node_id]
        while node.op in UPDATES_INPUT:
            node = self.nodes[node.inputs[UPDATES_INPUT[node.op]]]
        return node

    def effects(self) -> list[int]:
        """Nodes that update a state in place: they run even when no output reads them."""
        return [n.id for n in self.nodes if n.op in UPDATES_INPUT]

    def inputs_read_by(self, outputs: Iterable[int]) -> set[str]:
        """Names of the inputs that outputs (or the in-place effects) depend on."""
        seen: set[int] = set()
        todo = [*outputs, *self.effects()]
        while todo:
            nid = todo.pop()
            if nid not in seen:
                seen.add(nid)
                todo.extend(self.nodes[nid].inputs)
        return {name for name, nid in self.inputs.items() if nid in seen}

    def add_constant(self, value: Any, dtype: Any = None) -> Node:
        """Append a constant node holding a numpy array (float64 -> float32, int64 -> int32)."""
        arr = np.asarray(value)
        if dtype is None:
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
            elif arr.dtype == np.int64:
                arr = arr.astype(np.int32)
        else:
            arr = arr.astype(dt.as_dtype(dtype).np_dtype)
        d = dt.as_dtype(arr.dtype)
        node = self._add_source("constant", tuple(arr.shape), d)
        node.value = np.asarray(arr, order="C")
        return node

    # -- building -------------------------------------------------------------------------
    def add(self, op: str, inputs: Sequence[int], **attrs: Any) -> Node:
        """Append a node for op, inferring its shape and dtype (raises ShapeError)."""
        if op not in OPS:
            raise ValueError(f"Graph.add: unknown op {op!r}")
        ins = [self.nodes[i] for i in inputs]
        shape, dtype = OPS[op].infer([n.shape for n in ins], [n.dtype for n in ins], attrs)
        node = Node(len(self.nodes), op, tuple(inputs), attrs, shape, dtype)
        self.nodes.append(node)
        return node

    def verify(self) -> None:
        """Check SSA order: every input of a node is defined before it."""
        for n in self.nodes:
            for i in n.inputs:
                if not 0 <= i < n.id:
                    raise ValueError(f"graph: node %{n.id} ({n.op}) uses %{i} before it exists")

    def __str__(self) -> str:
        return "\n".join(map(str, self.nodes))

    # -- helpers --------------------------------------------------------------------------
    def _add_source(self, op: str, shape: Shape, dtype: dt.DType, name: str | None = None
                    ) -> Node:
        node = Node(len(self.nodes), op, (), {}, shape, dtype, name=name)
        self.nodes.append(node)
        return node

    def _check_name(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Graph: names must be non-empty strings, got {name!r}")
        if name in self.inputs or name in self.params or name in self.states:
            raise ValueError(f"Graph: the name {name!r} is already used by an input, param "
                             "or state")
