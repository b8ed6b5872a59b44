"""The split form of softmax / layer_norm over few long rows at several chunk sizes
(lower_rows.SPLIT_ROW_CHUNK, elements a workgroup takes): wall time per run (the bench's
method) and GPU time, torch in the same run. Prints JSON.
    python bench/probes/split_chunk_probe.py [--chunks 1024,2048,4096,8192,16384]"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import _ref_timer, time_executable  # noqa: E402
from webrlx.compiler import lower_rows  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--chunks", default="1024,2048,4096,8192,16384")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    out = {"device": wr.device().info.name, "cases": {}}
    default = lower_rows.SPLIT_ROW_CHUNK
    ops = {"softmax": (lambda t: t.softmax(-1), lambda x: x.softmax(-1)),
           "layer_norm": (lambda t: wr.nn.layer_norm(t, eps=1e-5),
                          lambda x: __import__("torch").nn.functional.layer_norm(
                              x, x.shape[-1:]))}
    for r, n in ((32, 49152), (1, 49152), (8, 32768)):
        x = rng.standard_normal((r, n)).astype(np.float32)
        for op, (fn, tfn) in ops.items():
            row = {}
            for chunk in (int(c) for c in a.chunks.split(",")):
                lower_rows.SPLIT_ROW_CHUNK = chunk
                g = wr.Graph()
                exe = wr.compile(g, outputs=[fn(g.input("x", (r, n)))])
                exe.run({"x": x})
                prof = exe.profile({"x": x}, repeats=5)
                row[chunk] = {"wall_us": round(time_executable(exe, {"x": x}, 10, 5) * 1e6, 1),
                              "gpu_us": round(prof.total_ms * 1e3, 1)}
            lower_rows.SPLIT_ROW_CHUNK = default
            ref = _ref_timer(lambda v: None, tfn, [x], 10, 5, "float32")
            row["ref_us"] = round(ref["ref_ms"] * 1e3, 1)
            out["cases"][f"{op} {r}x{n}"] = row
            print(f"{op} {r}x{n}", row, file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
