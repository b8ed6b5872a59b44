"""ONNX graph -> webrlx Graph. Each node goes through its ONNX_OPS row; a node whose inputs are
all known on the host (initializers, constants, shapes of static tensors, and results of such)
is computed with numpy there and becomes a constant, so shape arithmetic never reaches the GPU."""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..tensor import Graph, Tensor
from .context import Context, NeedsHostValue, OnnxImportError, OptValue, SeqValue, device_dtype
from .ops.registry import OpRow, lookup  # importing ops/ registers every family's rows
from .patterns import merge_sibling_matmuls
from .reader import GraphDef, Model, NodeDef, TypeInfo, load
from .tensors import ELEM_TYPES, OnnxDtypeError, TensorData, elem_name, external_missing

Shape = tuple[Any, ...]


@dataclass
class Imported:
    """An imported model: the Graph, one value per ONNX output (a Tensor, or a numpy array
    computed on the host), the params to upload, and the inputs fed on the host."""

    graph: Graph
    outputs: list[Any]
    output_names: list[str]
    output_types: list[int]
    params: dict[str, np.ndarray] = field(default_factory=dict)
    input_dtypes: dict[str, str] = field(default_factory=dict)


def unsupported(model: Model) -> list[tuple[str, str, int, list[str]]]:
    """Every (domain, op_type, opset, node names) no ONNX_OPS row implements."""
    found: dict[tuple[str, str, int], list[str]] = {}

    def walk(g: GraphDef) -> None:
        for n in g.nodes:
            version = model.opsets.get(n.domain, 0)
            if lookup(n.domain, n.op_type, version) is None:
                found.setdefault((n.domain, n.op_type, version), []).append(
                    n.name or f"<{n.op_type} -> {', '.join(n.outputs)}>")
            for v in n.attrs.values():
                for sub in (v if isinstance(v, list) else [v]):
                    if isinstance(sub, GraphDef):
                        walk(sub)
    walk(model.graph)
    return [(d, o, v, names) for (d, o, v), names in found.items()]


def check_supported(model: Model) -> None:
    """Raise one OnnxImportError listing every unsupported op with its node names."""
    missing = unsupported(model)
    if missing:
        lines = [f"  {d or 'ai.onnx'}::{o} (opset {v}): nodes {', '.join(names[:5])}"
                 + (f" and {len(names) - 5} more" if len(names) > 5 else "")
                 for d, o, v, names in missing]
        raise OnnxImportError(f"{model.source}: {len(missing)} unsupported op(s); nothing was "
                              "compiled:\n" + "\n".join(lines))


def check_tensors(model: Model) -> None:
    """Raise before compiling when an external data file is missing (FileNotFoundError) or
    initializers or inputs have element types webrlx cannot hold (one OnnxImportError)."""
    g = model.graph
    for t in g.initializers.values():
        missing = external_missing(t)
        if missing is not None:
            raise FileNotFoundError(f"{model.source}: {missing}")
    bad = [f"initializer {t.name!r} ({elem_name(t.elem_type)})" for t in g.initializers.values()
           if ELEM_TYPES.get(t.elem_type, ("", None))[1] is None]
    bad += [f"input {vi.name!r} ({elem_name(vi.type.elem_type)})" for vi in g.inputs
            if vi.type.kind == "tensor" and vi.name not in g.initializers
            and ELEM_TYPES.get(vi.type.elem_type, ("", None))[1] is None]
    if bad:
        raise OnnxImportError(f"{model.source}: element types webrlx.onnx does not support "
                              f"(string and complex have no webrlx dtype): {', '.join(bad)}")


WEIGHT_SIZE = 16384      # elements from which a Constant node's tensor is a param (a weight)


