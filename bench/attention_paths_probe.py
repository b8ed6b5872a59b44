"""Each attention path (lower_attention.FORCE_PATH: the two-matmul form, "rows", "row") at
MiniLM's and the bench's shapes, with a padding mask: wall time per run (the bench's method),
beside torch SDPA in the same run where CUDA is present. Prints JSON.
    python bench/attention_paths_probe.py [--shapes 32x12x128x64,1x12x2048x64]"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import _ref_timer, time_executable  # noqa: E402
from webrlx.compiler import lower_attention  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="32x12x128x64,8x12x128x64,1x12x512x64,1x12x2048x64")
    p.add_argument("--paths", default="matmul,rows,row")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    out = {"device": wr.device().info.name, "cases": {}}
    for shape in a.shapes.split(","):
        b, h, s, d = (int(v) for v in shape.split("x"))
        q, k, v = (rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(3))
        mask = np.ones((b, s), np.int32)
        mask[:, s - s // 4:] = 0
        feeds = {"q": q, "k": k, "v": v, "m": mask}
        row: dict = {}
        for path in a.paths.split(","):
            lower_attention.FORCE_PATH = path
            g = wr.Graph()
            ins = [g.input(n, (b, h, s, d)) for n in "qkv"]
            m = g.input("m", (b, s), "int32")
            try:
                exe = wr.compile(g, outputs=[wr.nn.attention(*ins, mask=m)])
                exe.run(feeds)
                row[path] = round(time_executable(exe, feeds, 10, 5) * 1e3, 4)
            except Exception as e:   # noqa: BLE001 - a path may not fit the shape
                row[path] = str(e)[-200:]
        lower_attention.FORCE_PATH = None

        def torch_attn(q, k, v, m):
            import torch
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=(m[:, None, None, :] != 0))
        row["torch"] = _ref_timer(lambda *x: None, torch_attn, [q, k, v, mask], 10, 5,
                                  "float32").get("ref_ms")
        print(shape, row, file=sys.stderr, flush=True)
        out["cases"][shape] = row
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
