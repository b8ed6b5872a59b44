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


def test_minilm_float16_matches_sentence_transformers(backend, reference):
    """dtype="float16": f16 weights and activations (tensor cores where the adapter offers
    subgroup matrices), f32 accumulation and pooling: cosine >= 0.9999 to the f32 reference,
    float32 rows out."""
    sentences, want, _ = reference
    enc = minilm.load(device=backend, dtype="float16")
    qkv = enc.graph.params["encoder.layer.0.attention.self.qkv.weight"]
    assert enc.graph.nodes[qkv].dtype.name == "float16"
    got = enc.encode(sentences, batch_size=4)
    assert got.shape == want.shape and got.dtype == np.float32
    cos = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cos.min() >= 0.9999, cos
    assert np.abs(got - want).max() <= 2e-3      # (9e-4 on lavapipe)


def test_minilm_rejects_an_unknown_dtype():
    with pytest.raises(ValueError, match=r"load\(\): dtype must be 'float32' or 'float16', "
                                         r"got 'int8'"):
        minilm.load(device="reference", dtype="int8")


def test_pooling_is_a_masked_sum_and_one_norm(backend, reference):
    """Mean pooling + L2 normalization run as two kernels (the mask row @ x, then rms_norm
    weighted 1 / sqrt(H)), and padding a sentence inside a batch changes nothing: rows of
    several lengths equal each sentence alone."""
    enc = minilm.load(device=backend)
    texts = ["A short one.", "A somewhat longer sentence about pooling and padding."]
    together = enc.encode(texts)
    alone = np.concatenate([enc.encode([t]) for t in texts])
    np.testing.assert_allclose(together, alone, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=-1), 1.0, rtol=1e-5)
    if backend.name != "reference":
        names = [c.name for c in enc.executable.last_plan.program.calls]
        assert names[-1] == "rms_norm" and names[-2] in ("gemv", "matmul"), names[-4:]


HEAVY = ("matmul", "attention", "add+layer_norm", "layer_norm")   # the slow ones to compile


def _heavy_pipelines(plan) -> set[int]:
    return {id(d.pipeline) for d, name in zip(plan.dispatches, plan.ran)
            if name.startswith(HEAVY)}


def test_warm_up_compiles_what_later_batches_run(backend, reference):
    """After warm_up (one sentence at 16 and 128 tokens), one sentence at those lengths
    compiles nothing more; on a software adapter (matmuls tuned per row class) a batch of 3
    short sentences or of 2 long ones runs the warm-up's matmul, attention and norm
    pipelines too (only small elementwise kernels, specialized to shapes, are new).
    Autotune timing is off, as in the browser. Embeddings as the fixture's."""
    from webrlx.runtime import autotune
    sentences, want, _ = reference
    enc = minilm.load(device=backend)
    saved = autotune.TIME_VARIANTS
    autotune.TIME_VARIANTS = False
    try:
        assert enc.warm_up() > 0
        if backend.name == "reference":
            return
        warm = set().union(*(_heavy_pipelines(p) for p in enc.executable.engine.plans.values()))
        before = enc.device.stats["pipelines"]
        short = [i for i, s in enumerate(sentences) if len(s.split()) < 8][:3]
        got = enc.encode([sentences[short[0]]])
        enc.encode(["a fairly long sentence " * 30])            # 122 tokens: the 128 bucket
        assert enc.device.stats["pipelines"] == before
        if enc.device.info.software:
            got = enc.encode([sentences[i] for i in short])
            short_plan = enc.executable.last_plan
            enc.encode(["a fairly long sentence " * 20] * 2)
            for plan in (short_plan, enc.executable.last_plan):
                assert _heavy_pipelines(plan) <= warm, plan.ran
    finally:
        autotune.TIME_VARIANTS = saved
    np.testing.assert_allclose(got, want[short[:len(got)]], atol=1e-4)


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
        def count(exe):   # kernels, less the sums of split-K matmuls (GPUs; as many in both)
            return sum("split-K sum" not in c.name for c in exe.last_plan.program.calls)
        n_fused, n_unfused = count(encoder.executable), count(unfused.executable)
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


def test_varied_inputs_keep_plans_and_memory_bounded(encoder, reference):
    """Sentences of varied lengths in varied batches (2,000 sentences of up to 180 words with
    WEBRLX_SOAK=1; 60 batches of short ones by default): the plan cache stays within its size
    (LRU; lengths bucketed to SEQ_BUCKET), host RSS stays flat once warmed up, and the
    results stay right."""
    import os
    import sys

    from helpers import rss_mb
    full = os.environ.get("WEBRLX_SOAK") == "1"
    calls = 10 if sys.platform == "emscripten" else 60
    rng = np.random.default_rng(5)
    words = "the a GPU runs sentence model fast small browser python graph kernel".split()
    most = 180 if full else 30
    texts = [" ".join(rng.choice(words, int(rng.integers(1, most)))) for _ in range(2000)]
    sizes = rng.integers(1, 9 if full else 5, 2000)
    engine = encoder.executable.engine
    engine.max_plans = 4                             # fewer than the shapes seen: evicts
    rss0 = None
    try:
        i = k = 0
        while i < len(texts) if full else k < calls:
            if k == 15:                              # warmed up: plans at their bound
                rss0 = rss_mb()
            encoder.encode(texts[i: i + sizes[k]], batch_size=8)
            if hasattr(engine, "plans"):
                assert len(engine.plans) <= 4
            i, k = i + sizes[k], k + 1
        rss1 = rss_mb()
        if rss0 is not None and rss1 is not None:
            assert rss1 - rss0 < 40, f"host RSS grew {rss1 - rss0:.0f} MB over {k - 15} batches"
    finally:
        engine.max_plans = 16
    sentences, want, _ = reference
    np.testing.assert_allclose(encoder.encode(sentences[:3]), want[:3], atol=1e-4)


def test_encode_ids_matches_sentence_transformers_and_checks_rows(encoder, reference):
    """encode_ids (the Ray Embedder's: it tokenizes once to check lengths) of the fixture's
    ids gives sentence-transformers' embeddings; a row over MAX_LENGTH or empty is refused."""
    sentences, want, _ = reference
    rows = [encoder.tokenizer.encode(s, minilm.MAX_LENGTH) for s in sentences]
    got = encoder.encode_ids(rows, batch_size=4)
    cos = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cos.min() >= 0.9999 and np.abs(got - want).max() <= 1e-4
    long = encoder.tokenizer.encode("word " * 300, None)
    for bad in ([rows[0], long], [[]]):
        with pytest.raises(ValueError, match=r"encode_ids\(\): rows\[\d\] has \d+ ids"):
            encoder.encode_ids(bad)
