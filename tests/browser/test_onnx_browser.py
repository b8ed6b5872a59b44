"""webrlx.onnx inside Pyodide in headless Chromium: the node-test sample of
tests/onnx/browser_sample.txt (at least one test per supported op) passes in the page, and
web/onnx.html runs MiniLM's ONNX export on the main thread and in a Worker with the outputs
webrlx computes natively for the same inputs."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tools.onnx_browser_sample import pack, read_sample  # noqa: E402

pytest.importorskip("onnx")
DIMS = "batch=1,sequence=32"


def test_onnx_node_sample_in_pyodide(browser_python: Any, web_server: str) -> None:
    names = read_sample()
    assert len(names) >= 150
    pack(names, ROOT / "build" / "onnx" / "browser_sample.tar")
    url = f"{web_server}repo/build/onnx/browser_sample.tar"
    code = f"""
import io, json, os, tarfile
from pyodide.http import pyfetch
import webrlx as wr
from webrlx.onnx.conformance import run_case
response = await pyfetch({url!r})
tarfile.open(fileobj=io.BytesIO(await response.bytes())).extractall("/tmp/onnx_nodes")
device = await wr.device_async()
results = {{}}
for name in sorted(os.listdir("/tmp/onnx_nodes")):
    r = run_case(os.path.join("/tmp/onnx_nodes", name), device)
    results[name] = [r.status, r.reason]
json.dumps({{"results": results, "adapter": device.info.name}})
"""
    got = json.loads(browser_python("main").run(code))
    results = got["results"]
    assert sorted(results) == sorted(names)
    failed = {n: r for n, r in results.items() if r[0] != "pass"}
    assert not failed, f"{len(failed)} of {len(names)} node tests fail in Pyodide on " \
                       f"{got['adapter']}: {failed}"


@pytest.fixture(scope="module")
def minilm_onnx() -> Path:
    from tests.onnx.export_minilm import DEFAULT_OUT, export
    return DEFAULT_OUT if DEFAULT_OUT.exists() else export()


def _native(path: Path) -> list[np.ndarray]:
    from webrlx.cli.onnx import parse_dims, random_feeds
    from webrlx.onnx import InferenceSession
    sess = InferenceSession(str(path))
    feeds, _ = random_feeds(sess.get_inputs(), parse_dims(DIMS), 0)
    return sess.run(None, feeds)


@pytest.mark.parametrize("thread", ["main", "worker"])
def test_onnx_page_runs_minilm(chromium: Any, web_server: str, minilm_onnx: Path,
                               thread: str) -> None:
    rel = minilm_onnx.relative_to(ROOT)
    page = chromium.new_page()
    try:
        page.goto(f"{web_server}onnx.html?mode={thread}&dims={DIMS}&model=/repo/{rel}")
        page.wait_for_function("['loaded', 'failed'].some(s => document.getElementById("
                               "'status').textContent.includes(s))", timeout=600_000)
        status = page.inner_text("#status")
        assert "loaded" in status and "navigator.gpu" in status, status
        io_rows = page.eval_on_selector_all("#io tr", "rows => rows.map(r => r.innerText)")
        page.click("#run")
        page.wait_for_function("window.onnxResult !== undefined || document.getElementById("
                               "'status').textContent.startsWith('failed')", timeout=600_000)
        result = page.evaluate("window.onnxResult ?? null")
        final = page.inner_text("#status")
        timing = page.inner_text("#timing")
    finally:
        page.close()
    assert thread != "worker" or "Web Worker" in status, status
    assert any("input_ids" in r and "tensor(int64)" in r for r in io_rows), io_rows
    assert result is not None, final
    assert "per run" in timing, timing
    (ref,) = _native(minilm_onnx)
    (out,) = result["outputs"]
    assert out["shape"] == list(ref.shape) == [1, 32, 384]
    got = np.asarray(out["values"], np.float32)
    want = ref.ravel()[:got.size]
    err = float(np.abs(got - want).max())
    assert err <= 1e-4 * float(np.abs(ref).max()), f"max error {err} vs native"
