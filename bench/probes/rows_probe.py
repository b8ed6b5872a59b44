"""Row ops and attention at each REGS_ROW_MIN_N (lower_rows: rows from this length run the
register-row kernels on GPUs): wall time per run and the GPU time of each kernel (timestamp
queries), to pick the threshold. Prints JSON.
    python bench/probes/rows_probe.py [--min-n 1025,128]"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import time_executable  # noqa: E402
from webrlx.compiler import lower_rows  # noqa: E402


def cases() -> list[tuple[str, object, list[tuple[int, ...]]]]:
    out = []
    for r, n in ((4096, 384), (6144, 512), (4096, 128), (1024, 1024)):
        out.append((f"softmax {r}x{n}", lambda t: t.softmax(-1), [(r, n)]))
        out.append((f"layer_norm {r}x{n}", lambda t: wr.nn.layer_norm(t, eps=1e-5), [(r, n)]))
    for s in (128, 512, 2048):
        out.append((f"attention 1x12x{s}x64", wr.nn.attention, [(1, 12, s, 64)] * 3))
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--min-n", default="1025,128")
    p.add_argument("--tpr", default="", help="threads a row to try too, e.g. 64,128")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    out = {"device": wr.device().info.name, "cases": {}}
    default = lower_rows.REGS_ROW_MIN_N
    for name, fn, shapes in cases():
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        row = {}
        tries = [(int(v), None) for v in a.min_n.split(",")]
        tries += [(default, int(t)) for t in a.tpr.split(",") if t]
        for min_n, tpr in tries:
            lower_rows.REGS_ROW_MIN_N, lower_rows.REGS_ROW_TPR = min_n, tpr
            g = wr.Graph()
            ins = [g.input(f"x{i}", s) for i, s in enumerate(shapes)]
            exe = wr.compile(g, outputs=[fn(*ins)])
            feeds = {f"x{i}": v for i, v in enumerate(arrays)}
            wall = time_executable(exe, feeds, 10, 5)
            prof = exe.profile(feeds, repeats=5)
            row[f"{min_n}" + (f" tpr {tpr}" if tpr else "")] = {"wall_us": round(wall * 1e6, 1),
                          "gpu_us": round(prof.total_ms * 1e3, 1),
                          "kernels_us": {k: round(v * 1e3, 1) for k, v in prof.by_kernel().items()}}
        lower_rows.REGS_ROW_MIN_N, lower_rows.REGS_ROW_TPR = default, None
        out["cases"][name] = row
        print(name, row, file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
