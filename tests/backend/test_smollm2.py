"""SmolLM2-135M-Instruct from its GGUF matches transformers (the fixture that
tools/make_smollm2_fixture.py makes): prompt ids equal, last logits within 1e-3 of max|logit|,
greedy tokens identical. The GPU runs every fixture prompt; the reference device and the
browser run a bounded slice (WEBRLX_LONG_TESTS=1 runs everything everywhere)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import check_greedy, check_last_logits

from webrlx.models import smollm2

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LONG = os.environ.get("WEBRLX_LONG_TESTS") == "1"
IN_BROWSER = sys.platform == "emscripten"


@pytest.fixture(scope="module")
def reference():
    data = json.loads((FIXTURES / "smollm2_reference.json").read_text())
    with np.load(FIXTURES / "smollm2_reference.npz") as f:
        return data["cases"], f["logits"]


@pytest.fixture(scope="module")
def lm(backend):
    return smollm2.load(device=backend, capacity=512)


def budget(backend) -> tuple[int, int]:
    """(prompts, greedy tokens) this backend checks: all of them on a native GPU."""
    if LONG or (backend.name != "reference" and not IN_BROWSER):
        return 6, 32
    if backend.name != "reference":
        return 2, 32                     # the browser: SwiftShader runs the model
    return (1, 2) if IN_BROWSER else (2, 8)


def test_prompt_ids_equal_transformers(lm, reference):
    for case in reference[0]:
        assert lm.tokenizer.encode(case["prompt"]) == case["ids"], case["name"]


def test_last_logits_match_transformers(lm, reference, backend):
    cases, logits = reference
    check_last_logits(lm, cases, logits, budget(backend)[0])


def test_greedy_tokens_match_transformers(lm, reference, backend):
    check_greedy(lm, reference[0], *budget(backend))


def test_sampling_is_seeded_and_temperature_zero_is_greedy(lm):
    kw = dict(max_new_tokens=3, temperature=0.9, top_k=40, top_p=0.95, repetition_penalty=1.2)
    a = lm.generate("Once upon a time", seed=7, **kw)
    assert a == lm.generate("Once upon a time", seed=7, **kw)
    greedy = lm.generate_ids("Once upon a time", 3)
    assert lm.generate_ids("Once upon a time", 3, temperature=0.0, top_k=5, seed=3) == greedy


def test_stop_strings_end_the_text(lm):
    text = lm.generate("Count by sevens: 7, 14, 21, 28, 35,", 8, stop=", 49")
    assert text == " 42"                   # transformers' greedy: " 42, 49, 56, ..."


def test_bad_input_gives_clear_errors_and_the_model_stays_usable(lm):
    before = lm.generate_ids("Hello", 2)
    for kwargs, msg in [(dict(prompt=""), "prompt is empty"),
                        (dict(prompt="Hi", max_new_tokens=0), "max_new_tokens"),
                        (dict(prompt="Hi", max_new_tokens=-3), "max_new_tokens"),
                        (dict(prompt="word " * 600), "exceeds the KV cache"),
                        (dict(prompt="Hi", temperature=-1.0), "temperature"),
                        (dict(prompt="Hi", top_p=0.0), "top_p"),
                        (dict(prompt="Hi", top_p=1.5), "top_p"),
                        (dict(prompt="Hi", top_k=-1), "top_k"),
                        (dict(prompt=[1, 2, 10 ** 6]), "token ids"),
                        (dict(prompt=[1, -1]), "-1 at position 1"),
                        (dict(prompt="Hi", stop=[""]), "stop"),
                        (dict(prompt="Hi", stop=5), "stop must be a str or a list of str")]:
        kwargs.setdefault("max_new_tokens", 2)
        with pytest.raises(ValueError, match=msg):
            lm.generate(**kwargs)
    with pytest.raises(ValueError, match="role"):
        list(lm.chat([{"role": "wizard", "content": "hi"}], max_new_tokens=2))
    with pytest.raises(ValueError, match=r"messages\[1\] needs a 'content' string"):
        list(lm.chat([{"role": "user", "content": "hi"}, {"role": "user"}], max_new_tokens=2))
    assert lm.generate_ids("Hello", 2) == before


def test_decode_steps_stay_on_the_gpu(lm, backend):
    """64 decode steps: at most 64/4 + 1 readbacks, and nothing created after the first."""
    steps = 64 if backend.name != "reference" else 2        # the reference has no GPU
    lm.generate_ids("The", 2)                               # plans for both bindings exist
    stats0 = dict(lm.device.stats)
    lm.generate_ids("The", steps + 1)                       # prefill + decode steps
    stats = dict(lm.device.stats)
    grown = {k: stats.get(k, 0) - stats0.get(k, 0) for k in ("buffers", "pipelines",
                                                           "bind_groups", "readbacks")}
    assert grown["buffers"] == grown["pipelines"] == grown["bind_groups"] == 0, grown
    if backend.name != "reference":
        assert 0 < grown["readbacks"] <= steps // 4 + 1, grown


def test_chat_streams_with_the_models_template(lm):
    pieces = list(lm.chat([{"role": "user", "content": "Say hi."}], max_new_tokens=2))
    assert all(isinstance(p, str) for p in pieces) and lm.stats.new_tokens >= 1
    text = lm.render_chat([{"role": "user", "content": "Say hi."}])
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n")