def import_graph(model: Model, input_shapes: Mapping[str, Shape] | None = None,
                 host_inputs: Mapping[str, np.ndarray] | None = None) -> Imported:
    """Build the webrlx Graph of model for input shapes (default: the declared ones, symbolic
    dims as webrlx symbols); host_inputs are inputs whose values are fixed at build time."""
    check_supported(model)
    g, host_inputs = Graph(), dict(host_inputs or {})
    params: dict[str, np.ndarray] = {}
    inits = {name: _decode(t) for name, t in model.graph.initializers.items()}
    nodes, constants = _hoist_constants(model.graph.nodes)
    inits.update({name: _decode(t) for name, t in constants.items()})
    if model.opsets.get("", 0) >= 10:     # Slice with input starts/ends
        nodes = merge_sibling_matmuls(nodes, inits, {vi.name for vi in model.graph.outputs})
    # a hoisted constant becomes a param when it is a weight; a small one stays a constant, so
    # patterns and the simplifier see its value (a mask's all-true factor, a scale)
    names = {id(a): n for n, a in inits.items() if n not in constants or a.size >= WEIGHT_SIZE}
    ctx = Context(g, model.opsets, params, names, import_nodes)
    ctx.derived = model.derived
    ctx.values.update(inits)
    ctx.elem_types.update({n: t.elem_type for n, t in
                           (model.graph.initializers | constants).items()})
    input_dtypes: dict[str, str] = {}
    for vi in model.graph.inputs:
        ctx.elem_types.setdefault(vi.name, vi.type.elem_type)
        if vi.name in inits and vi.name not in (input_shapes or {}):
            continue          # an initializer listed as an input: a default we keep
        if vi.name in host_inputs:
            ctx.values[vi.name] = np.asarray(host_inputs[vi.name])
            continue
        if vi.type.kind != "tensor":
            ctx.values[vi.name] = _boundary_input(g, vi.name, vi.type, (input_shapes or {}).get(
                vi.name, _NO_SPEC), input_dtypes, model.source)
            continue
        shape = (input_shapes or {}).get(vi.name)
        if shape is None:
            shape = tuple(d if isinstance(d, int) and d >= 0 else (d or f"{vi.name}_{i}")
                          for i, d in enumerate(vi.type.shape or ()))
        np_dtype = ELEM_TYPES.get(vi.type.elem_type, ("", None))[1]
        if np_dtype is None:
            raise OnnxImportError(f"{model.source}: input {vi.name!r} has the unsupported "
                                  f"element type {vi.type.elem_type}")
        input_dtypes[vi.name] = device_dtype(np_dtype)
        ctx.values[vi.name] = g.input(vi.name, tuple(shape), input_dtypes[vi.name])
    import_nodes(ctx, nodes)
    outs = []
    for vi in model.graph.outputs:
        v = ctx.values.get(vi.name)
        if v is None:
            raise OnnxImportError(f"{model.source}: output {vi.name!r} is never computed")
        outs.append(v)
    return Imported(g, outs, [vi.name for vi in model.graph.outputs],
                    [vi.type.elem_type for vi in model.graph.outputs], params, input_dtypes)


_NO_SPEC = object()


def _boundary_input(g: Graph, name: str, t: TypeInfo, spec: Any, dtypes: dict[str, str],
                    source: str) -> Any:
    """A sequence or optional input as graph inputs: spec is a list of element specs for a
    sequence, None (empty) or the element's spec for an optional, a shape for a tensor; the
    i-th element of sequence x is the graph input 'x[i]'."""
    if spec is _NO_SPEC or t.kind not in ("tensor", "sequence", "optional"):
        raise OnnxImportError(f"{source}: input {name!r} is a {t.kind}; its structure (element "
                              "shapes) must be given: feed it through InferenceSession")
    if t.kind == "optional":
        return OptValue(None if spec is None else _boundary_input(
            g, name, t.elem or TypeInfo(), spec, dtypes, source))
    if t.kind == "sequence":
        return SeqValue(_boundary_input(g, f"{name}[{i}]", t.elem or TypeInfo(), s, dtypes,
                                        source) for i, s in enumerate(spec))
    np_dtype = ELEM_TYPES.get(t.elem_type, ("", None))[1]
    if np_dtype is None:
        raise OnnxImportError(f"{source}: input {name!r} has the unsupported element type "
                              f"{t.elem_type}")
    dtypes[name] = device_dtype(np_dtype)
    return g.input(name, tuple(spec), dtypes[name])


