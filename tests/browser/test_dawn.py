"""Backend tests inside Pyodide in Node over Dawn (`python -m webrlx dawn`): Chrome's WebGPU
engine and Tint on the browser's code path, here over SwiftShader's Vulkan driver.

Every run: a slice (elementwise ops, matmuls and their epilogues: a few minutes);
WEBRLX_DAWN_FULL=1: the whole backend suite. Each test is its own item, `test_dawn[NODEID]`,
with the node ids collected natively: a test that passes natively must pass under Dawn.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
FULL = os.environ.get("WEBRLX_DAWN_FULL") == "1"
# The slice: every elementwise test; matmuls with their fused epilogues, which include the
# boolean pipeline constants dawn.node refused before js_webgpu passed numbers.
SLICE = ("tests/backend/test_elementwise.py", "tests/backend/test_matmul.py::test_matmul",
         "tests/backend/test_matmul.py::test_tiled_epilogue_as_overrides_and_as_uniforms")
PATHS = ("tests/backend",) if FULL else SLICE


@functools.cache
def native_ids() -> tuple[str, ...]:
    """Collect (natively, in a subprocess) the node ids the Dawn session must reproduce."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-o",
                           "addopts=", "-p", "no:cacheprovider", *PATHS], cwd=ROOT,
                          capture_output=True, text=True, check=False,
                          env={**{k: v for k, v in os.environ.items()
                                  if k != "WEBRLX_BROWSER_REFERENCE"},   # (not passed to Dawn)
                               "WEBRLX_COLLECT_FOR_BROWSER": "1"})
    # (the reference device's selection inside Pyodide: tests/backend/conftest.py)
    if proc.returncode != 0:
        raise RuntimeError(f"collecting {PATHS} natively failed:\n{proc.stdout}{proc.stderr}")
    return tuple(line for line in proc.stdout.splitlines() if "::" in line)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dawn_case" in metafunc.fixturenames:
        metafunc.parametrize("dawn_case", native_ids(), ids=native_ids())


@functools.cache
def dawn_suite(tmp: Path) -> dict[str, Any]:
    """Run PATHS under the Dawn runner once: {"exit", "results": {nodeid: {outcome, ...}}}."""
    out = tmp / "dawn.json"
    proc = subprocess.run([sys.executable, "-m", "webrlx", "dawn", "--json", str(out), "--",
                           "pytest", *PATHS], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    if not out.is_file():
        raise RuntimeError(f"the Dawn runner gave no results (exit {proc.returncode}):\n"
                           f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return json.loads(out.read_text())


@pytest.fixture(scope="session")
def dawn_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return dawn_suite(tmp_path_factory.mktemp("dawn"))["results"]


def test_dawn(dawn_case: str, dawn_results: dict[str, Any]) -> None:
    result = dawn_results.get(dawn_case)
    if result is None:
        pytest.fail(f"{dawn_case} was not collected under Dawn", pytrace=False)
    if result["outcome"] != "passed":          # a skip under Dawn counts as a failure too
        pytest.fail(f"{dawn_case} {result['outcome']} under Dawn:\n{result['longrepr']}",
                    pytrace=False)
