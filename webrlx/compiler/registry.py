"""The lowering rule table: op name -> the function that turns a node into kernel calls.

Rules register with `@lowering(*ops, inlines=...)`. `inlines=True` marks a rule that reads lazy
inputs (an unmaterialized elementwise chain or view), so a producer feeding only such rules
stays lazy and fuses into the consumer's kernel; INLINES is derived from the registrations.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..graph import Node
    from .emit import EmitContext
    from .program import Buf

Lowering = Callable[["EmitContext", "Node"], "Buf | None"]   # None: the value stays lazy
LOWERINGS: dict[str, Lowering] = {}
INLINES: set[str] = set()          # ops whose rule reads lazy inputs


def lowering(*ops: str, inlines: bool = False) -> Callable[[Lowering], Lowering]:
    """Register fn as the lowering of `ops` (replacing an earlier rule for the same op)."""
    def register(fn: Lowering) -> Lowering:
        for op in ops:
            LOWERINGS[op] = fn
            if inlines:
                INLINES.add(op)
            else:
                INLINES.discard(op)
        return fn
    return register
