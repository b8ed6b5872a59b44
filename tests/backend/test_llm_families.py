"""Every GGUF family webrlx.models.llm runs (llama with Llama 3 rope scaling, mistral with a
sliding window, qwen2, qwen3, gemma2, gemma3, phi3) against transformers on the same weights:
a small random-weight model per family from tools/make_llm_fixtures.py (made on first use into
build/llm_fixtures/, then cached), loaded from its GGUF by webrlx and by transformers' GGUF
reader (dequantized, torch CPU f32, under the family's full config). Per family and type:
prompt ids equal transformers' tokenizer read from the GGUF, last logits within
1e-3 x max|logit|, 32 greedy tokens equal, on 4 prompts. On llama Q8_0, decoding 4 steps a
submit (llm.DECODE_STEPS_PER_SUBMIT) and 1 step a submit draw the same tokens, greedy (as
transformers') and seeded, sync and async.

By default each family runs Q8_0 and Q4_K, and llama also Q2_K, Q3_K, Q5_K and Q6_K (one
quant type per family plus every K type on one family); WEBRLX_LLM_TYPES=F32,Q8_0,Q6_K (any
of the types the tools write: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 through the gguf
package, Q2_K .. Q6_K, IQ4_NL, IQ4_XS through tools/kquant.py) runs every family in those
types instead. The fixtures of 256-weight blocks are the wide shape (width 256), the others
width 64.
Needs torch, transformers, gguf and accelerate (skipped without them, e.g. in Pyodide)."""
from __future__ import annotations

import functools
import io
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from webrlx.cli import gguf_info
from webrlx.models import llm

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "llm_fixtures"
FAMILIES = ["llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"]
if os.environ.get("WEBRLX_LLM_TYPES"):
    CASES = [(f, t) for f in FAMILIES for t in os.environ["WEBRLX_LLM_TYPES"].split(",")]
else:
    CASES = [(f, t) for t in ("Q8_0", "Q4_K") for f in FAMILIES] + \
        [("llama", t) for t in ("Q2_K", "Q3_K", "Q5_K", "Q6_K")]
PROMPTS = ["The quick brown fox jumps over the lazy dog",
           "Hello, world! 123 4567 is a number.",
           "  two leading spaces,\nnewlines\n\nand tabs\tstay",
           "Once upon a time, there was a little robot named Bolt who"]
STEPS = 32


def _tools():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")            # transformers' GGUF loader needs it
    sys.path.insert(0, str(ROOT / "tools"))
    import make_llm_fixtures
    return make_llm_fixtures


@pytest.fixture(scope="module", params=CASES,
                ids=lambda p: f"{p[0]}-{p[1]}")
def case(request):
    """(file, transformers' ids / last logits / greedy tokens per prompt) of a family x type."""
    return _reference(*request.param)


@functools.cache
def _reference(family: str, qtype: str) -> tuple[Path, list]:
    import torch
    from transformers import AutoTokenizer
    mk = _tools()
    name = f"{family}-{qtype.lower()}.gguf"
    wide = mk.is_wide(qtype)
    if not (CACHE / name).exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        mk.write_gguf(family, *mk.make_model(family, wide=wide), qtype, CACHE / name)
    ref = mk.transformers_model(family, CACHE / name, wide=wide)
    tok = AutoTokenizer.from_pretrained(str(CACHE), gguf_file=name)
    want = []
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = tok(prompt)["input_ids"]
            seq = list(ids)
            logits = ref(torch.tensor([seq])).logits[0, -1].numpy()
            for _ in range(STEPS):                          # greedy, past EOS as ours
                seq.append(int(ref(torch.tensor([seq])).logits[0, -1].argmax()))
            want.append((ids, logits, seq[len(ids):]))
    return CACHE / name, want


@pytest.fixture(scope="module")
def lm(case, backend):
    return llm.load(case[0], device=backend, max_context=128)


def test_prompt_ids_equal_transformers(lm, case):
    for prompt, (ids, _, _) in zip(PROMPTS, case[1], strict=True):
        assert lm.tokenizer.encode(prompt) == ids, prompt


