"""Every GGUF family webrlx.models.llm runs (llama with Llama 3 rope scaling, mistral with a
sliding window, qwen2, qwen3, gemma2, gemma3, phi3) against transformers on the same weights:
a small random-weight model per family from tools/make_llm_fixtures.py (made on first use into
build/llm_fixtures/, then cached), loaded from its GGUF by webrlx and by transformers' GGUF
reader (dequantized, torch CPU f32, under the family's full config). Per family and type:
prompt ids equal transformers' tokenizer read from the GGUF, last logits within
1e-3 x max|logit|, 32 greedy tokens equal, on 4 prompts. On llama Q8_0, decoding 4 steps a
submit (llm.DECODE_STEPS_PER_SUBMIT) and 1 step a submit draw the same tokens, greedy (as
transformers') and seeded, sync and async.

Phi-3's LongRoPE (phi3-longrope: original context 64 of 256, random short and long factors)
runs in Q8_0 in both of llama.cpp's regimes, which webrlx follows: a KV cache within the
original context (max_context 64) rotates by the short factors, a longer one (128) by the long
ones for the whole run; transformers rotates by the short factors while the sequence stays
within the original context (our prompts + 32 tokens do) and is made to rotate every position
by the long ones for the other regime (make_llm_fixtures.transformers_model(long_factors=)).
A phi3 file whose long factors have the wrong length (or lacks the short ones) is refused,
naming the tensor, and so is a partial rotary dimension (Phi-4-mini's header).

By default each family runs Q8_0 and Q4_K, and llama also Q2_K, Q3_K, Q5_K and Q6_K (one
quant type per family plus every K type on one family); WEBRLX_LLM_TYPES=F32,Q8_0,Q6_K (any
of the types the tools write: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 through the gguf
package, Q2_K .. Q6_K, IQ4_NL, IQ4_XS through tools/kquant.py) runs every family in those
types instead. The fixtures of 256-weight blocks are the wide shape (width 256), the others
width 64.
Needs torch, transformers, gguf and accelerate (skipped without them, e.g. in Pyodide)."""
from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from webrlx.cli import gguf_info
from webrlx.models import decoding, gguf, llm

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
# (family, type, KV cache capacity): phi3-longrope in its short-factor regime (capacity within
# the fixture's original context, 64) and its long-factor one (beyond it); the others at 128
LONGROPE_CASES = [("phi3-longrope", "Q8_0", 64), ("phi3-longrope", "Q8_0", 128)]
ALL_CASES = [(f, t, 128) for f, t in CASES] + LONGROPE_CASES


def _tools():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")            # transformers' GGUF loader needs it
    sys.path.insert(0, str(ROOT / "tools"))
    import make_llm_fixtures
    return make_llm_fixtures


def _case_id(p: tuple[str, str, int]) -> str:
    return f"{p[0]}-{p[1]}" + (f"-ctx{p[2]}" if p[0] == "phi3-longrope" else "")


@pytest.fixture(scope="module", params=ALL_CASES, ids=_case_id)
def case(request):
    """(file, transformers' ids / last logits / greedy tokens per prompt, KV cache capacity)
    of a family x type (x capacity)."""
    family, qtype, capacity = request.param
    return (*_reference(family, qtype, _long_factors(family, capacity)), capacity)


def _long_factors(family: str, capacity: int) -> bool:
    """Whether webrlx runs the long LongRoPE factors at this capacity (llama.cpp's rule: the
    KV cache exceeds the original context, read from the file), and so must transformers."""
    if family != "phi3-longrope":
        return False
    cfg = llm.model_config(gguf.load(_fixture(family, "Q8_0")))
    return capacity > cfg.rope_original_context


def _fixture(family: str, qtype: str) -> Path:
    """The family x type fixture, made on first use into CACHE (by tools/make_llm_fixtures.py,
    which needs torch; a machine without it runs the files carried there)."""
    path = CACHE / f"{family}-{qtype.lower()}.gguf"
    return path if path.exists() else _tools().fixture(family, qtype, CACHE)


