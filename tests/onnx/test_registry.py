"""The ONNX_OPS table: every family module registers (auto-imported), and two rows claiming
the same op and opset are refused (parallel family files cannot silently shadow each other)."""
from __future__ import annotations

import pkgutil

import pytest

from webrlx.onnx import ops
from webrlx.onnx.ops import ONNX_OPS, lookup, op


def test_every_family_module_registers_rows() -> None:
    families = {m.name for m in pkgutil.iter_modules(ops.__path__)} - {"registry", "common"}
    modules = {row.build.__module__.rsplit(".", 1)[1] for rows in ONNX_OPS.values()
               for row in rows}
    assert families <= modules


def test_lookup_by_opset_and_overlap_refused() -> None:
    assert lookup("", "Relu", 14) is not None
    assert lookup("", "NoSuchOp", 14) is None
    with pytest.raises(ValueError, match="Relu opsets 1-None overlap a row from"):
        op("Relu")(lambda ctx, node, ins, attrs: ins)
