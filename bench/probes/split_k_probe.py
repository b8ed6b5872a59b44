"""f32 matmuls at each K-piece setting of 128x128 tiles (lower_matmul.SPLIT_K_BIG: 0 = off,
default = split_k_big's pick, or a forced count): wall time per run and GPU time (timestamp
queries), beside torch where CUDA is present. Prints JSON.
    python bench/probes/split_k_probe.py [--shapes 1024x1024x1024,4096x1536x384] [--pieces 0,2,4]
(shapes are MxKxN)"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import _ref_timer, time_executable  # noqa: E402
from webrlx.compiler import lower_matmul  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="1024x1024x1024,2048x2048x2048,4096x1536x384,"
                                       "4096x384x1536,4096x384x384")
    p.add_argument("--pieces", default="0,2,4")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    out = {"device": wr.device().info.name, "cases": {}}
    for shape in a.shapes.split(","):
        m, k, n = (int(v) for v in shape.split("x"))
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((k, n)).astype(np.float32)
        row = {"default_pieces": lower_matmul.split_k_big(m, n, k, 1, 1 << 27)}
        for pieces in [int(v) for v in a.pieces.split(",")]:
            lower_matmul.SPLIT_K_BIG = pieces
            g = wr.Graph()
            xi, wi = g.input("x", x.shape), g.input("w", w.shape)
            exe = wr.compile(g, outputs=[xi @ wi])
            got = exe.run({"x": x, "w": w})[0]
            assert np.allclose(got, x @ w, rtol=1e-3, atol=1e-2), shape
            ms = time_executable(exe, {"x": x, "w": w}, 20, 5) * 1e3
            gpu = exe.profile({"x": x, "w": w}, repeats=5).total_ms
            row[str(pieces)] = {"ms": round(ms, 4), "gpu_ms": round(gpu, 4),
                                "tflops": round(2 * m * n * k / ms / 1e9, 2),
                                "kernels": [c.name for c in exe.last_plan.program.calls]}
        lower_matmul.SPLIT_K_BIG = None
        row["torch_ms"] = _ref_timer(np.matmul, lambda u, v: u @ v, [x, w], 20, 5,
                                     "float32")["ref_ms"]
        out["cases"][shape] = row
        print(shape, row, file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
