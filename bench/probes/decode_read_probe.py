"""Probe: SmolLM2 greedy decode tokens/s with the token reads waiting for every step (the
GPU's queue drained at each read) or read ahead (decoding.READ_AHEAD: copied aside, read
READ_LAG steps later; with --ks also k decode steps a submit), and with an autotune table
given as --tune (a `tools/make_tune_tables.py --here` run's JSON, installed as this adapter's
own table) or without. Natively or under Dawn:

    python bench/probes/decode_read_probe.py [--new 256] [--runs 3] [--tune FILE]
    python -m webrlx dawn -- python bench/probes/decode_read_probe.py [--tune FILE]

The modes run interleaved in one process (a model per table: plans are compiled with the
table in force when they are made); greedy tokens must be equal across modes. Prints one JSON
line: per mode the median tok/s of --runs runs, and the decode step's GPU time by kernel.
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from webrlx.models import decoding, llm
from webrlx.models.assets import smollm2_gguf
from webrlx.runtime import autotune

PROMPT = "Count by sevens: 7, 14, 21,"


def decode_profile(lm: llm.LanguageModel) -> dict[str, Any]:
    """The decode step's GPU time (ms) and its kernels', from Executable.profile."""
    ids = lm.tokenizer.encode(PROMPT)
    prof = lm.executable.profile({"ids": np.array([[ids[-1]]], np.int32),
                                  "pos": np.array([60], np.int32),
                                  "last": np.zeros(1, np.int32),
                                  "fparams": llm.Sampling().fparams(),
                                  "iparams": llm.Sampling().iparams()}, repeats=5)
    return {"ms": round(prof.total_ms, 4), "source": prof.source,
            "kernels": {k: round(v, 4) for k, v in prof.by_kernel().items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--new", type=int, default=256, help="new tokens a run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tune", help="a make_tune_tables.py --here JSON to A/B against")
    ap.add_argument("--read-every", default="8", help="READ_EVERY values to try with "
                    "read-ahead (decoding.READ_EVERY), comma-separated")
    ap.add_argument("--ks", default="1", help="decode steps a submit to try with read-ahead "
                    "(llm.DECODE_STEPS_PER_SUBMIT), comma-separated")
    args = ap.parse_args()
    path = smollm2_gguf()
    models = {"default": llm.load(path, max_context=512)}
    models["default"].generate_ids(PROMPT, 20, ignore_eos=True)        # plans made untuned
    if args.tune:
        got = autotune.read_run(args.tune)
        autotune.add_picks(models["default"].device.info.tune_name, got["table"])
        models["tuned"] = llm.load(path, max_context=512)
        models["tuned"].generate_ids(PROMPT, 20, ignore_eos=True)
    ks = [int(k) for k in args.ks.split(",")]
    evs = [int(e) for e in args.read_every.split(",")]
    modes = {m: (False, 1, 8) for m in models}
    modes.update({f"{m}+ahead{'' if k == 1 else f'+k{k}'}{'' if e == 8 else f'+r{e}'}":
                  (True, k, e) for m in models for k in ks for e in evs})
    rates: dict[str, list[float]] = {key: [] for key in modes}
    tokens: dict[str, list[int]] = {}
    for _ in range(args.runs):
        for key, (ahead, k, every) in modes.items():
            decoding.READ_AHEAD, llm.DECODE_STEPS_PER_SUBMIT = ahead, k
            decoding.READ_EVERY = every
            lm = models[key.split("+")[0]]
            tokens[key] = lm.generate_ids(PROMPT, args.new, ignore_eos=True)
            rates[key].append(lm.stats.tokens_per_s)
    decoding.READ_AHEAD, llm.DECODE_STEPS_PER_SUBMIT, decoding.READ_EVERY = True, 1, 8
    first = next(iter(tokens.values()))
    out: dict[str, Any] = {
        "adapter": models["default"].device.info.name,
        "backend": models["default"].device.info.backend, "model": Path(str(path)).name,
        "new_tokens": args.new, "runs": args.runs,
        "tokens_equal": all(t == first for t in tokens.values()),
        "tok_s": {k: round(statistics.median(v), 1) for k, v in rates.items()},
        "tok_s_all": {k: [round(x, 1) for x in v] for k, v in rates.items()},
        "decode_gpu": {m: decode_profile(lm) for m, lm in models.items()}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
