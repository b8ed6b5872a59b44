"""MiniLM exported with torch.onnx (tests/onnx/export_minilm.py) through webrlx.onnx against
onnxruntime's CPU EP on the same inputs: agreement to 1e-4 x max|ref|."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.onnx.export_minilm import DEFAULT_OUT, export  # noqa: E402
from webrlx.onnx import InferenceSession  # noqa: E402


@pytest.fixture(scope="module")
def minilm_path() -> str:
    return str(DEFAULT_OUT if DEFAULT_OUT.exists() else export())


@pytest.mark.parametrize("batch, seq, pad", [(1, 128, 0), (3, 24, 7)])
def test_minilm_matches_onnxruntime(minilm_path: str, batch: int, seq: int, pad: int) -> None:
    rng = np.random.default_rng(batch * 1000 + seq)
    ids = rng.integers(1000, 30000, (batch, seq)).astype(np.int64)
    mask = np.ones_like(ids)
    if pad:
        mask[-1, seq - pad:] = 0          # a padded row: the mask path must agree too
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    (ref,) = ort.InferenceSession(minilm_path, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    sess = InferenceSession(minilm_path)
    (got,) = sess.run(None, feeds)
    assert got.shape == ref.shape == (batch, seq, 384) and got.dtype == np.float32
    err = float(np.abs(got - ref).max())
    assert err <= 1e-4 * float(np.abs(ref).max()), f"max error {err}"
