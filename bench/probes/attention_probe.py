"""Time the three attention kernels (lower_attention.attention_path: "row", "rows", "matmul")
on MiniLM-like shapes on the current adapter, to pick between them by shape. Prints JSON.

    python bench/probes/attention_probe.py [--iters 5] [--repeats 3]
    VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json python bench/probes/attention_probe.py

Each case is a masked (batch, 12 heads, lq | lk, 32) attention, as MiniLM runs it; the run is
timed on the device with inputs uploaded once (webrlx.cli.bench.time_executable)."""
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

SHAPES = [(3, 12, 12, 12), (1, 12, 8, 8), (2, 12, 24, 24), (1, 12, 48, 48), (1, 12, 64, 64),
          (1, 12, 128, 128), (2, 12, 128, 128), (4, 12, 128, 128), (8, 12, 128, 128),
          (1, 12, 256, 256), (1, 12, 1, 512), (1, 12, 4, 512)]   # (batch, heads, lq, lk)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--head-dim", type=int, default=32)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    out = {"device": wr.device().info.name, "cases": []}
    for b, h, lq, s in SHAPES:
        d = a.head_dim
        q = rng.standard_normal((b, h, lq, d)).astype(np.float32)
        k, v = (rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(2))
        mask = np.ones((b, s), np.int32)
        mask[-1, s - s // 4:] = 0
        row = {"shape": f"{b}x{h}x{lq}x{s}x{d}"}
        for path in ("rows", "regs", "matmul"):
            lower_attention.FORCE_PATH = path
            g = wr.Graph()
            ins = [g.input(n, x.shape, x.dtype) for n, x in zip("qkvm", (q, k, v, mask))]
            exe = wr.compile(g, outputs=[wr.nn.attention(*ins)])
            feeds = dict(zip("qkvm", (q, k, v, mask)))
            row[f"{path}_ms"] = round(time_executable(exe, feeds, a.iters, a.repeats) * 1e3, 4)
        lower_attention.FORCE_PATH = None
        print(json.dumps(row), file=sys.stderr)
        out["cases"].append(row)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
