"""Lowering: compile a graph under one shape binding into a Program of kernel calls.

The rules live in one module per op family, registered into registry.LOWERINGS when imported
here: elementwise and views, rows (reductions, softmax, norms), indexing, matmul, conv, and
attention. Pattern fusions (fuse.py) are found first; lazy elementwise chains fuse while
lowering (emit.py).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..device_info import DeviceInfo
from ..graph import SOURCES, Graph, Node
from . import (
    fuse,
    lower_attention,
    lower_conv,
    lower_decoder,
    lower_elementwise,
    lower_index,
    lower_matmul,
    lower_quant,
    lower_rows,
    lower_sample,
    smat,
)
from .emit import EmitContext
from .memory import BindingLimitError
from .program import Buf, Output, Program
from .registry import INLINES, LOWERINGS
from .simplify import bind_shapes, fold_constants, live_nodes

__all__ = ["LOWERINGS", "INLINES", "lower", "LoweringError"]
# the op families; importing each registers its rules in LOWERINGS
RULE_MODULES = (lower_elementwise, lower_rows, lower_index, lower_matmul, lower_conv,
                lower_attention, lower_quant, lower_sample, lower_decoder)


class LoweringError(ValueError):
    """A node could not be lowered; the message names the node and the reason."""


@dataclass
class _Analysis:
    """What lowering needs to know about the graph before emitting anything."""
    live: set[int]
    shapes: dict[int, tuple[int, ...]]
    folded: dict[int, np.ndarray]    # node id -> its constant value
    skip: set[int]                   # folded values no kernel reads
    users: dict[int, list[int]]
    fusions: fuse.Fusions


def _analyze(graph: Graph, outputs: list[int], env: Mapping[str, int], fuse_ops: bool,
             info: DeviceInfo | None = None) -> _Analysis:
    live = live_nodes(graph, outputs + graph.effects())
    shapes = bind_shapes(graph, env, live)
    folded = fold_constants(graph, live, shapes)
    # a folded value needs a buffer only where a kernel (or the caller) reads it
    used = set(outputs) | {i for n in graph.nodes if n.id in live and n.id not in folded
                           for i in n.inputs}
    skip = {i for i in folded if i not in used}
    users = fuse.consumers_of(graph, live, skip)
    limits = info.limits if info is not None else {}
    fusions = fuse.find_fusions(
        graph, live, users, set(outputs), shapes,
        int(limits.get("max-storage-buffers-per-shader-stage", 8)),
        int(limits.get("max-compute-workgroup-storage-size", 16384)),
        fuse.GEMV_MAX_M if smat.fused_prefills(info) else fuse.QKV_MAX_M,
        None if info is None else
        lambda m, n, k, t: lower_quant.decoded_first(info, m, n, k, t)) \
        if fuse_ops else fuse.Fusions()
    return _Analysis(live, shapes, folded, skip, users, fusions)


def _lower_node(L: EmitContext, node: Node, a: _Analysis, program: Program) -> Buf | None:
    """Return the buffer holding node's value (None while it stays lazy)."""
    shape = a.shapes[node.id]
    if node.op == "input":
        buf = Buf(L.nbytes(shape, node.dtype), "input", name=node.name)
        program.inputs[node.source_name] = (buf, shape, node.dtype)
        return buf
    if node.op in ("param", "state"):
        buf = Buf(L.nbytes(shape, node.dtype), node.op, name=node.name)
        (program.params if node.op == "param" else program.states)[node.source_name] = buf
        return buf
    if node.id in a.folded:
        return L.const(a.folded[node.id], node.dtype)
    try:
        return LOWERINGS[node.op](L, node)
    except (LoweringError, BindingLimitError):
        raise
    except Exception as e:   # say which node failed, keep the cause
        raise LoweringError(f"lowering %{node.id} = {node.op} "
                            f"{'x'.join(map(str, shape)) or 'scalar'} {node.dtype} "
                            f"(attrs {node.attrs}): {type(e).__name__}: {e}") from e


def lower(graph: Graph, outputs: list[int], env: Mapping[str, int], info: DeviceInfo,
          fuse_ops: bool = True) -> Program:
    """Compile the graph for one symbol binding into a Program (memory not yet planned).

    fuse_ops=False lowers every node to its own kernel(s): the baseline fusion is measured
    against, and a debugging aid.
    """
    graph.verify()
    a = _analyze(graph, outputs, env, fuse_ops, info)
    L = EmitContext(graph, a.shapes, info, a.users, set(outputs), a.fusions, fuse_ops, INLINES)
    program = Program([], [], {}, {}, [], {})
    # sources first: a fused epilogue may read a param declared after its matmul
    order = sorted(graph.nodes, key=lambda n: (n.op not in SOURCES and n.id not in a.folded,
                                               n.id))
    for node in order:
        if node.id not in a.live or node.id in a.skip or node.id in a.fusions.absorbed:
            continue
        L.node = node.id
        buf = _lower_node(L, node, a, program)
        if buf is not None:
            L.values[node.id] = buf
    program.outputs = [Output(L.buf(i), a.shapes[i], graph.nodes[i].dtype) for i in outputs]
    program.calls, program.consts = L.calls, L.consts
    program.values = dict(L.values)
    program.shapes = a.shapes
    program.labels = {n.id: f"{n.op} {'x'.join(map(str, a.shapes[n.id])) or 'scalar'} "
                            f"{n.dtype}" for n in graph.nodes if n.id in a.shapes}
    return program
