"""Softmax of few long rows: the wide register form (one workgroup of up to 1024 threads a
row, lower_rows.wide_row_shape) against the split form (softmax_parts + softmax_finish), wall
time per run (the bench's method) and GPU time, torch in the same run. Prints JSON.
    python bench/probes/wide_rows_probe.py"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import _ref_timer, time_executable  # noqa: E402
from webrlx.compiler import lower_rows  # noqa: E402


def main() -> None:
    rng = np.random.default_rng(0)
    out = {"device": wr.device().info.name, "cases": {}}
    for r, n in ((32, 49152), (1, 49152), (8, 32768), (64, 16384), (256, 12288)):
        x = rng.standard_normal((r, n)).astype(np.float32)
        row = {}
        for wide in (False, True):
            lower_rows.WIDE_ROWS = wide
            g = wr.Graph()
            t = g.input("x", (r, n))
            exe = wr.compile(g, outputs=[t.softmax(-1)])
            got = exe.run({"x": x})[0]
            e = np.exp(x - x.max(-1, keepdims=True))
            err = float(np.abs(got - e / e.sum(-1, keepdims=True)).max())
            prof = exe.profile({"x": x}, repeats=5)
            row["wide" if wide else "split/loop"] = {
                "wall_us": round(time_executable(exe, {"x": x}, 10, 5) * 1e6, 1),
                "gpu_us": round(prof.total_ms * 1e3, 1), "kernels": list(prof.by_kernel()),
                "max_abs_err": err}
        lower_rows.WIDE_ROWS = True
        ref = _ref_timer(lambda a: None, lambda a: a.softmax(-1), [x], 10, 5, "float32")
        row["ref"], row["ref_us"] = ref["reference"], round(ref["ref_ms"] * 1e3, 1)
        out["cases"][f"softmax {r}x{n}"] = row
        print(f"softmax {r}x{n}", row, file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
