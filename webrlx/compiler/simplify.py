"""Graph-level passes: bind symbolic shapes, drop dead nodes, fold constants."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..graph import Graph
from ..ops import OPS
from ..reference import evaluate
from ..shape import ShapeError, bind, eval_dim

FOLD_LIMIT = 1 << 16   # fold constant subgraphs whose result has at most this many elements


def bind_shapes(graph: Graph, env: Mapping[str, int], wanted: set[int]
                ) -> dict[int, tuple[int, ...]]:
    """Return the concrete shape of every wanted node under the symbol binding env."""
    shapes: dict[int, tuple[int, ...]] = {}
    for node in graph.nodes:
        if node.id not in wanted:
            continue
        if not node.inputs:
            shapes[node.id] = bind(node.shape, env)
            continue
        attrs = dict(node.attrs)
        if "shape" in attrs:   # reshape / expand targets may name symbols
            attrs["shape"] = tuple(d if d == -1 else eval_dim(d, env) for d in attrs["shape"])
        ins = [graph.nodes[i] for i in node.inputs]
        try:
            shape, _ = OPS[node.op].infer([shapes[n.id] for n in ins], [n.dtype for n in ins],
                                          attrs)
        except ShapeError as e:
            raise ShapeError(f"with {dict(env)}: {e}") from None
        shapes[node.id] = tuple(int(d) for d in shape)
    return shapes


def live_nodes(graph: Graph, outputs: list[int]) -> set[int]:
    """Return the ids of nodes the outputs depend on (dead-code removal)."""
    live = set(outputs)
    for node in reversed(graph.nodes):
        if node.id in live:
            live.update(node.inputs)
    return live


def fold_constants(graph: Graph, live: set[int], shapes: Mapping[int, tuple[int, ...]]
                   ) -> dict[int, np.ndarray]:
    """Evaluate nodes whose inputs are all constants; return node id -> value."""
    values: dict[int, np.ndarray] = {}
    for node in graph.nodes:
        if node.id not in live:
            continue
        if node.op == "constant":
            assert node.value is not None        # a constant node holds its value
            values[node.id] = node.value
        elif node.inputs and all(i in values for i in node.inputs) and \
                int(np.prod(shapes[node.id])) <= FOLD_LIMIT:
            values[node.id] = evaluate(node, [values[i] for i in node.inputs], shapes[node.id])
    return values
