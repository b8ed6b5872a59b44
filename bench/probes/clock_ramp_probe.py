"""How long a GPU takes to reach its full clock when work starts after idle time: one matmul
executable, the GPU left idle for --idle seconds, then its runs back to back (a sync every
--batch runs) for --seconds, with the time per run of each batch against the time since the
work began. Prints JSON: the series in windows of --window seconds (median ms per run) and
the first time a window's median was within 1.2x of the last second's.

Why: an NVIDIA GPU idle for ~3 s drops its SM clock to the floor (345 MHz on an H200 against
1980), and under Dawn 0.4 s of kernels after Pyodide's numpy ran at that clock
(bench/device_dawn.sh flashclock). webrlx.cli.clocks.WARM_S is chosen from this probe's ramp,
natively and under Dawn.
    python bench/probes/clock_ramp_probe.py [--n 2048] [--idle 6] [--seconds 3] [--batch 4]"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import _submit_and_sync  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2048, help="the f32 matmul's size")
    ap.add_argument("--idle", type=float, default=6.0)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--batch", type=int, default=4, help="runs a sync")
    ap.add_argument("--window", type=float, default=0.1)
    a = ap.parse_args()
    dev = wr.device()
    g = wr.Graph()
    x, y = g.input("a", (a.n, a.n)), g.input("b", (a.n, a.n))
    exe = wr.compile(g, outputs=[x @ y], device=dev)
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal((a.n, a.n)).astype(np.float32) for k in "ab"}
    submit, sync, _ = _submit_and_sync(exe, feeds)
    time.sleep(a.idle)
    t0 = time.perf_counter()
    points: list[tuple[float, float]] = []
    while time.perf_counter() - t0 < a.seconds:
        t = time.perf_counter()
        for _ in range(a.batch):
            submit()
        sync()
        points.append((t - t0, 1e3 * (time.perf_counter() - t) / a.batch))
    windows: list[dict] = []
    w = 0.0
    while w < a.seconds:
        ms = [m for s, m in points if w <= s < w + a.window]
        if ms:
            windows.append({"from_s": round(w, 2), "ms": round(statistics.median(ms), 4)})
        w += a.window
    final = statistics.median([m for s, m in points if s >= a.seconds - 1.0] or [points[-1][1]])
    ramp = next((v["from_s"] for v in windows if v["ms"] <= 1.2 * final), None)
    print(json.dumps({"device": dev.info.name, "n": a.n, "idle_s": a.idle,
                      "final_ms": round(final, 4), "first_ms": round(points[0][1], 4),
                      "within_1.2x_from_s": ramp, "windows": windows}))


if __name__ == "__main__":
    main()
