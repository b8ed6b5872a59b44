"""The quantized prefill matmul on subgroup matrices (shaders/quant/qmatmul_smat.wgsl) per tile
shape against the tiled f32 kernels (smat.MODE "off"), on the shapes of a Llama-3.2-1B 512-token
prefill and a SmolLM2 128-token one: GPU us per call (Executable.profile: timestamp queries;
under Dawn run with `--dawn-flag disable-dawn-features=timestamp_quantization`), TFLOP/s, and
the error against numpy on the dequantized weight. Prints JSON (one line).

    python -m webrlx dawn --dawn-flag enable-dawn-features=allow_unsafe_apis,\
vulkan_enable_f16_on_nvidia --dawn-flag disable-dawn-features=timestamp_quantization \
        -- python bench/probes/qsmat_probe.py [--cases 1b|smollm2|all]
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

CALLS = 4
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
    """One qlinear under smat.MODE = mode: GPU us of its matmul kernel, its name, the error."""
    smat.MODE = mode
    raw = quant.random_blocks(fmt, n, k, seed=1)
    wf = quant.dequantize(raw, fmt, (n, k)).astype(np.float64)
    x = np.random.default_rng(2).standard_normal((m, k)).astype(np.float32)
    g = wr.Graph()
    xi, w = g.input("x", (m, k), "float32"), g.param("w", (raw.size // 4,), "uint32")
    # CALLS independent calls in one submit (a lone call's timestamps read 0 on an H200)
    exe = wr.compile(g, outputs=[nn.qlinear(xi * float(i + 1), w, fmt, n, k)
                                 for i in range(CALLS)], device=dev)
    exe.set_params({"w": quant.words(raw)})
    got = exe.run({"x": x})[0]
    want = x.astype(np.float64) @ wf.T
    prof = exe.profile({"x": x}, repeats=5)
    kern = max(prof.by_kernel().items(), key=lambda kv: kv[1])[0]
    ms = float(np.median([r["ms"] for r in prof.rows if r["kernel"] == kern]))
    if ms <= 0:                                     # wall time of runs back to back instead
        exe.run({"x": x}, keep_on_device=True)
        t = time.perf_counter()
        for _ in range(10):
            exe.run({"x": x}, keep_on_device=True)
        exe.run({"x": x})                           # (reads: waits for all)
        ms, source = 1e3 * (time.perf_counter() - t) / (11 * CALLS), "wall"
    else:
        source = prof.source
    return {"kernel": kern, "us": round(1e3 * ms, 2),
            "tflops": round(2 * m * n * k / (ms * 1e-3) / 1e12, 1),
            "rel_err": float(np.abs(got - want).max() / np.abs(want).max()),
            "source": source}


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
