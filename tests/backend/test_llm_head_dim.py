"""Gemma's real head layout: head dim 256 (Gemma 2 2B/9B, Gemma 3 1B-27B), where webrlx's
cached attention takes its widest tiles (decoder/attn_decode with 8 keys a tile, 2 items a
workgroup). A gemma3 fixture of tools/make_llm_fixtures.py with 4 x 256 query heads and 2 kv
heads over width 64, Q8_0, against transformers on the same GGUF (dequantized, torch CPU f32):
the last logits within 1e-3 x max|logit| and 16 greedy tokens, over a prompt long enough to
pass the sliding window (8 keys). Needs torch, transformers, gguf and accelerate (skipped
without them, e.g. in Pyodide)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from webrlx.models import llm

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "Once upon a time, there was a little robot named Bolt who"
STEPS = 16


@pytest.fixture(scope="module")
def gemma256(tmp_path_factory):
    """(GGUF path, prompt ids, transformers' last logits, greedy tokens) at head dim 256."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    import torch
    from transformers import AutoTokenizer
    sys.path.insert(0, str(ROOT / "tools"))
    import make_llm_fixtures as mk
    mp = pytest.MonkeyPatch()
    mp.setattr(mk, "_head_dim", lambda wide: 256)     # every config maker reads it
    try:
        path = tmp_path_factory.mktemp("gemma256") / "gemma3-256-q8_0.gguf"
        model, vocab = mk.make_model("gemma3")
        assert model.config.head_dim == 256
        mk.write_gguf("gemma3", model, vocab, "Q8_0", path)
        ref = mk.transformers_model("gemma3", path)
    finally:
        mp.undo()
    ids = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)(PROMPT)[
        "input_ids"]
    seq = list(ids)
    with torch.no_grad():
        logits = ref(torch.tensor([seq])).logits[0, -1].numpy()
        for _ in range(STEPS):
            seq.append(int(ref(torch.tensor([seq])).logits[0, -1].argmax()))
    return path, ids, logits, seq[len(ids):]


def test_gemma3_head_dim_256_matches_transformers(backend, gemma256):
    path, ids, want, greedy = gemma256
    lm = llm.load(path, device=backend, max_context=64)
    assert lm.config.head_dim == 256 and lm.tokenizer.encode(PROMPT) == ids
    lm.generate_ids(ids, 1)
    got = lm.last_logits.numpy().reshape(-1)
    err = np.abs(got - want).max()
    assert err <= 1e-3 * np.abs(want).max(), (err, np.abs(want).max())
    assert lm.generate_ids(ids, STEPS, ignore_eos=True) == greedy