@functools.cache
def _reference(family: str, qtype: str, long_factors: bool = False) -> tuple[Path, list]:
    """(the fixture, [(transformers' prompt ids, last logits, greedy tokens)] per prompt).
    transformers' answers are kept beside the file (_kept_reference) and used again while
    the file, the prompts, the fixture maker and transformers' version are unchanged: so a
    machine without torch (the GPU machine) checks the carried fixtures against them."""
    path = _fixture(family, qtype)
    kept = _kept_reference(path, long_factors)
    if kept is not None:
        return path, kept
    import torch
    from transformers import AutoTokenizer
    mk = _tools()
    name = path.name
    ref = mk.transformers_model(family, path, wide=mk.is_wide(qtype), long_factors=long_factors)
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
            if family == "phi3-longrope" and not long_factors:   # transformers: short only
                assert len(seq) <= mk.LONGROPE_ORIGINAL, (prompt, len(seq))
    _keep_reference(path, long_factors, want)
    return path, want


def _reference_key(path: Path) -> dict[str, Any]:
    """What a kept reference answers for: the file's and the fixture maker's bytes, the
    prompts, the steps and (where it is installed) transformers' version."""
    try:
        import transformers
        version = transformers.__version__
    except ImportError:                     # (a machine without it takes the kept version)
        version = None
    return {"file": hashlib.sha256(path.read_bytes()).hexdigest(),
            "maker": hashlib.sha256((ROOT / "tools" / "make_llm_fixtures.py").read_bytes()
                                    ).hexdigest(),
            "prompts": PROMPTS, "steps": STEPS, "transformers": version}


def _kept_path(path: Path, long_factors: bool) -> Path:
    return path.with_name(path.stem + ("-long" if long_factors else "") + ".transformers.json")


def _kept_reference(path: Path, long_factors: bool) -> list | None:
    """transformers' answers kept for this file, if they still answer for it."""
    kept = _kept_path(path, long_factors)
    if not kept.exists():
        return None
    d = json.loads(kept.read_text())
    key = _reference_key(path)
    # WEBRLX_LLM_KEPT=1: the kept answers whatever transformers is installed (the GPU
    # machine's is another version, made for another torch)
    if key["transformers"] is None or os.environ.get("WEBRLX_LLM_KEPT") == "1":
        key["transformers"] = d["key"]["transformers"]
    if d["key"] != key:
        return None
    return [(ids, np.array(logits, np.float32), greedy) for ids, logits, greedy in d["want"]]


def _keep_reference(path: Path, long_factors: bool, want: list) -> None:
    _kept_path(path, long_factors).write_text(json.dumps({
        "key": _reference_key(path),
        "want": [(list(map(int, ids)), [float(v) for v in logits], list(map(int, greedy)))
                 for ids, logits, greedy in want]}))


@pytest.fixture(scope="module")
def lm(case, backend):
    return llm.load(case[0], device=backend, max_context=case[2])


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


@pytest.mark.parametrize("max_context, msg", [(0, "max_context must be an int >= 16"),
                                              ("64", "max_context must be an int"),
                                              (10 ** 6, "at most the model's context")])
def test_max_context_out_of_range_names_it(max_context, msg):
    with pytest.raises(ValueError, match=msg):
        llm.load(_fixture("llama", "q8_0"), device="reference", max_context=max_context)


def test_gguf_info_reports_a_fixture(case):
    out = io.StringIO()
    assert gguf_info.info(str(case[0]), out) == 0
    text = out.getvalue()
    assert "general.architecture (string)" in text and "webrlx runs it: yes" in text
    assert ("LongRoPE (long factors past 64" in text) == case[0].name.startswith("phi3-longrope")


# -- LongRoPE: which factors a capacity takes, and files webrlx must refuse --------------------
def test_longrope_factors_follow_the_capacity_as_llama_cpp():
    """The short factors up to the original context, the long ones past it (the file's
    tensors, read back by the gguf package), the attention factor squared on the scores."""
    import gguf

    from webrlx.models import gguf as ours
    mk = _tools()
    path = _fixture("phi3-longrope", "Q8_0")
    held = {t.name: tuple(t.data.astype(float).tolist())
            for t in gguf.GGUFReader(str(path)).tensors if t.name.startswith("rope_factors_")}
    cfg = llm.model_config(ours.load(path))
    original = mk.LONGROPE_ORIGINAL
    attn = 1 + math.log(256 / original) / math.log(original)     # llama.cpp's converter
    assert cfg.rope_original_context == original and cfg.context == 256
    short, f_short = cfg.rope_scaling(original)
    long, f_long = cfg.rope_scaling(original + 1)
    assert short == held["rope_factors_short.weight"] != long == held["rope_factors_long.weight"]
    assert f_short == pytest.approx(attn, rel=1e-6) and f_long == pytest.approx(attn, rel=1e-6)


