"""notebooks/tiny_mlp.onnx, the model onnx_models.ipynb reads where torch is absent: small, the
bytes tools/make_notebook_onnx.py writes, and computing what onnxruntime and the numpy network
compute; the JupyterLite site ships it next to the notebooks."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from notebook_check import NOTEBOOK_DIR, ROOT

from webrlx.cli import lite
from webrlx.cli.web_assets import WebAssets

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

SHIPPED = NOTEBOOK_DIR / "tiny_mlp.onnx"


def _make_model() -> bytes:
    spec = importlib.util.spec_from_file_location("make_notebook_onnx",
                                                  ROOT / "tools" / "make_notebook_onnx.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_model().SerializeToString()


def test_shipped_model_is_small_and_made_by_the_script() -> None:
    data = SHIPPED.read_bytes()
    assert len(data) < 100_000
    assert data == _make_model(), "rerun `python tools/make_notebook_onnx.py` and commit"


def test_shipped_model_matches_numpy_and_onnxruntime() -> None:
    model = onnx.load(SHIPPED)
    w = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    x = np.random.default_rng(3).standard_normal((3, 16)).astype(np.float32)
    logits = np.maximum(x @ w["0.weight"].T + w["0.bias"], 0) @ w["2.weight"].T + w["2.bias"]
    expected = np.exp(logits - logits.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    (got,) = ort.InferenceSession(str(SHIPPED), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})
    np.testing.assert_allclose(got, expected, atol=1e-6)


def test_lite_site_ships_the_onnx_files_next_to_the_notebooks() -> None:
    site = lite.LiteSite(WebAssets(ROOT))
    assert SHIPPED in site.notebook_files
    assert all(p.suffix == ".onnx" and p.parent == Path(NOTEBOOK_DIR)
               for p in site.notebook_files)