def import_nodes(ctx: Context, nodes: Sequence[NodeDef]) -> None:
    """Run each node's row in order, storing its outputs in ctx.values."""
    for node in nodes:
        version = ctx.opsets.get(node.domain, 0)
        row = lookup(node.domain, node.op_type, version)
        assert row is not None, "check_supported runs first"
        ctx.node_name = f"{node.op_type} node {node.name or node.outputs[0]!r}"
        ins = [ctx.values[n] if n else None for n in node.inputs]
        attrs = {k: _decode(v) if isinstance(v, TensorData) else v
                 for k, v in node.attrs.items()}
        try:
            host_known = all(x is None or isinstance(x, np.ndarray) for x in ins)
            if host_known and row.host is not None:
                outs = row.host(node, ins, attrs)
            elif host_known and _foldable(node):
                outs = _fold(ctx, row, node, ins, attrs)
            else:
                outs = row.build(ctx, node, ins, attrs)
        except (NeedsHostValue, OnnxImportError):
            raise
        except Exception as e:   # a rule's shape/dtype error: say which node
            raise OnnxImportError(f"{ctx.node_name} (opset {version}): {type(e).__name__}: "
                                  f"{e}") from e
        for name, v in zip(node.outputs, outs):
            if name:         # numpy scalars (np.take of a 0-d index) become 0-d arrays
                ctx.values[name] = v if isinstance(v, (Tensor, np.ndarray, SeqValue, OptValue)) \
                    else np.asarray(v)


def _hoist_constants(nodes: Sequence[NodeDef]) -> tuple[list[NodeDef], dict[str, TensorData]]:
    """The top-level Constant nodes holding a tensor (`value`), taken out of the node list as
    initializers named after their outputs (the same thing, per ONNX's spec). Exporters that
    see weights as constants (torch.onnx on a module called from a closure) write every weight
    so; as initializers, patterns that look for weights (merge_sibling_matmuls) see them, and
    those of WEIGHT_SIZE elements or more become params: one device copy, shared by a session's
    plans, where a graph constant is uploaded again by each plan."""
    kept: list[NodeDef] = []
    constants: dict[str, TensorData] = {}
    for n in nodes:
        value = n.attrs.get("value")
        if n.op_type == "Constant" and not n.domain and set(n.attrs) == {"value"} and \
                isinstance(value, TensorData) and len(n.outputs) == 1 and n.outputs[0]:
            constants[n.outputs[0]] = value
        else:
            kept.append(n)
    return kept, constants


def _foldable(node: NodeDef) -> bool:
    """Whether a node's row may run on the reference device: not random, no subgraphs (the
    row itself folds a subgraph node, inlining it where the outer values live)."""
    if node.op_type.startswith("Random") or node.op_type in ("Bernoulli", "Multinomial"):
        return False
    return not any(t in (5, 10) for t in node.attr_types.values())


def _fold(ctx: Context, row: OpRow, node: NodeDef, ins: list[Any], attrs: dict[str, Any]
          ) -> list[Any]:
    """Compute a node with host-known inputs through its own row on the numpy reference."""
    from ..runtime.executable import compile as compile_graph
    scratch = Context(Graph(), ctx.opsets, {}, {}, import_nodes)
    scratch.node_name = ctx.node_name
    outs = row.build(scratch, node, ins, attrs)
    tensors = [o for o in outs if isinstance(o, Tensor)]
    if not tensors:
        return list(outs)
    exe = compile_graph(scratch.g, tensors, device="reference")
    exe.set_params(scratch.params)
    values = iter(exe.run({}))
    return [next(values) if isinstance(o, Tensor) else o for o in outs]


def _decode(t: TensorData) -> np.ndarray:
    try:
        return t.numpy()
    except OnnxDtypeError as e:
        raise OnnxImportError(str(e)) from None


def import_model(model: Model | str | os.PathLike[str] | bytes,
                 input_shapes: Mapping[str, Shape] | None = None
                 ) -> tuple[Graph, list[Tensor], dict[str, np.ndarray]]:
    """Import an ONNX model as (Graph, output Tensors, params) to extend, fuse or train.

    Args:
        model: a path, the file's bytes, or a reader.Model.
        input_shapes: input name -> concrete shape; without it symbolic dims stay symbols
            (shape arithmetic on them then fails: pass concrete shapes).
    """
    if not isinstance(model, Model):
        model = load(model)
    try:
        imp = import_graph(model, input_shapes)
    except NeedsHostValue as e:
        raise OnnxImportError(f"{model.source}: {e}; webrlx.onnx.InferenceSession binds "
                              "such inputs per run") from None
    kinds = [n for n, o in zip(imp.output_names, imp.outputs)
             if isinstance(o, (SeqValue, OptValue))]
    if kinds:
        raise OnnxImportError(f"{model.source}: outputs {kinds} are sequences or optionals, "
                              "which a Graph cannot return; run them with InferenceSession")
    outs = [o if isinstance(o, Tensor) else imp.graph.constant(o, device_dtype(o.dtype))
            for o in imp.outputs]
    return imp.graph, outs, imp.params