@functools.cache
def _longrope_tensors() -> tuple[object, dict, dict]:
    mk = _tools()
    model, vocab = mk.make_model("phi3-longrope")
    return model.config, vocab, mk._tensors("phi3-longrope", model)


@pytest.mark.parametrize("change", ["long_of_wrong_length", "short_missing"])
def test_longrope_factors_webrlx_cannot_honour_are_refused(tmp_path, change):
    """A phi3 file whose rope_factors_long holds 7 values (head_dim / 2 is 8), or that lacks
    rope_factors_short, raises UnsupportedModelError naming the tensor (load and gguf info)."""
    cfg, vocab, tensors = _longrope_tensors()
    tensors = dict(tensors)
    if change == "short_missing":
        del tensors["rope_factors_short.weight"]
    else:
        tensors["rope_factors_long.weight"] = tensors["rope_factors_long.weight"][:7]
    path = tmp_path / "bad-longrope.gguf"
    _tools().write_file("phi3", "bad", cfg, vocab, tensors.items(), "F32", path)
    with pytest.raises(llm.UnsupportedModelError, match=r"'rope_factors_(long|short)\.weight'"):
        llm.load(path, device="reference")
    out = io.StringIO()
    assert gguf_info.info(str(path), out) == 1
    assert "webrlx runs it: no (" in out.getvalue() and "rope_factors_" in out.getvalue()


def test_engine_takes_the_factors_of_its_own_context():
    """An Engine of 128 positions a slot over a model loaded at 64 (short factors) rotates by
    the long ones (llama.cpp decides by the context of a sequence): 2 prompts decoded in one
    batch give transformers' long-factor greedy tokens. On the reference device only: the
    factors are chosen when the graph is built, alike for every device (the kernels run in
    the cases above and in test_engine.py), and the engine's plans cost ~50 s on lavapipe."""
    from webrlx.models.engine import Engine
    path, want = _reference("phi3-longrope", "Q8_0", True)
    lm = llm.load(path, device="reference", max_context=64)
    eng = Engine(lm, max_sequences=2, max_context=128)
    streams = [eng.add_request(ids, None, STEPS, ignore_eos=True) for ids, _, _ in want[:2]]
    eng.run()
    assert [s.token_ids for s in streams] == [greedy for _, _, greedy in want[:2]]


def test_partial_rotary_is_refused():
    """Phi-4-mini's header (phi3, rope.dimension_count 96 of a 128 head, no key_length, with
    LongRoPE factors of 48): refused before its factors or weights are read."""
    from webrlx.models.llama import LlamaConfig
    md = {"general.architecture": "phi3", "phi3.embedding_length": 3072,
          "phi3.attention.head_count": 24, "phi3.attention.head_count_kv": 8,
          "phi3.block_count": 32, "phi3.rope.dimension_count": 96,
          "phi3.context_length": 131072, "phi3.feed_forward_length": 8192,
          "phi3.attention.layer_norm_rms_epsilon": 1e-5}
    with pytest.raises(llm.UnsupportedModelError, match="dimension_count 96 .* head dim 128"):
        LlamaConfig.from_metadata(md)


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


