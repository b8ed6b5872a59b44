"""ONNX's 1,765 backend node tests (onnx==1.22.0) against webrlx.onnx on the default device:
every test not in tests/onnx/node_xfail.py must pass, and every listed one must still fail (so
the table shrinks as ops land). The whole list runs here (about 15 s on lavapipe: pipelines are
cached per device); tools/onnx_coverage.py writes the same run as coverage.md/json."""
from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("onnx")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import webrlx as wr  # noqa: E402
from tools.onnx_coverage import expected_reason, load_xfail  # noqa: E402
from webrlx.onnx.conformance import node_test_dirs, run_case  # noqa: E402


def test_node_suite() -> None:
    dirs = node_test_dirs()
    assert len(dirs) == 1765, "onnx==1.22.0 ships 1,765 node test directories"
    device = wr.device()
    xfail = load_xfail()
    unexpected, stale, passed = [], [], 0
    for d in dirs:
        r = run_case(d, device)
        why = expected_reason(r.name, xfail)
        if r.status == "pass":
            passed += 1
            if why:
                stale.append(f"{r.name} passes: remove it from node_xfail.py ({why})")
        elif not why:
            unexpected.append(f"{r.name}: {r.reason}")
    assert not unexpected, f"{len(unexpected)} unexpected failures:\n" + "\n".join(unexpected)
    assert not stale, "\n".join(stale)
    assert passed >= 900
