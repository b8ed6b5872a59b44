"""Where a warm MiniLM run's time goes when runs are submitted back to back (bench's method,
webrlx.cli.bench.time_executable): per batch of N submits, the wall time per run, the host's
time inside backend.submit per run, and the wait for the batch's end; beside it the GPU time of
one run (the sum of its kernels' timestamps, Executable.profile). The question: MiniLM 1x128
under Dawn reads either ~0.58 or ~0.80 ms a run (native 0.54); is the slow mode the host's
(submit time ~ run time), the GPU's (kernel sum), or runs not overlapping (submit + GPU)?
Prints JSON.

    python bench/probes/minilm_submit_probe.py [--batch 1 --length 128 --n 200 --rounds 8]
        [--sum-in-norm on,off]   (split-K products summed by the residual norm or by their own
            kernels, lower_matmul.SUM_IN_NORM: one executable a mode, rounds alternating)
    python -m webrlx dawn --dawn-flag disable-dawn-features=timestamp_quantization -- \\
        python bench/probes/minilm_submit_probe.py
"""
from __future__ import annotations

import argparse
import collections
import json
import statistics
import time
from typing import Any

import numpy as np

from webrlx.cli import clocks
from webrlx.cli.bench import _submit_and_sync
from webrlx.compiler import lower_matmul
from webrlx.models import minilm


def synthetic_feeds(enc: minilm.MiniLMEncoder, batch: int, seq: int) -> dict[str, np.ndarray]:
    """bench/minilm.py's feeds (the Dawn runner copies only this folder's files)."""
    rng = np.random.default_rng(0)
    return enc.feeds([[101] + list(rng.integers(1000, 29000, seq - 2)) + [102]
                      for _ in range(batch)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--n", type=int, default=200, help="runs a batch")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--sum-in-norm", default="on",
                    help="on, off or on,off (lower_matmul.SUM_IN_NORM); modes alternate")
    args = ap.parse_args()
    modes = args.sum_in_norm.split(",")
    out = {}
    runs = {}
    for mode in modes:
        lower_matmul.SUM_IN_NORM = mode == "on"
        enc = minilm.load()
        feeds = synthetic_feeds(enc, args.batch, args.length)
        runs[mode] = (enc.executable, feeds, _submit_and_sync(enc.executable, feeds)[:2])
        out[mode] = []
    for _ in range(args.rounds):
        for mode in modes:
            exe, feeds, (submit, sync) = runs[mode]
            out[mode].append(_round(exe, feeds, submit, sync, args.n))
    for mode in modes:
        exe, _, _ = runs[mode]
        plan = exe.last_plan
        rounds = out[mode]
        med = {k: statistics.median(r[k] for r in rounds)
               for k in ("run_ms", "submit_ms", "sync_ms", "gpu_kernels_ms")}
        print(json.dumps({"adapter": plan.backend.info.name,
                          "backend": plan.backend.info.backend,
                          "shape": f"{args.batch}x{args.length}", "sum_in_norm": mode,
                          "dispatches": len(plan.dispatches),
                          "kernels": dict(collections.Counter(plan.ran)),
                          "n": args.n, "rounds": rounds, "median": med}))


def _round(exe: Any, feeds: dict, submit: Any, sync: Any, n: int) -> dict:
    """One round of n runs submitted back to back (after the clocks are held), and the GPU's
    kernel sum of one run."""
    clocks.hold_clocks(submit, sync)
    host = 0.0
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        submit()
        host += time.perf_counter() - t
    t1 = time.perf_counter()
    sync()
    t2 = time.perf_counter()
    prof = exe.profile(feeds, repeats=1)
    return {"run_ms": round(1e3 * (t2 - t0) / n, 4), "submit_ms": round(1e3 * host / n, 4),
            "loop_ms": round(1e3 * (t1 - t0) / n, 4), "sync_ms": round(1e3 * (t2 - t1), 3),
            "gpu_kernels_ms": round(prof.total_ms, 4), "profile_source": prof.source}


if __name__ == "__main__":
    main()
