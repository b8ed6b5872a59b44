"""Read an ONNX ModelProto with our own protobuf wire-format reader (pure Python + numpy).

Why not the `onnx` package: it has no Pyodide build, and generated protobuf classes would tie
the wheel to one protobuf runtime; the handful of ONNX messages is small enough to read by
field number (onnx.proto's numbers, cited per message below). Initializers stay undecoded until
used (`TensorData.numpy()`), and raw_data becomes a zero-copy numpy view where aligned. External
data loads from a directory, or in the browser from a dict of file name -> bytes.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .tensors import TensorData, read_tensor
from .wire import LENGTH, Buffer, OnnxFormatError, float32_bits, signed64

__all__ = ["Model", "GraphDef", "NodeDef", "ValueInfo", "TypeInfo", "load", "load_tensor",
           "load_value", "OnnxFormatError"]


@dataclass
class TypeInfo:
    """A TypeProto: kind 'tensor' (elem_type, shape), 'sequence' / 'optional' (elem), ..."""

    kind: str = "tensor"
    elem_type: int = 0
    shape: tuple[int | str | None, ...] | None = None    # None: rank unknown
    elem: TypeInfo | None = None


@dataclass
class ValueInfo:
    """A ValueInfoProto: a graph input, output or intermediate with its type."""

    name: str
    type: TypeInfo


@dataclass
class NodeDef:
    """A NodeProto; attrs maps name -> Python value (Tensor attributes as TensorData, graph
    attributes as GraphDef, strings as bytes)."""

    op_type: str
    domain: str
    inputs: list[str]
    outputs: list[str]
    name: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    attr_types: dict[str, int] = field(default_factory=dict)
    attr_refs: dict[str, str] = field(default_factory=dict)    # function attribute refs


@dataclass
class GraphDef:
    """A GraphProto: nodes in order, initializers by name, inputs, outputs, value_info."""

    name: str = ""
    nodes: list[NodeDef] = field(default_factory=list)
    initializers: dict[str, TensorData] = field(default_factory=dict)
    inputs: list[ValueInfo] = field(default_factory=list)
    outputs: list[ValueInfo] = field(default_factory=list)
    value_info: list[ValueInfo] = field(default_factory=list)
    sparse_initializers: int = 0


@dataclass
class Model:
    """A ModelProto: the main graph, opset versions by domain ('' is ai.onnx), metadata."""

    graph: GraphDef
    opsets: dict[str, int]
    ir_version: int = 0
    producer: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    functions: list[str] = field(default_factory=list)     # names of model-local functions
    source: str = "<bytes>"
    # host arrays computed from initializers (a padded weight), kept across imports by name
    derived: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def load(model: str | os.PathLike[str] | bytes | bytearray | memoryview,
         external_data: Mapping[str, bytes] | str | None = None) -> Model:
    """Read a model from a path or bytes.

    Args:
        model: the .onnx file's path or contents.
        external_data: where external tensors live: a directory (default: the model's own),
            or a dict of file name -> bytes (the browser has no file system).
    """
    if isinstance(model, (bytes, bytearray, memoryview)):
        buf, base = Buffer(model, "<bytes>"), external_data
    else:
        path = os.fspath(model)
        with open(path, "rb") as f:
            buf = Buffer(f.read(), path)
        base = external_data if external_data is not None else os.path.dirname(path)
    return _Reader(buf, base).model()


def load_tensor(data: bytes | str | os.PathLike[str]) -> TensorData:
    """Read a serialized TensorProto (the node tests' input_0.pb files) from bytes or a path."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        buf = Buffer(data, "<bytes>")
    else:
        with open(data, "rb") as f:
            buf = Buffer(f.read(), os.fspath(data))
    return read_tensor(buf, 0, len(buf.data), os.path.dirname(buf.source))


def load_value(data: bytes | str | os.PathLike[str], t: TypeInfo) -> Any:
    """Read a serialized value of ONNX type t as numpy: a TensorProto as an array, a
    SequenceProto as a list, an OptionalProto as its element or None."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        buf = Buffer(data, "<bytes>")
    else:
        with open(data, "rb") as f:
            buf = Buffer(f.read(), os.fspath(data))
    return _value(buf, 0, len(buf.data), t)


def _value(buf: Buffer, start: int, stop: int, t: TypeInfo) -> Any:
    """SequenceProto / OptionalProto: tensor 3, sequence 5, optional 7 (repeated in a
    sequence, at most one in an optional)."""
    if t.kind == "tensor":
        return read_tensor(buf, start, stop, os.path.dirname(buf.source)).numpy()
    items = [_value(buf, v, end, t.elem or TypeInfo())
             for fnum, wire, v, end, _ in buf.fields(start, stop)
             if fnum in (3, 5, 7) and wire == LENGTH]
    if t.kind == "sequence":
        return items
    return items[0] if items else None


class _Reader:
    def __init__(self, buf: Buffer, base: Any) -> None:
        self.buf, self.base = buf, base

    def model(self) -> Model:
        buf = self.buf
        m = Model(GraphDef(), {}, source=buf.source)
        saw_graph = False
        for fnum, wire, v, end, _ in buf.fields(0, len(buf.data)):
            if fnum == 1 and wire != LENGTH:
                m.ir_version = v
            elif fnum == 2 and wire == LENGTH:
                m.producer = buf.text(v, end)
            elif fnum == 7 and wire == LENGTH:
                m.graph, saw_graph = self.graph(v, end), True
            elif fnum == 8 and wire == LENGTH:          # OperatorSetIdProto: domain 1, version 2
                domain, version = "", 0
                for f2, _, v2, e2, _ in buf.fields(v, end):
                    if f2 == 1:
                        domain = buf.text(v2, e2)
                    elif f2 == 2:
                        version = signed64(v2)
                m.opsets[_domain(domain)] = version
            elif fnum == 14 and wire == LENGTH:         # StringStringEntryProto
                k, val = self._entry(v, end)
                m.metadata[k] = val
            elif fnum == 25 and wire == LENGTH:         # FunctionProto: name 1
                for f2, _, v2, e2, _ in buf.fields(v, end):
                    if f2 == 1:
                        m.functions.append(buf.text(v2, e2))
        if not saw_graph:
            raise buf.fail(0, "no graph (ModelProto field 7): not an ONNX model")
        return m

    def _entry(self, start: int, stop: int) -> tuple[str, str]:
        k = val = ""
        for f2, _, v2, e2, _ in self.buf.fields(start, stop):
            if f2 == 1:
                k = self.buf.text(v2, e2)
            elif f2 == 2:
                val = self.buf.text(v2, e2)
        return k, val

    def graph(self, start: int, stop: int) -> GraphDef:
        """GraphProto: node 1, name 2, initializer 5, input 11, output 12, value_info 13,
        sparse_initializer 15."""
        buf, g = self.buf, GraphDef()
        for fnum, wire, v, end, _ in buf.fields(start, stop):
            if wire != LENGTH:
                continue
            if fnum == 1:
                g.nodes.append(self.node(v, end))
            elif fnum == 2:
                g.name = buf.text(v, end)
            elif fnum == 5:
                t = read_tensor(buf, v, end, self.base)
                g.initializers[t.name] = t
            elif fnum in (11, 12, 13):
                vi = self.value_info(v, end)
                {11: g.inputs, 12: g.outputs, 13: g.value_info}[fnum].append(vi)
            elif fnum == 15:
                g.sparse_initializers += 1
        return g

    def node(self, start: int, stop: int) -> NodeDef:
        """NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7."""
        buf, n = self.buf, NodeDef("", "", [], [])
        for fnum, wire, v, end, _ in buf.fields(start, stop):
            if wire != LENGTH:
                continue
            if fnum == 1:
                n.inputs.append(buf.text(v, end))
            elif fnum == 2:
                n.outputs.append(buf.text(v, end))
            elif fnum == 3:
                n.name = buf.text(v, end)
            elif fnum == 4:
                n.op_type = buf.text(v, end)
            elif fnum == 5:
                self.attribute(v, end, n)
            elif fnum == 7:
                n.domain = _domain(buf.text(v, end))
        return n

    def attribute(self, start: int, stop: int, node: NodeDef) -> None:
        """AttributeProto: name 1, f 2, i 3, s 4, t 5, g 6, floats 7, ints 8, strings 9,
        tensors 10, graphs 11, tp 14, type 20, ref_attr_name 21."""
        buf = self.buf
        name, atype, ref = "", 0, ""
        single: dict[int, Any] = {}
        floats: list[float] = []
        ints: list[int] = []
        strings: list[bytes] = []
        tensors: list[TensorData] = []
        graphs: list[GraphDef] = []
        for fnum, wire, v, end, off in buf.fields(start, stop):
            if fnum == 1:
                name = buf.text(v, end)
            elif fnum == 20:
                atype = v
            elif fnum == 21:
                ref = buf.text(v, end)
            elif fnum == 2:
                single[2] = float32_bits(v)
            elif fnum == 3:
                single[3] = signed64(v)
            elif fnum == 4:
                single[4] = buf.raw(v, end)
            elif fnum == 5:
                single[5] = read_tensor(buf, v, end, self.base)
            elif fnum == 6:
                single[6] = self.graph(v, end)
            elif fnum == 14:
                single[14] = self.type_info(v, end)
            elif fnum == 7:
                floats.extend(buf.packed_fixed(v, end, "<f4", off).tolist() if wire == LENGTH
                              else [float32_bits(v)])
            elif fnum == 8:
                ints.extend(signed64(x) for x in (buf.packed_varints(v, end)
                                                  if wire == LENGTH else [v]))
            elif fnum == 9:
                strings.append(buf.raw(v, end))
            elif fnum == 10:
                tensors.append(read_tensor(buf, v, end, self.base))
            elif fnum == 11:
                graphs.append(self.graph(v, end))
        if ref:
            node.attr_refs[name] = ref
            return
        by_type: dict[int, Any] = {1: single.get(2, 0.0), 2: single.get(3, 0),
                                   3: single.get(4, b""), 4: single.get(5), 5: single.get(6),
                                   6: floats, 7: ints, 8: strings, 9: tensors, 10: graphs,
                                   13: single.get(14)}
        if atype not in by_type:
            raise buf.fail(start, f"node {node.name!r}: attribute {name!r} has unsupported "
                                  f"type {atype}")
        node.attrs[name] = by_type[atype]
        node.attr_types[name] = atype

    def value_info(self, start: int, stop: int) -> ValueInfo:
        """ValueInfoProto: name 1, type 2."""
        buf, vi = self.buf, ValueInfo("", TypeInfo(kind=""))
        for fnum, wire, v, end, _ in buf.fields(start, stop):
            if fnum == 1 and wire == LENGTH:
                vi.name = buf.text(v, end)
            elif fnum == 2 and wire == LENGTH:
                vi.type = self.type_info(v, end)
        return vi

    def type_info(self, start: int, stop: int) -> TypeInfo:
        """TypeProto: tensor_type 1, sequence_type 4, map_type 5, sparse_tensor_type 8,
        optional_type 9 (tensor: elem_type 1, shape 2 of Dimension: dim_value 1,
        dim_param 2)."""
        buf, t = self.buf, TypeInfo(kind="")
        for fnum, wire, v, end, _ in buf.fields(start, stop):
            if wire != LENGTH:
                continue
            if fnum in (1, 8):
                t.kind = "tensor" if fnum == 1 else "sparse_tensor"
                for f2, w2, v2, e2, _ in buf.fields(v, end):
                    if f2 == 1 and w2 != LENGTH:
                        t.elem_type = v2
                    elif f2 == 2 and w2 == LENGTH:
                        t.shape = tuple(self._dim(a, b) for f3, w3, a, b, _
                                        in buf.fields(v2, e2) if f3 == 1 and w3 == LENGTH)
            elif fnum in (4, 9):
                t.kind = "sequence" if fnum == 4 else "optional"
                for f2, w2, v2, e2, _ in buf.fields(v, end):
                    if f2 == 1 and w2 == LENGTH:
                        t.elem = self.type_info(v2, e2)
            elif fnum == 5:
                t.kind = "map"
        return t

    def _dim(self, start: int, stop: int) -> int | str | None:
        out: int | str | None = None
        for fnum, wire, v, end, _ in self.buf.fields(start, stop):
            if fnum == 1 and wire != LENGTH:
                out = signed64(v)
            elif fnum == 2 and wire == LENGTH:
                out = self.buf.text(v, end)
        return out


def _domain(d: str) -> str:
    return "" if d == "ai.onnx" else d

