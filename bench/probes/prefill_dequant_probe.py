"""Would a native prefill gain from dequantizing a weight once and running the f32 (or f16)
matmul on it, instead of the quantized tiled kernels that dequantize inside every tile?
For the projections of a Llama-3.2-1B 512-token prefill: GPU ms (timestamps, after
clocks.WARM_S of the same work) of the quantized matmul as the compiler lowers it
(nn.qlinear, autotuned), of the plain matmul x @ W^T on the dequantized weight (f32 and f16,
autotuned; W^T stored K x N), and torch on the same machine beside them where CUDA is there.
Prints JSON (one line).

    python bench/probes/prefill_dequant_probe.py [--m 512] [--cases gate,down,o,k]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx import nn, quant  # noqa: E402
from webrlx.cli.bench import _ref_timer, time_executable, warm_executable  # noqa: E402

CASES = {   # name: (N, K, format) of a Llama-3.2-1B Q4_K_M projection
    "gate": (8192, 2048, "q4_k"), "down": (2048, 8192, "q6_k"),
    "o": (2048, 2048, "q4_k"), "k": (512, 2048, "q4_k")}


def timed(exe: wr.Executable, feeds: dict[str, np.ndarray], flops: float) -> dict[str, Any]:
    warm_executable(exe, feeds)
    wall = time_executable(exe, feeds, 10, 5)
    prof = exe.profile(feeds, repeats=3)
    return {"wall_ms": round(wall * 1e3, 4), "gpu_ms": round(prof.total_ms, 4),
            "tflops_wall": round(flops / wall / 1e12, 2),
            "kernels": list(prof.by_kernel())[:3]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--m", type=int, default=512)
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args()
    dev = wr.device()
    out: dict[str, Any] = {"adapter": str(dev.info.name), "m": a.m, "cases": {}}
    rng = np.random.default_rng(0)
    for name in a.cases.split(","):
        n, k, fmt = CASES[name]
        m, flops = a.m, 2.0 * a.m * n * k
        raw = quant.random_blocks(fmt, n, k, seed=1)
        wf = quant.dequantize(raw, fmt, (n, k)).astype(np.float32)
        x = rng.standard_normal((m, k)).astype(np.float32)
        want = x.astype(np.float64) @ wf.T.astype(np.float64)
        row: dict[str, Any] = {}
        g = wr.Graph()
        xi, w = g.input("x", (m, k), "float32"), g.param("w", (raw.size // 4,), "uint32")
        exe = wr.compile(g, outputs=[nn.qlinear(xi, w, fmt, n, k)], device=dev)
        exe.set_params({"w": quant.words(raw)})
        got = exe.run({"x": x})[0]
        row["quantized"] = {**timed(exe, {"x": x}, flops),
                            "rel_err": float(np.abs(got - want).max() / np.abs(want).max())}
        wt = np.ascontiguousarray(wf.T)
        for dtype in ("float32", "float16"):
            feeds = {"x": x.astype(dtype), "w": wt.astype(dtype)}
            g = wr.Graph()
            xi, wi = g.input("x", (m, k), dtype), g.input("w", (k, n), dtype)
            exe = wr.compile(g, outputs=[xi @ wi], device=dev)
            got = exe.run(feeds)[0].astype(np.float64)
            row[dtype] = {**timed(exe, feeds, flops),
                          "rel_err": float(np.abs(got - want).max() / np.abs(want).max())}
            ref = _ref_timer(np.matmul, lambda u, v: u @ v, [feeds["x"], feeds["w"]], 10, 5,
                             dtype)
            row[f"torch_{dtype}_ms"] = ref.get("ref_ms")
        out["cases"][f"{name} {m}x{n}x{k} {fmt}"] = row
        print(name, json.dumps(row), file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
