"""Probe: L = 20 chained quantized GEMVs (N = K) as one executable, the autotuner free to pick:
GPU us per GEMV (timestamp queries) and the variant that ran. Prints one JSON line.
Usage: python bench/probes/qgemv_chain_probe.py M N [FORMAT] (e.g. 1 576, 128 1536 q4_k;
FORMAT a webrlx.quant.FORMATS name, q4_1 by default: random blocks for the others)."""
import json
import sys

import numpy as np

import webrlx as wr
from webrlx import nn, quant

m, n = int(sys.argv[1]), int(sys.argv[2])
k, L = n, 20
fmt = sys.argv[3] if len(sys.argv) > 3 else "q4_1"
rng = np.random.default_rng(0)
raws = [quant.quantize(rng.standard_normal((n, k)).astype(np.float32) * 0.03, "q4_1")
        if fmt == "q4_1" else quant.random_blocks(fmt, n, k, seed=i, scale=1e-4)
        for i in range(L)]
ws = {f"w{i}": quant.words(r) for i, r in enumerate(raws)}
x = rng.standard_normal((m, k)).astype(np.float32)
g = wr.Graph()
h = g.input("x", x.shape, x.dtype)
for i in range(L):
    h = nn.qlinear(h, g.param(f"w{i}", ws[f"w{i}"].shape, np.uint32), fmt, n, k)
exe = wr.compile(g, outputs=[h])
exe.set_params(ws)
exe.run({"x": x})
prof = exe.profile({"x": x}, repeats=5)
print(json.dumps({"format": fmt, "m": m, "n": n, "us_per_gemv": 1e3 * prof.total_ms / L,
                  "kernels": prof.by_kernel()}))
