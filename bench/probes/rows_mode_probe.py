"""Is the bimodal time of a row kernel the GPU's, and does buffer placement pick the mode?
One softmax (rows x n, f32) compiled afresh `--trials` times, each after allocating a spacer
buffer of `--spacers` MB (a different size each trial moves where the input and output land):
wall time per run (the bench's method, --repeat times) and GPU time by timestamp queries for
every trial.
Prints JSON.
    python bench/probes/rows_mode_probe.py [--shape 16384x1024] [--trials 12] [--spacers 0,1,3,7]"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import time_executable  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shape", default="16384x1024")
    p.add_argument("--trials", type=int, default=12)
    p.add_argument("--spacers", default="0,1,3,7,16,33")
    p.add_argument("--op", default="softmax")
    p.add_argument("--repeat", type=int, default=3, help="wall-time measurements a trial")
    a = p.parse_args()
    rows, n = (int(v) for v in a.shape.split("x"))
    dev = wr.device()
    import wgpu
    x = np.random.default_rng(0).standard_normal((rows, n)).astype(np.float32)
    out = {"device": dev.info.name, "shape": a.shape, "trials": []}
    keep = []
    sizes = [int(s) for s in a.spacers.split(",")]
    for t in range(a.trials):
        mb = sizes[t % len(sizes)]
        if mb:
            keep.append(dev.device.create_buffer(size=mb << 20, usage=wgpu.BufferUsage.STORAGE))
        g = wr.Graph()
        xi = g.input("x", x.shape)
        y = xi.softmax(-1) if a.op == "softmax" else wr.nn.layer_norm(xi, eps=1e-5)
        exe = wr.compile(g, outputs=[y])
        walls = [round(time_executable(exe, {"x": x}, 10, 5) * 1e3, 4) for _ in range(a.repeat)]
        gpu = exe.profile({"x": x}, repeats=5).total_ms
        out["trials"].append({"spacer_mb": mb, "wall_ms": walls, "gpu_ms": round(gpu, 4)})
        print(t, mb, walls, round(gpu, 4), file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
