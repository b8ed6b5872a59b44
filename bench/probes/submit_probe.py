"""Where a one-kernel run's time goes on the host: each step of a submit (encoder, pass,
recording, finish, queue.submit) timed on its own, beside the kernel's GPU time (timestamp
queries) and the time per run when runs are submitted back to back. Prints JSON.

    python bench/probes/submit_probe.py [--n 400]
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

import webrlx as wr


def build(case: str) -> tuple[wr.Executable, dict[str, np.ndarray]]:
    g = wr.Graph()
    if case == "softmax 4096x384":
        x = g.input("x", (4096, 384))
        return wr.compile(g, outputs=[x.softmax(-1)]), {"x": np.ones((4096, 384), np.float32)}
    if case == "matmul 512":
        a, b = g.input("a", (512, 512)), g.input("b", (512, 512))
        ones = np.ones((512, 512), np.float32)
        return wr.compile(g, outputs=[a @ b]), {"a": ones, "b": ones}
    x = g.input("x", (1024,))
    return wr.compile(g, outputs=[x + 1.0]), {"x": np.ones(1024, np.float32)}


def probe(case: str, n: int) -> dict:
    exe, feeds = build(case)
    exe.run(feeds)
    plan = exe.last_plan
    be = plan.backend
    ds = plan.dispatches
    parts = {k: 0.0 for k in ("encoder", "begin_pass", "record", "end_pass", "finish",
                              "queue_submit")}
    for _ in range(n):
        t0 = time.perf_counter()
        enc = be._command_encoder()
        t1 = time.perf_counter()
        cp = enc.begin_compute_pass()
        t2 = time.perf_counter()
        be._encode_dispatches(cp, ds)
        t3 = time.perf_counter()
        cp.end()
        t4 = time.perf_counter()
        cb = enc.finish()
        t5 = time.perf_counter()
        be._queue_submit(cb)
        t6 = time.perf_counter()
        for k, a, b in zip(parts, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6)):
            parts[k] += b - a
    be.read_buffer(plan.staging, 0, 4)

    def back_to_back() -> float:
        t = time.perf_counter()
        for _ in range(n):
            be.submit(ds)
        be.submit([], plan.copies[:1])
        be.read_buffer(plan.staging, 0, 4)
        return (time.perf_counter() - t) / n
    per_run = min(back_to_back() for _ in range(3))
    prof = exe.profile(feeds, repeats=5)
    gpu_us = round(prof.total_ms * 1e3, 2)
    return {"case": case, "dispatches": len(ds),
            "host_us": {k: round(v / n * 1e6, 2) for k, v in parts.items()},
            "host_total_us": round(sum(parts.values()) / n * 1e6, 2),
            "per_run_back_to_back_us": round(per_run * 1e6, 2),
            "gpu_us": gpu_us, "gpu_source": prof.source}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400)
    args = ap.parse_args()
    dev = wr.device()
    out = {"adapter": dev.info.name,
           "cases": [probe(c, args.n) for c in ("add 1024", "softmax 4096x384", "matmul 512")]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
