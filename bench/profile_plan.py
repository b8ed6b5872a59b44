"""Per-kernel wall time of a compiled MiniLM run: each dispatch submitted alone and
synchronized (includes a fixed sync cost per dispatch; use it to find outliers).

    python bench/profile_plan.py [--model DIR] [--batch 1] [--seq 128]
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from webrlx.models import minilm  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=None)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128)
    a = p.parse_args()
    enc = minilm.load(a.model)
    rows = [[101] + [2000 + i for i in range(a.seq - 2)] + [102] for _ in range(a.batch)]
    exe = enc.executable
    exe.run(enc.feeds(rows))
    plan = exe.last_plan
    be = plan.backend
    sync = (lambda: (be.submit([], plan.copies[:1]), be.read_buffer(plan.staging, 0, 4)))
    sync()
    t = time.perf_counter()
    for _ in range(10):
        sync()
    empty = (time.perf_counter() - t) / 10
    tot: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    for d, c in zip(plan.dispatches, plan.program.calls):
        samples = []
        for _ in range(5):
            t = time.perf_counter()
            be.submit([d])
            sync()
            samples.append(time.perf_counter() - t - empty)
        tot[c.name] += sorted(samples)[2]
        count[c.name] += 1
    t = time.perf_counter()
    for _ in range(10):
        be.submit(plan.dispatches)
    sync()
    whole = (time.perf_counter() - t) / 10
    print(json.dumps({"sync_ms": empty * 1e3, "whole_run_ms": whole * 1e3,
                      "per_kernel_ms": {k: [round(v * 1e3, 3), count[k]]
                                        for k, v in tot.most_common()}}, indent=1))


if __name__ == "__main__":
    main()
