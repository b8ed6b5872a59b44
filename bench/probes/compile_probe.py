"""First-run pipeline compilation, one by one against a thread pool (the wgpu backend's
prepare_pipelines): a graph of ~25 distinct kernels, compiled in a fresh process each time.
Prints JSON.   python bench/probes/compile_probe.py   (set __GL_SHADER_DISK_CACHE=0 on NVIDIA)"""
from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import sys, time, numpy as np, webrlx as wr
from webrlx.backends import base, wgpu_native
from webrlx.runtime import autotune
autotune.enable(False)
if sys.argv[1] == "serial":
    wgpu_native.WgpuBackend.prepare_pipelines = base.Backend.prepare_pipelines
dev = wr.device()
g = wr.Graph()
x = g.input("x", (64, 256))
w = g.param("w", (256, 256))
ys = [getattr(x, op)() for op in ("exp", "tanh", "sin", "cos", "sigmoid", "gelu", "silu",
                                  "relu", "abs", "sqrt", "erf", "floor", "ceil", "neg")]
ys += [x.softmax(-1), x.log_softmax(-1), wr.nn.layer_norm(x), wr.nn.rms_norm(x), x @ w,
       x.cumsum(axis=1), x.sum(axis=0), x.max(axis=1), x.argmax(axis=1).cast("float32")]
exe = wr.compile(g, outputs=ys, fuse=False, device=dev)
exe.set_params({"w": np.ones((256, 256), np.float32)})
t = time.perf_counter()
exe.run({"x": np.ones((64, 256), np.float32)})
print(time.perf_counter() - t, dev.stats["pipelines"])
"""


def main() -> None:
    rows = []
    for mode in ("serial", "pool", "serial", "pool"):
        out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True,
                             text=True, check=True).stdout.split()
        rows.append({"mode": mode, "first_run_s": float(out[0]), "pipelines": int(out[1])})
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