def test_last_logits_match_transformers(lm, case):
    for prompt, (ids, want, _) in zip(PROMPTS, case[1], strict=True):
        lm.generate_ids(ids, 1)
        got = lm.last_logits.numpy().reshape(-1)
        err = np.abs(got - want).max()
        assert err <= 1e-3 * np.abs(want).max(), (prompt, err, np.abs(want).max())


def test_greedy_tokens_match_transformers(lm, case):
    for prompt, (ids, _, greedy) in zip(PROMPTS, case[1], strict=True):
        assert lm.generate_ids(ids, STEPS, ignore_eos=True) == greedy, prompt


def write_mamba_gguf(path: Path) -> Path:
    """A GGUF of an architecture webrlx does not run ("mamba": one 4x32 f32 tensor), written by
    the gguf package (the browser and gguf-info tests use it too)."""
    import gguf
    w = gguf.GGUFWriter(str(path), "mamba")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_unknown_architecture_names_it_and_the_supported_ones(tmp_path):
    path = write_mamba_gguf(tmp_path / "mamba.gguf")
    with pytest.raises(llm.UnsupportedModelError, match=r"'mamba'.*gemma2.*llama.*qwen3"):
        llm.load(path, device="reference")
    out = io.StringIO()                                    # `python -m webrlx gguf info`
    assert gguf_info.info(str(path), out) == 1
    assert "webrlx runs it: no (" in out.getvalue() and "'mamba'" in out.getvalue()


def test_gguf_info_reports_a_fixture(case):
    out = io.StringIO()
    assert gguf_info.info(str(case[0]), out) == 0
    text = out.getvalue()
    assert "general.architecture (string)" in text and "webrlx runs it: yes" in text


# -- several decode steps per submit (llm.DECODE_STEPS_PER_SUBMIT), on the llama Q8_0 case --
STEPS_K = 11      # prefill + 10 decode steps: submits of 4, 4 and 2 between the readbacks


@pytest.fixture(scope="module")
def llama_lm(backend):
    return llm.load(_reference("llama", "Q8_0")[0], device=backend, max_context=128)


def _tokens(lm, monkeypatch, k: int, **kwargs) -> list[list[int]]:
    monkeypatch.setattr(llm, "DECODE_STEPS_PER_SUBMIT", k)
    return [lm.generate_ids(p, STEPS_K, ignore_eos=True, **kwargs) for p in PROMPTS[:2]]


def test_steps_per_submit_keep_greedy_tokens(llama_lm, monkeypatch):
    """4 steps a submit and 1 step a submit draw transformers' greedy tokens."""
    want = [greedy[:STEPS_K] for _, _, greedy in _reference("llama", "Q8_0")[1][:2]]
    assert _tokens(llama_lm, monkeypatch, 4) == want
    assert _tokens(llama_lm, monkeypatch, 1) == want


def test_steps_per_submit_keep_seeded_samples(llama_lm, monkeypatch):
    kw = {"temperature": 0.9, "top_k": 40, "seed": 7}
    four = _tokens(llama_lm, monkeypatch, 4, **kw)
    assert four == _tokens(llama_lm, monkeypatch, 1, **kw)
    assert four != _tokens(llama_lm, monkeypatch, 4, temperature=0.9, top_k=40, seed=8)


def _submits(lm, monkeypatch, k: int) -> int:
    monkeypatch.setattr(llm, "DECODE_STEPS_PER_SUBMIT", k)
    before = lm.device.stats.get("submits", 0)
    lm.generate(PROMPTS[0], STEPS_K, ignore_eos=True)
    return lm.device.stats.get("submits", 0) - before


def test_steps_per_submit_async_and_fewer_submits(llama_lm, monkeypatch):
    from helpers import run_coroutine
    monkeypatch.setattr(llm, "DECODE_STEPS_PER_SUBMIT", 1)
    one = llama_lm.generate(PROMPTS[0], STEPS_K, ignore_eos=True)
    monkeypatch.setattr(llm, "DECODE_STEPS_PER_SUBMIT", 4)
    assert run_coroutine(llama_lm.generate_async(PROMPTS[0], STEPS_K, ignore_eos=True)) == one
    if llama_lm.device.name != "reference":   # 10 decode runs of one step against 3 (4, 4, 2)
        assert _submits(llama_lm, monkeypatch, 1) - _submits(llama_lm, monkeypatch, 4) == 7
