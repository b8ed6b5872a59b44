"""Batched decoding on every backend: rope / cache_write / cached_attention with per-row
positions and KV slots (pos (2, B)) against numpy, and webrlx.models.engine.Engine on a small
llama fixture: each sequence of a batch gives the tokens it gives alone (and transformers'
where the fixture has them), sequences joining and leaving mid-run disturb no other, and over
max_context / max_sequences raise clear errors with the engine still usable; the LM head runs
on the live rows only, and sampled rows draw as lm.generate draws them alone."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import rand
from test_decoder_ops import _attention_np, _rope_np

import webrlx as wr
from webrlx import nn
from webrlx.compiler import lower_decoder
from webrlx.models import llm
from webrlx.models.engine import Engine, EngineFullError
from webrlx.models.llm import Sampling


@pytest.mark.parametrize("kernel", ["decode", "prefill", "flash"])
@pytest.mark.parametrize("s", [1, 3])
def test_cached_attention_per_row_slots(backend, monkeypatch, kernel, s):
    """Rows b of a batch write and read KV slot slots[b] of a pool, each at its own position."""
    monkeypatch.setattr(lower_decoder, "PREFILL_KERNEL", kernel)
    slots_n, hkv, t, d, h = 4, 2, 64, 32, 4
    positions, slots = np.array([5, 0, 40], np.int32), np.array([2, 0, 3], np.int32)
    b = len(slots)
    pool_k = pool_v = np.zeros((slots_n, hkv, t, d), np.float32)     # states start zeroed
    q, k, v = rand(b, s, h, d, seed=3), rand(b, s, hkv, d, seed=4), rand(b, s, hkv, d, seed=5)
    g = wr.Graph()
    kv = g.input("kv", (2, b), "int32")
    kc = nn.cache_write(g.state("kc", pool_k.shape), g.input("k", k.shape), kv)
    vc = nn.cache_write(g.state("vc", pool_v.shape), g.input("v", v.shape), kv)
    qr = nn.rope(g.input("q", q.shape), kv, base=10000.0, interleaved=True)
    out = nn.cached_attention(qr, kc, vc, kv, 1.0 / np.sqrt(d))
    exe = wr.compile(g, outputs=[out, qr], device=backend)
    got, got_q = exe.run({"kv": np.stack([positions, slots]), "q": q, "k": k, "v": v})
    want_k, want_v = np.zeros_like(pool_k), np.zeros_like(pool_v)
    for i in range(b):
        want_k[slots[i], :, positions[i]:positions[i] + s] = k[i].transpose(1, 0, 2)
        want_v[slots[i], :, positions[i]:positions[i] + s] = v[i].transpose(1, 0, 2)
    np.testing.assert_array_equal(exe.read_state("kc"), want_k)
    np.testing.assert_array_equal(exe.read_state("vc"), want_v)
    for i in range(b):
        p0, sl = int(positions[i]), int(slots[i])
        want_q = _rope_np(q[i:i + 1], p0, 10000.0, True)
        np.testing.assert_allclose(got_q[i:i + 1], want_q, rtol=1e-4, atol=1e-4)
        n = p0 + s
        want = _attention_np(want_q, want_k[sl:sl + 1, :, :n], want_v[sl:sl + 1, :, :n], p0)
        np.testing.assert_allclose(got[i:i + 1], want, rtol=1e-4, atol=1e-4)


def test_pos_shape_error():
    g = wr.Graph()
    q = g.input("q", (3, 1, 4, 32))
    pool = g.state("kc", (4, 2, 64, 32))
    with pytest.raises(ValueError, match=r"pos must be int32 \(1,\).*\(2, 3\)"):
        nn.cached_attention(q, pool, pool, g.input("kv", (2, 2), "int32"), 0.1)


# -- the engine on a small llama fixture (tools/make_llm_fixtures.py) ------------------------
ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "build" / "llm_fixtures" / "llama-q8_0.gguf"
PROMPTS = ["The quick brown fox jumps over the lazy dog",
           "Hello",
           "Once upon a time, there was a little robot named Bolt who lived in a",
           "1 2 3"]
STEPS = 12


def _fixture() -> Path:
    if not FIXTURE.exists():
        pytest.importorskip("torch")
        pytest.importorskip("transformers")
        sys.path.insert(0, str(ROOT / "tools"))
        import make_llm_fixtures as mk
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        mk.write_gguf("llama", *mk.make_model("llama"), "Q8_0", FIXTURE)
    return FIXTURE


@pytest.fixture(scope="module")
def eng(backend):
    lm = llm.load(_fixture(), device=backend, max_context=64)
    return Engine(lm, max_sequences=4, max_context=64)


def test_engine_shares_the_model_weights(eng):
    """On a GPU the engine binds the model's weight buffers: one device copy of each. The
    reference device holds numpy arrays, no device buffers: nothing is shared there."""
    if eng.executable.device.name == "reference":
        assert eng.executable.share_params(eng.lm.executable) == []
        return
    mine = eng.executable.engine.param_bufs
    theirs = eng.lm.executable.engine.param_bufs
    assert mine and all(mine[n] is theirs[n] for n in mine)


@pytest.fixture(scope="module")
def alone(eng):
    """Each prompt's greedy tokens run alone (a batch of one)."""
    out = []
    for p in PROMPTS:
        s = eng.add_request(p, None, STEPS, ignore_eos=True)
        eng.run()
        out.append(s.token_ids)
    return out


