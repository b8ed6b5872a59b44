"""Pattern fusions found on the graph before lowering (elementwise chains fuse lazily in
lowerer.py): matmul + bias + activation epilogues, residual add + norm, and attention whose
only consumer is the (0, 2, 1, 3) permute back to (batch, seq, heads, dim)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..graph import SOURCES, Graph
from .lowerer import broadcast_strides as broadcast

__all__ = ["Fusions", "find_fusions", "broadcast", "consumers_of"]

_ACTIVATIONS = {"relu": "relu", "silu": "silu", "sigmoid": "sigmoid", "tanh": "tanh"}


@dataclass
class Epilogue:
    bias: int | None = None       # node id of a (N,) bias
    activation: str = "none"
    last: int = -1                # the node whose value the fused matmul produces


@dataclass
class Fusions:
    epilogues: dict[int, Epilogue] = field(default_factory=dict)      # matmul id -> epilogue
    residuals: dict[int, tuple[int, int]] = field(default_factory=dict)  # norm id -> (x, r)
    bshd_attention: dict[int, int] = field(default_factory=dict)     # attention id -> permute id
    absorbed: set[int] = field(default_factory=set)                  # nodes not lowered alone


def consumers_of(graph: Graph, live: set[int], skip: set[int]) -> dict[int, list[int]]:
    """Return node id -> consumer ids, one entry per input slot (x * x counts twice)."""
    users: dict[int, list[int]] = {}
    for n in graph.nodes:
        if n.id in live and n.id not in skip:
            for i in n.inputs:
                users.setdefault(i, []).append(n.id)
    return users


def find_fusions(graph: Graph, live: set[int], users: dict[int, list[int]], outputs: set[int],
                 shapes: dict[int, tuple[int, ...]]) -> Fusions:
    f = Fusions()
    nodes = graph.nodes

    def only_user(i: int) -> int | None:
        u = users.get(i, [])
        return u[0] if len(u) == 1 and i not in outputs else None

    for n in nodes:
        if n.id not in live:
            continue
        if n.op == "matmul" and len(n.inputs) == 2 and n.attrs.get("activation") == "none":
            ep, cur = Epilogue(last=n.id), n.id
            u = only_user(cur)
            if u is not None and nodes[u].op == "add":
                other = [i for i in nodes[u].inputs if i != cur]
                nn_ = shapes[n.id][-1]
                if len(other) == 1 and shapes[other[0]] == (nn_,) and \
                        (other[0] < n.id or nodes[other[0]].op in SOURCES) and \
                        nodes[other[0]].dtype == n.dtype and shapes[u] == shapes[n.id]:
                    ep.bias, cur = other[0], u
                    f.absorbed.add(u)
            u = only_user(cur)
            if u is not None:
                op = nodes[u].op
                act = _ACTIVATIONS.get(op) or ("gelu" if op == "gelu" and nodes[u].attrs.get(
                    "approximate", "none") == "none" else "gelu_tanh" if op == "gelu" else None)
                if act:
                    ep.activation, cur = act, u
                    f.absorbed.add(u)
            if cur != n.id:
                ep.last = cur
                f.epilogues[n.id] = ep
        elif n.op in ("layer_norm", "rms_norm"):
            a = nodes[n.inputs[0]]
            if a.op == "add" and only_user(a.id) == n.id and a.id not in f.absorbed and \
                    shapes[a.inputs[0]] == shapes[a.inputs[1]] == shapes[a.id] and \
                    nodes[a.inputs[0]].dtype == nodes[a.inputs[1]].dtype == a.dtype:
                f.residuals[n.id] = (a.inputs[0], a.inputs[1])
                f.absorbed.add(a.id)
        elif n.op == "attention":
            u = only_user(n.id)
            if u is not None and nodes[u].op == "permute" and \
                    tuple(nodes[u].attrs["axes"]) == (0, 2, 1, 3):
                f.bshd_attention[n.id] = u
    return f
