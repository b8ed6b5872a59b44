"""f32 (or f16) matmuls with each register-tiled kernel forced (autotune.PREFER, names given
with --kernels; a name the lowering does not offer runs its default): wall time per run and
GPU time (timestamp queries), torch beside where CUDA is present. Prints JSON.
    python bench/probes/tiled_probe.py [--shapes 1024x1024x1024,...] [--dtype float32]
(shapes are MxKxN; the 128-tile split-K is turned off so each kernel runs whole)"""
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
from webrlx.runtime import autotune  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="1024x1024x1024,2048x2048x2048,4096x4096x4096,"
                                       "4096x384x1536,4096x1536x384,4096x384x384")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--kernels", default="matmul_vec4,matmul_vec4_64")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    out = {"device": wr.device().info.name, "dtype": a.dtype, "cases": {}}
    lower_matmul.SPLIT_K_BIG = 0
    for shape in a.shapes.split(","):
        m, k, n = (int(v) for v in shape.split("x"))
        x = rng.standard_normal((m, k)).astype(a.dtype)
        w = rng.standard_normal((k, n)).astype(a.dtype)
        row = {}
        for name in a.kernels.split(","):
            autotune.PREFER = name
            g = wr.Graph()
            xi, wi = g.input("x", x.shape, a.dtype), g.input("w", w.shape, a.dtype)
            exe = wr.compile(g, outputs=[xi @ wi])
            got = exe.run({"x": x, "w": w})[0].astype(np.float32)
            want = x.astype(np.float32) @ w.astype(np.float32)
            err = float(np.abs(got - want).max() / np.abs(want).max())
            ms = time_executable(exe, {"x": x, "w": w}, 10, 5) * 1e3
            gpu = exe.profile({"x": x, "w": w}, repeats=3).total_ms
            row[name] = {"ms": round(ms, 4), "gpu_ms": round(gpu, 4),
                         "tflops": round(2 * m * n * k / ms / 1e9, 2), "rel_err": err}
        autotune.PREFER = None
        row["torch_ms"] = _ref_timer(np.matmul, lambda u, v: u @ v, [x, w], 10, 5,
                                     a.dtype)["ref_ms"]
        out["cases"][shape] = row
        print(shape, {k: (v["ms"], v["gpu_ms"], v["tflops"]) if isinstance(v, dict) else v
                      for k, v in row.items()}, file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
