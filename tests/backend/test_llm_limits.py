"""What the chat page's check before a download (gguf_info.describe / over_limits, from the
header alone) lets through must load and run on a device with those limits, and what it
refuses must not: a vocabulary over maxStorageBufferBindingSize runs as row pieces (blocks) or
through bound windows (float32 tables), a layer weight over it is refused. The device is a
private one with its binding limit lowered (as tests/backend/test_binding_limit.py does); the
greedy tokens must equal the reference device's (numpy) on the same file."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import limited_device

from webrlx.cli import gguf_info
from webrlx.models import gguf, llm

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 64 << 10          # bytes one binding holds here: under the fixtures' 2048-row vocabulary
PROMPT = [1, 17, 256, 900, 33]
STEPS = 6


def _fixture(family: str, qtype: str) -> Path:
    sys.path.insert(0, str(ROOT / "tools"))
    import make_llm_fixtures
    return make_llm_fixtures.fixture(family, qtype)


@pytest.fixture(scope="module")
def small_device():
    return limited_device(LIMIT)


@pytest.mark.parametrize("qtype", ["Q8_0", "F32"])
def test_a_vocabulary_over_the_binding_limit_passes_the_check_and_runs(small_device, qtype):
    path = _fixture("llama", qtype)
    d = gguf_info.describe(gguf.load(str(path)))
    embd = d["largest"]
    assert embd["name"] == "token_embd.weight" and embd["bytes"] > LIMIT, d["largest"]
    assert gguf_info.over_limits(d, small_device.info.limits, "small") == "", d["needs"]
    lm = llm.load(str(path), device=small_device, max_context=64)
    if qtype == "Q8_0":             # blocks: cut into params of row pieces
        assert any(n.startswith("token_embd.weight[") for n in lm.graph.params), lm.graph.params
    else:                           # float32: kernels bind windows of the whole table
        calls = lm.executable.plan({"s": 1}).program.calls
        assert any(c.windows for c in calls), "no kernel bound a window"
    got = lm.generate_ids(PROMPT, STEPS, ignore_eos=True)
    want = llm.load(str(path), device="reference", max_context=64).generate_ids(
        PROMPT, STEPS, ignore_eos=True)
    assert got == want


def test_a_layer_weight_over_the_binding_limit_is_refused_by_the_check():
    path = _fixture("llama", "Q8_0")
    d = gguf_info.describe(gguf.load(str(path)))
    by = d["needed_by"]["max-storage-buffer-binding-size"]
    assert by["name"].startswith("blk."), by
    limits = {"max-buffer-size": 16 * LIMIT, "max-storage-buffer-binding-size": by["bytes"] - 1}
    msg = gguf_info.over_limits(d, limits, "small")
    assert repr(by["name"]) in msg and f"{by['bytes']:,} bytes" in msg, msg