@pytest.mark.parametrize("ahead,k", [(False, 1), (True, 1), (True, 4)])
def test_read_ahead_keeps_tokens_and_stops(llama_lm, monkeypatch, ahead, k):
    """Tokens read READ_LAG steps after their copy (decoding.READ_AHEAD) or at once, one or 4
    steps a submit: transformers' greedy tokens across the read points (a read starts at 9
    and 17, finishes at 11 and 19, the last at 20), and a stop string cuts the text at its
    first occurrence whichever read sees it."""
    monkeypatch.setattr(decoding, "READ_AHEAD", ahead)
    monkeypatch.setattr(llm, "DECODE_STEPS_PER_SUBMIT", k)
    n = 20
    greedy = _reference("llama", "Q8_0")[1][0][2]
    assert llama_lm.generate_ids(PROMPTS[0], n, ignore_eos=True) == greedy[:n]
    text = llama_lm.generate(PROMPTS[0], n, ignore_eos=True)
    assert text == llama_lm.tokenizer.decode(greedy[:n])
    for at in (len(text) // 3, len(text) // 2, len(text) - 4):
        stop = text[at: at + 3]
        if not stop.strip():
            continue
        got = llama_lm.generate(PROMPTS[0], n, stop=stop, ignore_eos=True)
        assert got == text[:text.index(stop)], (stop, got)


def test_read_ahead_token_counts_at_every_read_boundary(llama_lm):
    """Read-ahead (the default) with max_new_tokens on and around each read point (a copy at
    1 mod READ_EVERY, its read READ_LAG later): exactly that many tokens, transformers'."""
    greedy = _reference("llama", "Q8_0")[1][1][2]
    for n in (1, 2, 3, 8, 9, 10, 11, 12, 17, 18, 19, 20, 25, 27):
        assert llama_lm.generate_ids(PROMPTS[1], n, ignore_eos=True) == greedy[:n], n
        assert llama_lm.stats.new_tokens == n


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


def _prefill_ran(lm, ids: list[int]) -> list[str]:
    """The kernels (variant names) of lm's prefill plan for prompt ids."""
    _, env = lm.executable.check_feeds({"ids": np.array([ids], np.int32),
                                        "pos": np.zeros(1, np.int32),
                                        "last": np.array([len(ids) - 1], np.int32),
                                        "fparams": llm.Sampling().fparams(),
                                        "iparams": llm.Sampling().iparams()})
    return lm.executable.plan(env).ran


def test_prefill_of_decoded_weights_matches_transformers(monkeypatch):
    """Prefills on a GPU (pretended) past lower_quant.DEQUANT_MIN_WORK and DEQUANT_MIN_M (here
    every weight, from 2 rows) decode each weight once and run the f32 matmul, unfused
    (lower_quant.dequant_first): the llama Q4_K fixture's last logits within 1e-3 x
    max|logit| of transformers' and 32 greedy tokens equal on every prompt, and the prefill
    ran the decodes (decode steps, 1 row, keep the fused GEMVs)."""
    import webrlx as wr
    from webrlx.compiler import lower_quant
    from webrlx.device_info import DeviceInfo
    backend = wr.device("gpu")          # (a lowering rule: the reference lowers nothing)
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: False))
    monkeypatch.setattr(lower_quant, "DEQUANT_MIN_WORK", 0)
    monkeypatch.setattr(lower_quant, "DEQUANT_MIN_M", 2)
    path, want = _reference("llama", "Q4_K")
    lm = llm.load(path, device=backend, max_context=128)
    for prompt, (ids, logits, greedy) in zip(PROMPTS, want, strict=True):
        lm.generate_ids(ids, 1)
        err = np.abs(lm.last_logits.numpy().reshape(-1) - logits).max()
        assert err <= 1e-3 * np.abs(logits).max(), (prompt, err)
        assert lm.generate_ids(ids, STEPS, ignore_eos=True) == greedy, prompt
    ran = _prefill_ran(lm, want[0][0])
    assert any(r.startswith("qdequant_t[") for r in ran), ran


def test_int8_prefill_stays_near_transformers(monkeypatch):
    """The opt-in int8 prefill without tensor cores (`llm.load(int8="prefill")`,
    compiler/int8_prefill.py) on a GPU (pretended), every product from 2 rows: the llama Q4_K
    fixture's last logits stay within 1e-1 x max|logit| of transformers' (x and weights rounded
    to int8: 3.2e-2 to 4.7e-2 measured on lavapipe, where the f32 path holds 1e-3; a misplaced
    block or scale is off by O(1)) and the prefill ran the int8 kernels. The model's Engine
    compiles its steps with the same choice."""
    import webrlx as wr
    from webrlx.compiler import int8_prefill
    from webrlx.device_info import DeviceInfo
    from webrlx.models.engine import Engine
    backend = wr.device("gpu")
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: False))
    monkeypatch.setattr(int8_prefill, "MIN_WORK", 0)
    monkeypatch.setattr(int8_prefill, "MIN_M", 2)
    assert int8_prefill.INT8_PREFILL is False           # the load's argument alone asks
    path, want = _reference("llama", "Q4_K")
    lm = llm.load(path, device=backend, max_context=128, int8="prefill")
    assert Engine(lm, max_sequences=2, max_context=128).executable.int8 == {"prefill"}
    errs = []
    for ids, logits, _ in want:
        lm.generate_ids(ids, 1)
        errs.append(np.abs(lm.last_logits.numpy().reshape(-1) - logits).max() /
                    np.abs(logits).max())
    assert max(errs) <= 1e-1, errs
    ran = _prefill_ran(lm, want[0][0])
    assert any(r.startswith("qmatmul_i8_") for r in ran) and "qw8[x]" in ran, ran
