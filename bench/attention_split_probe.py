"""Attention's two-matmul form (lower_attention._attention_by_matmul) kernel by kernel: the
GPU time of each dispatch (timestamp queries) at batch 1, 12 heads, head dim 64, and the wall
time per run with each matmul variant forced (autotune.PREFER), beside torch SDPA in the same
run where CUDA is present. Prints JSON.
    python bench/attention_split_probe.py [--seqs 512,2048]"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import _ref_timer, time_executable  # noqa: E402
from webrlx.runtime import autotune  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seqs", default="512,2048")
    p.add_argument("--prefer", default=",matmul_vec4_64,matmul_vec4_db")
    a = p.parse_args()
    out = {"device": wr.device().info.name, "cases": {}}
    rng = np.random.default_rng(0)
    for s in (int(v) for v in a.seqs.split(",")):
        q, k, v = (rng.standard_normal((1, 12, s, 64)).astype(np.float32) for _ in range(3))
        feeds = {"q": q, "k": k, "v": v}
        row: dict = {}
        for prefer in a.prefer.split(","):
            autotune.PREFER = prefer or None
            g = wr.Graph()
            ins = [g.input(n, (1, 12, s, 64)) for n in "qkv"]
            exe = wr.compile(g, outputs=[wr.nn.attention(*ins)])
            exe.run(feeds)
            ms = time_executable(exe, feeds, 10, 5) * 1e3
            prof = exe.profile(feeds, repeats=3)
            row[prefer or "tuned"] = {"ms": round(ms, 4), "gpu_ms": round(prof.total_ms, 4),
                                      "kernels": str(prof).splitlines()}
            print(s, prefer or "tuned", round(ms, 4), file=sys.stderr)
            print(str(prof), file=sys.stderr)
        autotune.PREFER = None

        def torch_attn(q, k, v):
            import torch
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        row["torch"] = _ref_timer(lambda *x: None, torch_attn, [q, k, v], 10, 5, "float32")
        print(s, "torch", row["torch"], file=sys.stderr)
        out["cases"][f"attention 1x12x{s}x64"] = row
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
