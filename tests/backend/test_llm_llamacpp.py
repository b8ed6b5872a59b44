"""webrlx against llama.cpp, the second reference of issue 31 (transformers is the first:
test_llm_families.py), on the committed fixtures of tests/fixtures/llamacpp/ and what llama.cpp
(llama-cpp-cffi 0.4.42, on the GPU machine) recorded for them: reference.json and
reference_logits.npz, made by `python tools/llamacpp_reference.py run` through
bench/device_llamacpp_ref.sh (the fixtures by `tools/llamacpp_reference.py make`).

- F32 weights, llama.cpp's CPU backend (f32 throughout, f32 KV cache): the last logits within
  1e-5 x max|logit| and 32 greedy tokens equal, on 4 prompts (llama, mistral, qwen2).
- Q8_0 and Q4_K weights, llama.cpp's Vulkan backend: the last logits within 5e-3 x max|logit|
  (measured up to 2.7e-3). Greedy tokens are not compared there: llama.cpp's Vulkan kernels
  compute in f16, and on these small random models the top two logits are often that close.
- Prompt ids equal llama.cpp's tokenizer's, except one SentencePiece case (a prompt that starts
  with two spaces) where llama.cpp 0.4.42 and transformers differ: ours are transformers'
  (test_llm_families.py checks them).
- llama.cpp 0.4.42 ignores Mistral's sliding window (a llama-arch file), so the mistral files
  are compared with our window off; with it on (transformers' Mistral) they must differ.
- The qwen3, gemma2, gemma3 and phi3 fixtures do not run on llama.cpp 0.4.42 (reference.json
  records each error: an unknown architecture, an abort, a crash, and for phi3 a vocabulary
  lookup: the fixture has a byte-level BPE vocabulary without Phi-3's <|end|>); they are
  left out here.
Native only (tests/browser/conftest.py: NATIVE_ONLY); the browser runs the same kernels through
test_chat_families.py."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from webrlx.models import llm

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "llamacpp"
REF = json.loads((HERE / "reference.json").read_text())
LOGITS = np.load(HERE / "reference_logits.npz")
RAN = sorted(name for name, e in REF["files"].items() if "error" not in e)
# (file, prompt index) whose ids differ from llama.cpp's: SentencePiece with 2 leading spaces
SPM_SPACES = {("mistral-q8_0.gguf", 2), ("mistral-f32.gguf", 2)}


@pytest.fixture(scope="module", params=RAN)
def fixture_file(request):
    return request.param


@pytest.fixture(scope="module")
def lm(fixture_file, backend):
    return _load(fixture_file, backend, llamacpp_window=True)


def _load(name: str, backend, llamacpp_window: bool) -> llm.LanguageModel:
    """The fixture as llama.cpp runs it (mistral: no sliding window), or as the file says."""
    path = HERE / name
    assert hashlib.sha256(path.read_bytes()).hexdigest() == REF["files"][name]["sha256"], \
        f"{name} is not the file llama.cpp ran: rerun bench/device_llamacpp_ref.sh"
    if not (llamacpp_window and name.startswith("mistral")):
        return llm.load(path, device=backend, max_context=128)
    mp = pytest.MonkeyPatch()
    config = llm.model_config
    mp.setattr(llm, "model_config", lambda f: dataclasses.replace(config(f), window=0))
    try:
        return llm.load(path, device=backend, max_context=128)
    finally:
        mp.undo()


def test_prompt_ids_equal_llamacpp(lm, fixture_file):
    for k, (prompt, rec) in enumerate(zip(REF["prompts"], REF["files"][fixture_file]["prompts"],
                                          strict=True)):
        if (fixture_file, k) not in SPM_SPACES:
            assert lm.tokenizer.encode(prompt) == rec["ids"], prompt


def test_last_logits_match_llamacpp(lm, fixture_file):
    f32 = fixture_file.endswith("-f32.gguf")
    where, tol = ("cpu", 1e-5) if f32 else ("vulkan", 5e-3)
    for k, rec in enumerate(REF["files"][fixture_file]["prompts"]):
        lm.generate_ids(rec["ids"], 1)
        got = lm.last_logits.numpy().reshape(-1)
        want = LOGITS[f"{fixture_file}/{k}/{where}"]
        err = np.abs(got - want).max()
        assert err <= tol * np.abs(want).max(), (k, err, np.abs(want).max())


def test_greedy_tokens_equal_llamacpp_on_f32(lm, fixture_file):
    if not fixture_file.endswith("-f32.gguf"):
        return                                   # f16 on llama.cpp's side: see the docstring
    for rec in REF["files"][fixture_file]["prompts"]:
        assert lm.generate_ids(rec["ids"], REF["steps"], ignore_eos=True) == rec["tokens_cpu"]


def test_mistral_window_is_what_llamacpp_leaves_out(backend):
    """With the file's sliding window (8 keys, as transformers' Mistral) the logits differ from
    llama.cpp's past 8 tokens: the agreement above is not by chance."""
    lm = _load("mistral-f32.gguf", backend, llamacpp_window=False)
    rec = REF["files"]["mistral-f32.gguf"]["prompts"][0]
    assert len(rec["ids"]) > 8 and lm.config.window == 8
    lm.generate_ids(rec["ids"], 1)
    got, want = lm.last_logits.numpy().reshape(-1), LOGITS["mistral-f32.gguf/0/cpu"]
    assert np.abs(got - want).max() > 0.1 * np.abs(want).max()
