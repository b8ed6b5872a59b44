"""webrlx's subgroup-matrix matmul (shaders/matmul/matmul_smat.wgsl) shape by shape, raw on
navigator.gpu inside Pyodide over Dawn: correctness against numpy on aligned and ragged
shapes, and time at 4096^3 / 2048^3; prints JSON.

    python -m webrlx dawn -- python bench/probes/smat_probe.py [--n 4096] [--sgid both]

Each shape runs with the subgroup index from `@builtin(subgroup_id)` and computed from the
thread index (--sgid builtin|computed|both). Time: `reps` dispatches in one submit, ended by a
4-byte readback, median of 5 batches (bench/probes/subgroup_matrix_probe.py's Gpu), after
WARM_S seconds of the same batches (the GPU's clock up: see webrlx.cli.clocks.hold_clocks).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from subgroup_matrix_probe import Gpu  # noqa: E402

from webrlx.cli.clocks import hold_clocks  # noqa: E402
from webrlx.compiler import smat  # noqa: E402
from webrlx.kernels import kernel  # noqa: E402

STORAGE = 0x80 | 0x8 | 0x4


def run(gpu: Gpu, pipe: object, shape: smat.SmatShape, a: np.ndarray, b: np.ndarray,
        reps: int = 1, batches: int = 0) -> tuple[np.ndarray, float]:
    """C = A @ B (f16 out) through one matmul_smat pipeline; median s per dispatch if timed."""
    import statistics
    import time
    m, k = a.shape
    n = b.shape[1]
    params = np.array([m, n, k, 0, 0, 0, 0, 0, 0, 0, 0, k, 1, 0, 0, 0], np.uint32)
    bufs = [gpu.buffer(a, STORAGE), gpu.buffer(b, STORAGE), gpu.buffer(np.zeros(8, np.float16),
            STORAGE), gpu.buffer(np.zeros(m * n, np.float16), STORAGE),
            gpu.buffer(params, 0x40 | 0x8)]
    grid = (-(-n // shape.bn), -(-m // shape.bm))
    out = gpu.run(pipe, bufs, grid, 1, bufs[3], 4 if batches else m * n * 2)
    if batches:                          # the GPU's clock up first
        hold_clocks(lambda: gpu.run(pipe, bufs, grid, reps, bufs[3], 4), lambda: None)
    times = []
    for _ in range(batches):
        t = time.perf_counter()
        gpu.run(pipe, bufs, grid, reps, bufs[3], 4)
        times.append((time.perf_counter() - t) / reps)
    for buf in bufs:
        buf.destroy()
    got = out.view(np.float16).astype(np.float32)
    return (got if batches else got.reshape(m, n)), (statistics.median(times) if times else 0.0)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--sgid", default="both", choices=("builtin", "computed", "both"))
    p.add_argument("--shapes", nargs="*", default=[],
                   help="extra shapes SGM,SGN,TM,TN,BK[,PF1] beside smat.SHAPES (PF1 1: the "
                        "tiles' loads one step ahead)")
    p.add_argument("--only-extra", action="store_true")
    p.add_argument("--diag", nargs="*", default=[],
                   help="shape names also timed without tile copies and without products")
    a = p.parse_args()
    gpu = Gpu()
    rng = np.random.default_rng(0)
    checks = [(512, 512, 512), (300, 264, 520), (128, 384, 384)]
    data = {c: (rng.standard_normal(c[:1] + c[2:]).astype(np.float16),
                rng.standard_normal(c[2:] + c[1:2]).astype(np.float16)) for c in checks}
    big = {n: (rng.standard_normal((n, n)).astype(np.float16),
               rng.standard_normal((n, n)).astype(np.float16)) for n in (a.n, 2048)}
    out: dict = {"configs": gpu.configs, "n": a.n, "variants": []}
    modes = ("builtin", "computed") if a.sgid == "both" else (a.sgid,)
    extra = [smat.SmatShape(*map(int, sp.split(","))) for sp in a.shapes]
    shapes = extra + ([] if a.only_extra else list(smat.SHAPES))
    for name in a.diag:
        sh = next(x for x in shapes if x.name == name)
        for copy, mma in ((False, True), (True, False)):
            src = kernel("matmul/matmul_smat", T="f16",
                         **smat.slots(sh, True, copy, mma)).source
            pipe = gpu.pipeline(src)
            x, y = big[a.n]
            _, sec = run(gpu, pipe, sh, x, y, a.reps, 5)
            row = {"diag": name, "copy": copy, "mma": mma, f"ms_{a.n}": sec * 1e3}
            out.setdefault("diag", []).append(row)
            print(json.dumps(row), file=sys.stderr)
    for mode in modes:
        for shape in shapes:
            row: dict = {"shape": shape.name, "sgid": mode,
                         "workgroup_bytes": shape.workgroup_bytes()}
            out["variants"].append(row)
            try:
                src = kernel("matmul/matmul_smat", T="f16",
                             **smat.slots(shape, mode == "builtin")).source
                pipe = gpu.pipeline(src)
            except Exception as e:  # noqa: BLE001 - what Tint refuses is the finding
                row["error"] = str(e)[:1200]
                continue
            errs = []
            for x, y in data.values():
                ref = x.astype(np.float32) @ y.astype(np.float32)
                got, _ = run(gpu, pipe, shape, x, y)
                errs.append(float(np.abs(got - ref).max() / np.abs(ref).max()))
            row["max_rel_err"] = dict(zip([f"{m}x{n}x{k}" for m, n, k in checks], errs))
            for n, (x, y) in big.items():
                _, sec = run(gpu, pipe, shape, x, y, a.reps, 5)
                row[f"ms_{n}"] = sec * 1e3
                row[f"tflops_{n}"] = 2.0 * n ** 3 / sec / 1e12
            print(json.dumps(row), file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
