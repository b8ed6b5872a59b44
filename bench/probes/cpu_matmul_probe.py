"""Probe: f32 matmul kernels for CPU adapters (SwiftShader, lavapipe) on MiniLM's thin shapes,
the tiled kernel webrlx runs there against register-only forms without workgroup memory
(no barriers; Chromium's SwiftShader also compiles a pipeline ~75 ms per KB of workgroup
memory). Prints JSON: ms per matmul, best of --repeats, each checked against numpy.

    VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json python
    bench/probes/cpu_matmul_probe.py
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import time_executable  # noqa: E402
from webrlx.runtime import autotune  # noqa: E402

SHAPES = [(36, 384, 1536), (36, 1536, 384), (36, 384, 384), (128, 384, 1536), (128, 1536, 384),
          (1024, 384, 1536)]


def webrlx_ms(m: int, k: int, n: int, a: argparse.Namespace, prefer: str | None) -> float:
    autotune.PREFER = prefer
    g = wr.Graph()
    x, w = g.input("x", (m, k)), g.param("w", (k, n))
    exe = wr.compile(g, outputs=[x @ w])
    rng = np.random.default_rng(0)
    exe.set_params({"w": rng.standard_normal((k, n)).astype(np.float32)})
    t = time_executable(exe, {"x": rng.standard_normal((m, k)).astype(np.float32)}, a.iters,
                        a.repeats)
    autotune.PREFER = None
    return t * 1e3


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--variants", default="matmul_vec4_64,matmul_vec4,matmul_regs_8x2,"
                   "matmul_regs_16x2")
    a = p.parse_args()
    out = {"device": wr.device().info.name, "cases": []}
    for m, k, n in SHAPES:
        row = {"shape": f"{m}x{k}x{n}"}
        for v in a.variants.split(","):
            row[v] = round(webrlx_ms(m, k, n, a, v), 3)
        print(json.dumps(row), file=sys.stderr)
        out["cases"].append(row)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