def _transformers_greedy() -> list[list[int]] | None:
    """transformers' greedy tokens on the same GGUF (dequantized), or None without it."""
    try:
        import torch
        from transformers import AutoTokenizer
        sys.path.insert(0, str(ROOT / "tools"))
        import make_llm_fixtures as mk
        ref = mk.transformers_model("llama", FIXTURE)
        tok = AutoTokenizer.from_pretrained(str(FIXTURE.parent), gguf_file=FIXTURE.name)
    except ImportError:
        return None
    want = []
    with torch.no_grad():
        for prompt in PROMPTS:
            seq = list(tok(prompt)["input_ids"])
            n = len(seq)
            for _ in range(STEPS):
                seq.append(int(ref(torch.tensor([seq])).logits[0, -1].argmax()))
            want.append(seq[n:])
    return want


def test_batch_equals_each_sequence_alone_and_transformers(eng, alone):
    streams = [eng.add_request(p, None, STEPS, ignore_eos=True) for p in PROMPTS]
    assert eng.live == 4
    eng.run()
    assert [s.token_ids for s in streams] == alone
    assert all(len(a) == STEPS for a in alone)
    assert len({len(eng.lm.tokenizer.encode(p)) for p in PROMPTS}) == 4   # lengths differ
    want = _transformers_greedy()
    if want is not None:
        assert alone == want


def test_joining_and_leaving_disturbs_no_other(eng, alone):
    a = eng.add_request(PROMPTS[0], None, STEPS, ignore_eos=True)
    b = eng.add_request(PROMPTS[1], None, STEPS, ignore_eos=True)
    short = eng.add_request(PROMPTS[3], None, 3, ignore_eos=True)    # leaves after 3 tokens
    for _ in range(4):
        eng.step()
    assert short.finished and short.token_ids == alone[3][:3]
    c = eng.add_request(PROMPTS[2], None, STEPS, ignore_eos=True)    # joins mid-run
    eng.step()
    b.cancel()                                                       # leaves early
    assert eng.live == 2
    pieces = list(a)                                                 # steps the engine
    eng.run()
    assert a.token_ids == alone[0] and c.token_ids == alone[2]
    assert "".join(pieces) == eng.lm.tokenizer.decode(alone[0])
    assert b.token_ids == alone[1][:len(b.token_ids)]


def test_limits_give_clear_errors_and_the_engine_stays_usable(eng, alone):
    with pytest.raises(ValueError, match="exceeds max_context 64"):
        eng.add_request(PROMPTS[0], None, 60)
    held = [eng.add_request(p, None, STEPS, ignore_eos=True) for p in PROMPTS]
    with pytest.raises(EngineFullError, match="all 4 sequences"):
        eng.add_request("one more", None, 4)
    held[1].cancel()
    again = eng.add_request(PROMPTS[1], None, STEPS, ignore_eos=True)   # the freed slot
    eng.run()
    assert [s.token_ids for s in (held[0], again, held[2], held[3])] == alone


