"""`python -m webrlx bench --browser`'s onnx runner (webrlx.onnx in Pyodide on build/minilm.onnx):
its code, run natively on a small BERT-shaped model, gives numpy's mean-pooled, normalized
embedding; main() routes the export, runs it beside the others and reports cosines and ratios,
and skips it with the install commands when the export cannot be made. No browser here: the
harness and the other runners are faked."""
from __future__ import annotations

import ast
import asyncio
import contextlib
import sys
import types
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from webrlx.cli import bench_browser
from webrlx.models import assets

VOCAB, DIM = 30_000, 8


def _run_coroutine(coro: Any) -> Any:
    """asyncio.run in a fresh thread: a session-wide Playwright sync API (the browser tests)
    keeps an event loop running on the main thread, where asyncio.run refuses to start."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _bert_shaped(rng: np.random.Generator) -> tuple[bytes, np.ndarray, np.ndarray]:
    """hidden = tokens[input_ids] + types[token_type_ids] * attention_mask, as ONNX."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    tokens = rng.standard_normal((VOCAB, DIM)).astype(np.float32)
    kinds = rng.standard_normal((2, DIM)).astype(np.float32)
    dims = ["batch", "seq"]
    nodes = [helper.make_node("Gather", ["tokens", "input_ids"], ["t"]),
             helper.make_node("Gather", ["kinds", "token_type_ids"], ["k"]),
             helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["m", "last"], ["m3"]),
             helper.make_node("Add", ["t", "k"], ["s"]),
             helper.make_node("Mul", ["s", "m3"], ["hidden"])]
    graph = helper.make_graph(
        nodes, "bert_shaped",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims)
         for n in ("input_ids", "attention_mask", "token_type_ids")],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [*dims, DIM])],
        [numpy_helper.from_array(tokens, "tokens"), numpy_helper.from_array(kinds, "kinds"),
         numpy_helper.from_array(np.array([-1], np.int64), "last")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model.SerializeToString(), tokens, kinds


def test_onnx_run_code_pools_and_normalizes_as_numpy() -> None:
    model, tokens, kinds = _bert_shaped(np.random.default_rng(0))
    ids = {"a": bench_browser.case_ids(3, 12)}
    namespace: dict[str, Any] = {"MODEL_BYTES": model, "IDS": ids, "REPEATS": 2}
    code = compile(bench_browser.ONNX_RUN, "<ONNX_RUN>", "exec",
                   flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    coro = eval(code, namespace)       # top-level await, as Pyodide's runPythonAsync runs it
    if coro is not None:
        _run_coroutine(coro)
    case = namespace["out"]["cases"]["a"]
    rows = np.asarray(ids["a"])
    pooled = (tokens[rows] + kinds[0]).mean(1)
    want = pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(case["embedding"]), want, atol=1e-5)
    assert case["first_ms"] > 0 and len(case["warm_all_ms"]) == 2
    assert namespace["out"]["adapter"]


@pytest.fixture
def fake_browser(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """A fake browser_harness (server and Chromium) and asset build; records the routes."""
    seen: dict[str, Any] = {}

    @contextlib.contextmanager
    def web_server(assets_: Any, routes: dict[str, Path]) -> Iterator[str]:
        seen["routes"] = routes
        yield "http://127.0.0.1:1/"

    @contextlib.contextmanager
    def chromium() -> Iterator[Any]:
        yield types.SimpleNamespace(browser=types.SimpleNamespace(version="fake 1"))
    harness = types.ModuleType("browser_harness")
    harness.web_server, harness.chromium = web_server, chromium  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "browser_harness", harness)
    monkeypatch.setattr("webrlx.cli.web_assets.build", lambda root, tests=False: None)
    monkeypatch.setattr("webrlx.cli.serve.page_config", lambda assets_: {})
    monkeypatch.setattr(assets, "minilm_dir", lambda path=None: tmp_path)
    monkeypatch.setattr(bench_browser, "ONNX_PATH", tmp_path / "minilm.onnx")
    return seen


def _run(first: float, warm: float, rows: int, scale: float = 1.0) -> dict[str, Any]:
    emb = (np.ones((rows, 384)) * scale).tolist()
    return {"adapter": "SwiftShader", "load_s": 0.1,
            "cases": {"a": {"first_ms": first, "warm_ms": warm, "embedding": emb}}}


def test_bench_browser_runs_the_onnx_runner_beside_main_and_native(
        monkeypatch: pytest.MonkeyPatch, fake_browser: dict[str, Any]) -> None:
    from webrlx.cli.bench import main_bench
    exported = []

    def fake_export(model_dir: Path) -> Path:
        exported.append(model_dir)
        return bench_browser.ONNX_PATH
    monkeypatch.setattr(bench_browser, "export_onnx", fake_export)
    calls = []

    def fake_onnx(ctx: Any, url: str, config: dict, ids: dict, repeats: int) -> dict:
        calls.append((url, ids, repeats))
        return {**_run(40.0, 8.0, len(ids["a"]), scale=2.0), "boot_s": 1.0, "fetch_s": 0.5}
    monkeypatch.setattr(bench_browser, "run_onnx", fake_onnx)
    monkeypatch.setattr(bench_browser, "run_pyodide",
                        lambda ctx, url, mode, config, ids, repeats, warm_up=True:
                        _run(20.0, 4.0, len(ids["a"])))
    monkeypatch.setattr(bench_browser, "run_native",
                        lambda ids, repeats, timeout, warm_up=True: _run(5.0, 1.0, 3))
    out = main_bench(["--browser", "--cases", "a", "--repeats", "2",
                      "--runners", "main,onnx,native"])
    assert exported and fake_browser["routes"]["/onnx/"] == bench_browser.ONNX_PATH.parent
    assert "/ort/" not in fake_browser["routes"]
    assert calls == [("http://127.0.0.1:1/", {"a": bench_browser.case_ids(3, 12)}, 2)]
    case = out["cases"]["a"]
    assert case["onnx"]["warm_ms"] == 8.0 and case["onnx"]["cosine_vs_reference"] == \
        pytest.approx(1.0)
    assert case["ratios"]["webrlx_onnx_over_main_warm"] == 2.0
    assert out["load"]["onnx"] == {"boot_s": 1.0, "fetch_s": 0.5, "load_s": 0.1}
    assert "skipped" not in out


def test_bench_browser_skips_the_onnx_runner_without_the_export(
        monkeypatch: pytest.MonkeyPatch, fake_browser: dict[str, Any],
        capsys: pytest.CaptureFixture[str]) -> None:
    from webrlx.cli.bench import main_bench
    monkeypatch.setattr(bench_browser, "has_module", lambda name: name != "transformers")
    monkeypatch.setattr(bench_browser, "run_native",
                        lambda ids, repeats, timeout, warm_up=True: _run(5.0, 1.0, 3))
    out = main_bench(["--browser", "--cases", "a", "--runners", "onnx,native"])
    assert "pip install transformers" in capsys.readouterr().err
    assert out["runners"] == ["native"] and list(out["skipped"]) == ["onnx"]
    assert "routes" not in fake_browser       # no browser launched
