"""webrlx.distributed.generate: the actor class's row policy in-process (greedy completions equal
LanguageModel.generate, bad rows marked, strict names the row), and on a local Ray and as Ray
Serve replicas with WEBRLX_RAY_FULL=1 (each starts Ray and loads SmolLM2 in another process)."""
from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("ray")
from webrlx import distributed as wd  # noqa: E402
from webrlx.models import smollm2  # noqa: E402
from webrlx.models.assets import smollm2_gguf  # noqa: E402

FULL = os.environ.get("WEBRLX_RAY_FULL") == "1"
PROMPTS = ["The capital of France is", "", None, "word " * 300, "Two plus two is"]
TOKENS = 4


@pytest.fixture(scope="module")
def generator():
    return wd.Generator(str(smollm2_gguf(None)), max_new_tokens=TOKENS, max_context=256)


def batch() -> dict[str, np.ndarray]:
    return {"id": np.arange(10, 10 + len(PROMPTS)), "prompt": np.array(PROMPTS, dtype=object)}


def test_completions_equal_generate_and_bad_rows_are_marked(generator):
    out = generator(batch())
    lm = generator.lm
    assert list(out["id"]) == list(range(10, 15))
    for i in (0, 4):
        assert out["error"][i] is None
        assert out["completion"][i] == lm.generate(PROMPTS[i], TOKENS)
    assert out["error"][1] == "empty text" and out["error"][2].startswith("not text")
    assert out["error"][3].startswith("over the context: ")
    assert all(out["completion"][i] is None for i in (1, 2, 3))


def test_strict_names_the_row(generator):
    generator.strict = True
    try:
        with pytest.raises(wd.RowError, match="row id 11: empty text"):
            generator(batch())
    finally:
        generator.strict = False


@pytest.mark.skipif(not FULL, reason="WEBRLX_RAY_FULL=1: a local Ray and SmolLM2 in actors")
def test_generate_on_ray_equals_generate():
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        prompts = ["The capital of France is", "Two plus two is", "My favourite colour"]
        ds = ray.data.from_items([{"prompt": p} for p in prompts])
        rows = wd.generate(ds, smollm2_gguf(None), max_new_tokens=TOKENS, concurrency=2,
                           num_cpus=0.5, max_context=256).take_all()
    finally:
        ray.shutdown()
    lm = smollm2.load(capacity=256)
    assert sorted((r["prompt"], r["completion"]) for r in rows) == sorted(
        (p, lm.generate(p, TOKENS)) for p in prompts)


@pytest.mark.skipif(not FULL, reason="WEBRLX_RAY_FULL=1: Ray Serve with 2 replicas")
def test_serve_app_replicas_answer_like_generate():
    import httpx
    import ray
    from ray import serve
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": 8765})
        serve.run(wd.serve_app(smollm2_gguf(None), 2, embedding_model=None, max_context=256))
        prompt = "The capital of France is"
        texts = [httpx.post("http://127.0.0.1:8765/v1/completions", timeout=300,
                            json={"prompt": prompt, "max_tokens": TOKENS}).json()
                 ["choices"][0]["text"] for _ in range(4)]
    finally:
        serve.shutdown()
        ray.shutdown()
    assert texts == [smollm2.load(capacity=256).generate(prompt, TOKENS)] * 4
