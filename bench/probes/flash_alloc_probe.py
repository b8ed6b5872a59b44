"""Whether attention_flash's time under an engine depends on where its buffers landed, not on
its code: one process compiles a fresh executable (new input buffers) for the same shape
several times, with a storage buffer of a different size allocated (and kept) before each,
and prints each executable's GPU ms (timestamp queries) and wall ms, then each executable's
GPU ms again in order (placement: the same ones stay slow; the moment: all slow at once).
Under Dawn on an H100/H200 the same kernel ran 0.48 or 2.7 ms at 1x12x2048x64 in different
processes (bench/results/2026-11-27-h100-dawn-attention-paths.json).
    python bench/probes/flash_alloc_probe.py [--shape 1x12x2048x64] [--spacers 0,64,1,256,5,0]"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import time_executable  # noqa: E402
from webrlx.compiler import lower_attention  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="1x12x2048x64")
    ap.add_argument("--spacers", default="0,64,1,256,5,0,3,128",
                    help="MiB of a storage buffer allocated (and kept) before each executable")
    a = ap.parse_args()
    b, h, s, d = (int(v) for v in a.shape.split("x"))
    dev = wr.device()
    lower_attention.FORCE_PATH = "flash"
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((b, h, s, d)).astype(np.float32) for n in "qkv"}
    kept: list = []
    rows: list[dict] = []
    exes: list = []
    for mib in (int(v) for v in a.spacers.split(",")):
        if mib:
            kept.append(dev.create_buffer(mib << 20, "storage"))
        g = wr.Graph()
        ins = [g.input(n, (b, h, s, d)) for n in "qkv"]
        exe = wr.compile(g, outputs=[wr.nn.attention(*ins)], device=dev)
        exe.run(feeds)
        prof = exe.profile(feeds, repeats=3)
        rows.append({"spacer_mib": mib, "gpu_ms": round(prof.total_ms, 4),
                     "ms": round(time_executable(exe, feeds, 10, 5) * 1e3, 4)})
        exes.append(exe)
        print(rows[-1], file=sys.stderr, flush=True)
    # each executable again, in order: a slow one that stays slow is its buffers' placement;
    # all slow together at one time is the moment (clocks, a neighbour), not the placement
    again = [round(e.profile(feeds, repeats=3).total_ms, 4) for e in exes]
    print(json.dumps({"device": dev.info.name, "shape": a.shape, "runs": rows,
                      "again_gpu_ms": again}))


if __name__ == "__main__":
    main()
