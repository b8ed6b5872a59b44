"""The quantized prefill matmul on subgroup matrices (shaders/quant/qmatmul_smat.wgsl) per tile
shape against the tiled f32 kernels (smat.MODE "off"), on the shapes of a Llama-3.2-1B 512-token
prefill and a SmolLM2 128-token one: wall us a call (runs back to back; the host's cost a run
is in it, so small shapes read high), TFLOP/s, and the error against numpy on the dequantized
weight. Prints JSON (one line).
Not timestamps: under Dawn passes without a barrier between them overlap and each pass's
stamps span the others' (an earlier form of this probe, 4 independent calls a submit, read
the tiled kernel 5.8x slower under Dawn than natively on an H200), and a lone call's stamps
read 0 there natively.

    python -m webrlx dawn -- python bench/probes/qsmat_probe.py [--cases 1b|smollm2|all]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx import nn, quant  # noqa: E402
from webrlx.compiler import smat  # noqa: E402
from webrlx.runtime import autotune  # noqa: E402

RUNS = 20
CASES = {   # name: (M, N, K, format)
    "1b": {"gate 512x8192x2048 q4_k": (512, 8192, 2048, "q4_k"),
           "down 512x2048x8192 q6_k": (512, 2048, 8192, "q6_k"),
           "o 512x2048x2048 q4_k": (512, 2048, 2048, "q4_k"),
           "k 512x512x2048 q4_k": (512, 512, 2048, "q4_k")},
    "smollm2": {"up 128x1536x576 q4_1": (128, 1536, 576, "q4_1"),
                "down 128x576x1536 q4_1": (128, 576, 1536, "q4_1"),
                "q 128x576x576 q4_1": (128, 576, 576, "q4_1")},
}


def one(dev: Any, m: int, n: int, k: int, fmt: str, mode: str | None) -> dict[str, Any]:
    """One qlinear under smat.MODE = mode: the variant that ran, wall us a call (RUNS runs
    back to back, each writing the same output: the GPU runs them in order), the error."""
    smat.MODE = mode
    raw = quant.random_blocks(fmt, n, k, seed=1)
    wf = quant.dequantize(raw, fmt, (n, k)).astype(np.float64)
    x = np.random.default_rng(2).standard_normal((m, k)).astype(np.float32)
    g = wr.Graph()
    xi, w = g.input("x", (m, k), "float32"), g.param("w", (raw.size // 4,), "uint32")
    exe = wr.compile(g, outputs=[nn.qlinear(xi, w, fmt, n, k)], device=dev)
    exe.set_params({"w": quant.words(raw)})
    (got,) = exe.run({"x": x})
    want = x.astype(np.float64) @ wf.T
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(RUNS - 1):
            exe.run({"x": x}, keep_on_device=True)
        exe.run({"x": x})                           # (its read waits for every run)
        times.append((time.perf_counter() - t) / RUNS)
    s = float(np.median(times))
    return {"kernel": exe.plan({}).ran[-1], "us": round(1e6 * s, 2),
            "tflops": round(2 * m * n * k / s / 1e12, 1),
            "rel_err": float(np.abs(got - want).max() / np.abs(want).max())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="all", choices=("1b", "smollm2", "all"))
    a = ap.parse_args()
    autotune.TIME_VARIANTS = False                  # each kernel as forced / defaulted
    dev = wr.device()
    info = dev.info
    modes: list[str | None] = ["off", *(sh.name for sh in smat.SHAPES if smat.fits(info, sh))] \
        if smat.available(info) else ["off"]
    cases = {**CASES["1b"], **CASES["smollm2"]} if a.cases == "all" else CASES[a.cases]
    out: dict[str, Any] = {"adapter": str(info.name), "smat_available": smat.available(info),
                           "cases": {}}
    for name, (m, n, k, fmt) in cases.items():
        out["cases"][name] = {str(mode): one(dev, m, n, k, fmt, mode) for mode in modes}
        if smat.available(info):
            out["cases"][name]["default"] = one(dev, m, n, k, fmt, None)
        print(name, out["cases"][name], file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
