"""User-defined ops: one call registers the three rules an op needs (shape/dtype, numpy
reference, WGSL lowering) in the tables the built-in ops use (OPS, REFERENCE, LOWERINGS)."""
from __future__ import annotations

from typing import Any

from .compiler.registry import Lowering
from .compiler.registry import lowering as lowering_rule
from .ops import OPS, Infer, OpDef
from .reference import REFERENCE, Rule
from .tensor import Tensor

_CUSTOM: set[str] = set()   # names registered here (re-registering one replaces it)


def register_op(name: str, infer: Infer, reference: Rule, lowering: Lowering) -> None:
    """Add op `name` to webrlx: how it types, how numpy computes it, how it becomes kernels.

    Args:
        name: the op's name; must not be a built-in op.
        infer: (input shapes, input dtypes, attrs) -> (output shape, output dtype); raise
            webrlx.ShapeError for inputs it does not accept.
        reference: (input arrays, attrs) -> output array: the numpy rule, used by the
            "reference" device and as the oracle to test the kernel against.
        lowering: (ctx, node) -> the output Buf, emitting kernel calls with ctx.emit
            (webrlx.compiler.emit.EmitContext; kernels from webrlx.kernels.from_source).
    """
    if name in OPS and name not in _CUSTOM:
        raise ValueError(f"register_op(): {name!r} is a built-in op; pick another name")
    OPS[name] = OpDef(name, "other", infer)
    REFERENCE[name] = reference
    lowering_rule(name)(lowering)
    _CUSTOM.add(name)


def apply(name: str, *inputs: Tensor, **attrs: Any) -> Tensor:
    """Append a node of a registered op to the inputs' graph and return its Tensor."""
    if not inputs or any(not isinstance(t, Tensor) or t.graph is not inputs[0].graph
                         for t in inputs):
        raise ValueError(f"apply({name!r}): pass one or more Tensors of the same graph")
    node = inputs[0].graph.add(name, [t.id for t in inputs], **attrs)
    return Tensor(inputs[0].graph, node.id)
