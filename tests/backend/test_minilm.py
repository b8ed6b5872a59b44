"""all-MiniLM-L6-v2 through webrlx matches sentence-transformers (the committed fixture made by
tools/make_minilm_fixture.py): cosine >= 0.9999 and max abs diff <= 1e-4 per sentence."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from webrlx.models import minilm

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def reference():
    sentences = json.loads((FIXTURES / "minilm_sentences.json").read_text())
    with np.load(FIXTURES / "minilm_reference.npz") as f:
        return sentences, f["embeddings"], f["input_ids"]


@pytest.fixture(scope="module")
def encoder(backend):
    return minilm.load(device=backend)


def test_tokenizer_matches_fixture_ids(encoder, reference):
    sentences, _, ids = reference
    for s, row in zip(sentences, ids):
        assert encoder.tokenizer.encode(s, minilm.MAX_LENGTH) == [int(i) for i in row if i]


def test_minilm_embeddings_match_sentence_transformers(encoder, reference):
    sentences, want, _ = reference
    got = encoder.encode(sentences, batch_size=4)
    assert got.shape == want.shape == (len(sentences), 384) and got.dtype == np.float32
    cos = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cos.min() >= 0.9999, cos
    assert np.abs(got - want).max() <= 1e-4


def test_one_executable_serves_every_shape(encoder):
    long = "a somewhat longer sentence with more tokens in it, " * 3
    a = encoder.encode(["short", long])
    b = encoder.encode(["short"])
    np.testing.assert_allclose(a[0], b[0], atol=1e-5)     # padding to a batch changes nothing
    if encoder.device.info.backend != "reference":
        assert len(encoder.executable.engine.plans) >= 2       # one plan per (batch, seq) binding


def test_fused_and_unfused_minilm_agree(encoder, reference):
    sentences = reference[0][:3]
    unfused = minilm.load(device=encoder.device, fuse=False)
    a, b = encoder.encode(sentences), unfused.encode(sentences)
    np.testing.assert_allclose(a, b, atol=2e-6)
    if encoder.device.info.backend != "reference":
        n_fused = len(encoder.executable.last_plan.dispatches)
        n_unfused = len(unfused.executable.last_plan.dispatches)
        assert n_fused < n_unfused * 0.7, (n_fused, n_unfused)   # 69 vs 109 here


@pytest.mark.parametrize("texts, batch_size, error, msg", [
    (["a"], -1, ValueError, r"encode\(\): batch_size must be an int >= 1, got -1"),
    (["a"], 0, ValueError, r"batch_size must be an int >= 1, got 0"),
    (["a"], 2.5, ValueError, r"batch_size must be an int >= 1, got 2.5"),
    ("one string", 8, TypeError, r"texts must be a list of strings, not one string"),
    (["ok", 3], 8, TypeError, r"texts\[1\] must be a str, got int"),
])
def test_encode_rejects_bad_arguments_then_works(encoder, reference, texts, batch_size, error,
                                                 msg):
    with pytest.raises(error, match=msg):
        encoder.encode(texts, batch_size=batch_size)
    sentences, want, _ = reference
    np.testing.assert_allclose(encoder.encode(sentences[:2], batch_size=1), want[:2], atol=1e-4)