def test_kv_bytes_is_the_pool(eng):
    cfg = eng.lm.config
    assert eng.kv_bytes == 2 * cfg.layers * 4 * cfg.kv_heads * 64 * cfg.head_dim * 4
    k0 = eng.executable.graph.nodes[eng.executable.graph.states["k0"]]
    assert 2 * cfg.layers * int(np.prod(k0.shape)) * 4 == eng.kv_bytes


def test_generate_batch_and_async_streams(eng, alone):
    lm = eng.lm
    texts = lm.generate_batch(PROMPTS[:2], STEPS, ignore_eos=True)    # on eng (free slots)
    assert texts == [lm.tokenizer.decode(a) for a in alone[:2]]

    async def collect() -> list[str]:
        s = eng.add_request(PROMPTS[2], Sampling(), STEPS, ignore_eos=True)
        return [p async for p in s]
    assert "".join(asyncio.run(collect())) == lm.tokenizer.decode(alone[2])


def _head_rows(exe, vocab: int) -> list[str]:
    """The row dims of the LM head: the (q)matmul nodes of the graph whose rows are vocab wide."""
    return [n.shape[0] for n in exe.graph.nodes if n.op in ("qmatmul", "matmul")
            and n.shape[-1] == vocab]


def test_one_live_sequence_pays_for_one_head_row(eng, alone):
    """An engine of 8 slots runs the LM head GEMV on the live rows only: a decode step of one
    sequence is the plan of r = 1 (one GEMV row, not 8), of three sequences r = 3; the greedy
    tokens of mixed-length sequences sharing it equal lm.generate's one at a time. Sampling
    is ONE nn.sample dispatch of r rows (not one per slot)."""
    lm, latest = eng.lm, eng.lm._batch_engine
    big = Engine(lm, max_sequences=8, max_context=64)
    lm._batch_engine = latest                       # the module's engine for the other tests
    vocab = lm.config.vocab
    assert _head_rows(big.executable, vocab) == ["r"]
    gpu = big.executable.device.name != "reference"
    for live in (1, 3):
        streams = [big.add_request(p, None, STEPS, ignore_eos=True) for p in PROMPTS[:live]]
        big.step()                                  # prefills, then the first decode step
        big.step()                                  # a decode step of `live` sequences
        if gpu:
            lines = big.executable.last_plan.program.schedule().splitlines()
            head = [ln.split()[4] for ln in lines if ln.split()[3:4] in (["qmatmul"],
                                                                         ["matmul"])
                    and ln.split()[4].endswith(f"x{vocab}")]
            assert head == [f"{live}x{vocab}"], "\n".join(lines)
            samplers = [ln for ln in lines if ln.split()[1:2] == ["sample"]]
            assert len(samplers) == 1 and f" sample {live} int32 " in samplers[0], \
                "\n".join(lines)
            pre = [ln for ln in lines if ln.split()[1:2] == ["sample_max"]]   # greedy pre-pass
            assert len(pre) == 1 and f" sample {live} int32 " in pre[0], "\n".join(lines)
        big.run()
        assert [s.token_ids for s in streams] == alone[:live]
    want = []
    for p in PROMPTS[:3]:
        want.append(lm.generate_ids(p, STEPS, ignore_eos=True))
    assert want == alone[:3]


def test_sampled_rows_equal_lm_generate(eng, alone):
    """Greedy and sampled sequences decoded together: the sampler draws row j with row j's
    settings, so each gives the tokens lm.generate gives it alone with the same seed."""
    lm = eng.lm
    settings = [Sampling(), Sampling(temperature=0.9, top_k=40, seed=3),
                Sampling(temperature=1.0, top_p=0.9, seed=11)]
    streams = [eng.add_request(p, s, STEPS, ignore_eos=True)
               for p, s in zip(PROMPTS[:3], settings)]
    eng.run()
    want = [lm.generate_ids(p, STEPS, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                            seed=s.seed, ignore_eos=True) for p, s in zip(PROMPTS[:3], settings)]
    assert [s.token_ids for s in streams] == want
    assert want[1] != alone[1] and want[2] != alone[2]                # they did sample
