"""ONNX's backend node tests run against webrlx.onnx: each test directory holds model.onnx and
test_data_set_*/{input,output}_*.pb, read with our own reader; outputs are compared the way
onnx's runner compares them (same shape and dtype, assert_allclose rtol 1e-3, atol 1e-7)."""
from __future__ import annotations

import glob
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .context import OnnxImportError
from .reader import load, load_value
from .session import InferenceSession

RTOL, ATOL = 1e-3, 1e-7


@dataclass
class CaseResult:
    """The outcome of one node test: 'pass' or 'fail' with a one-line reason."""

    name: str
    status: str
    reason: str = ""
    seconds: float = 0.0


def node_test_dirs(root: str | None = None) -> list[str]:
    """The node test directories (default: the installed onnx package's), sorted by name."""
    if root is None:
        import onnx
        root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    return sorted(d for d in glob.glob(os.path.join(root, "test_*")) if os.path.isdir(d))


def run_case(case_dir: str, device: Any = None) -> CaseResult:
    """Run one node test directory on device; never raises for a failing model."""
    name = os.path.basename(case_dir)
    start = time.perf_counter()
    try:
        _run(case_dir, device)
    except AssertionError as e:
        return CaseResult(name, "fail", "wrong result: " + _first_line(e),
                          time.perf_counter() - start)
    except OnnxImportError as e:
        return CaseResult(name, "fail", _first_line(e), time.perf_counter() - start)
    except Exception as e:         # a crash in a rule or the compiler: report it, go on
        return CaseResult(name, "fail", f"{type(e).__name__}: {_first_line(e)}",
                          time.perf_counter() - start)
    return CaseResult(name, "pass", "", time.perf_counter() - start)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    if "unsupported op" in lines[0] and len(lines) > 1:
        return "unsupported: " + "; ".join(ln.split(" (opset")[0] for ln in lines[1:])
    return " ".join(lines[:2])[:300]


def _run(case_dir: str, device: Any) -> None:
    model = load(os.path.join(case_dir, "model.onnx"))
    sess = InferenceSession(os.path.join(case_dir, "model.onnx"), device=device)
    inputs = [vi for vi in model.graph.inputs if vi.name not in model.graph.initializers]
    for data_dir in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
        feeds, want = {}, []
        for i, vi in enumerate(inputs):
            path = os.path.join(data_dir, f"input_{i}.pb")
            if os.path.exists(path):
                feeds[vi.name] = load_value(path, vi.type)
        for i, vi in enumerate(model.graph.outputs):
            want.append(load_value(os.path.join(data_dir, f"output_{i}.pb"), vi.type))
        got = sess.run(None, feeds)
        assert len(got) == len(want), f"{len(got)} outputs, expected {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, f"output {i}")


def _compare(g: Any, w: Any, where: str) -> None:
    """Assert g matches w as onnx's runner does; sequences element by element."""
    if w is None:
        assert g is None, f"{where}: got {type(g).__name__}, expected an empty optional"
        return
    if isinstance(w, list):
        assert isinstance(g, list), f"{where}: got {type(g).__name__}, expected a sequence"
        assert len(g) == len(w), f"{where}: {len(g)} elements, expected {len(w)}"
        for j, (a, b) in enumerate(zip(g, w)):
            _compare(a, b, f"{where}[{j}]")
        return
    g = np.asarray(g)
    assert g.shape == w.shape, f"{where}: shape {g.shape}, expected {w.shape}"
    assert g.dtype == w.dtype, f"{where}: dtype {g.dtype}, expected {w.dtype}"
    np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=where, verbose=False)
