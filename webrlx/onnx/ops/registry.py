"""ONNX_OPS: the one table mapping (domain, op_type) to rows, each with an opset range, a
function building webrlx ops and an optional numpy rule for host-known inputs. Family modules
(elementwise.py, tensor.py, ...) add rows with the `op` decorator."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# build(ctx, node, inputs, attrs) -> outputs; inputs are webrlx Tensors, numpy arrays (values
# known on the host) or None (an omitted optional input)
Build = Callable[..., Sequence[Any]]
# host(node, inputs, attrs) -> outputs, all numpy: used when every input is host-known
Host = Callable[..., Sequence[Any]]


@dataclass(frozen=True)
class OpRow:
    domain: str
    op_type: str
    since: int                 # first opset version this row implements
    until: int | None          # last one (None: up to the newest)
    build: Build
    host: Host | None

    def covers(self, version: int) -> bool:
        """Whether this row implements the op at opset version."""
        return self.since <= version and (self.until is None or version <= self.until)


ONNX_OPS: dict[tuple[str, str], list[OpRow]] = {}


def op(*op_types: str, domain: str = "", since: int = 1, until: int | None = None,
       host: Host | None = None) -> Callable[[Build], Build]:
    """Register the decorated build function for op_types (one row each)."""
    def register(build: Build) -> Build:
        for name in op_types:
            row = OpRow(domain, name, since, until, build, host)
            rows = ONNX_OPS.setdefault((domain, name), [])
            for other in rows:      # two families claiming one opset: a merge mistake
                if other.covers(since) or row.covers(other.since):
                    raise ValueError(f"ONNX_OPS: {domain or 'ai.onnx'}::{name} opsets "
                                     f"{since}-{until} overlap a row from "
                                     f"{other.build.__module__}")
            rows.append(row)
        return build
    return register


def lookup(domain: str, op_type: str, version: int) -> OpRow | None:
    """The row implementing (domain, op_type) at opset version, or None."""
    for row in ONNX_OPS.get((domain, op_type), ()):
        if row.covers(version):
            return row
    return None
