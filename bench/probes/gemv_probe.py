"""GEMV rows x K @ K x N (f32) at each column-quads setting of matmul/gemv.wgsl, with its K
loop unrolled and not (lower_matmul.GEMV_UNROLL): wall time per run and GPU time (timestamp
queries), beside torch where CUDA is present. Prints JSON.
    python bench/probes/gemv_probe.py [--n 4096] [--k 4096] [--rows 1] [--quads 1,2,4,8]"""
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
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--quads", default="1,2,4,8")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((a.rows, a.k)).astype(np.float32)
    w = rng.standard_normal((a.k, a.n)).astype(np.float32)
    out = {"device": wr.device().info.name, "shape": f"{a.rows}x{a.k}x{a.n}", "quads": {}}
    default, default_unroll = lower_matmul.GEMV_QUADS, lower_matmul.GEMV_UNROLL
    for quads in [int(q) for q in a.quads.split(",")]:
        for unroll in (False, True):
            lower_matmul.GEMV_QUADS, lower_matmul.GEMV_UNROLL = quads, unroll
            g = wr.Graph()
            xi, wi = g.input("x", x.shape), g.input("w", w.shape)
            exe = wr.compile(g, outputs=[xi @ wi])
            assert np.allclose(exe.run({"x": x, "w": w})[0], x @ w, rtol=1e-3, atol=1e-3)
            ms = time_executable(exe, {"x": x, "w": w}, 50, 5) * 1e3
            gpu = exe.profile({"x": x, "w": w}, repeats=5).total_ms
            out["quads"][f"{quads}{' unrolled' if unroll else ''}"] = {
                "ms": round(ms, 4), "gpu_ms": round(gpu, 4),
                "GB/s": round(w.nbytes / ms / 1e6), "gpu_GB/s": round(w.nbytes / gpu / 1e6)}
    lower_matmul.GEMV_QUADS, lower_matmul.GEMV_UNROLL = default, default_unroll
    out["default_quads"] = default
    out["reference"] = _ref_timer(np.matmul, lambda u, v: u @ v, [x, w], 50, 5, "float32")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
