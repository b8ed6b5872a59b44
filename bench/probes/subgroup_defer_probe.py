"""Subgroup row reductions and deferred submits, each on and off, in one run: per case the
wall time per run (the bench's method: runs back to back, one sync) and, per subgroup setting,
the GPU time of its kernels (timestamp queries); torch's time in the same run where CUDA is
present. Prints JSON.
    python bench/probes/subgroup_defer_probe.py"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.backends import wgpu_native  # noqa: E402
from webrlx.cli.bench import _ref_timer, time_executable  # noqa: E402


def _torch_attention(q, k, v):
    import torch
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def cases() -> list[tuple]:
    out = []
    for r, n in ((4096, 384), (6144, 512), (4096, 128), (1024, 1024), (4096, 4096),
                 (32, 49152)):
        out.append((f"softmax {r}x{n}", lambda t: t.softmax(-1), [(r, n)],
                    lambda x: x.softmax(-1)))
        out.append((f"layer_norm {r}x{n}", lambda t: wr.nn.layer_norm(t, eps=1e-5), [(r, n)],
                    lambda x: __import__("torch").nn.functional.layer_norm(x, x.shape[-1:])))
    for s in (128, 512, 2048):
        out.append((f"attention 1x12x{s}x64", wr.nn.attention, [(1, 12, s, 64)] * 3,
                    _torch_attention))
    out.append(("gemv 1x4096x4096", lambda a, b: a @ b, [(1, 4096), (4096, 4096)],
                lambda a, b: a @ b))
    out.append(("add 1024", lambda a, b: a + b, [(1024,), (1024,)], lambda a, b: a + b))
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    dev = wr.device()
    out = {"device": dev.info.name, "subgroup_size": dev.info.subgroup_size, "cases": {}}
    size = dev.info.subgroup_size
    for name, fn, shapes, tfn in cases():
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        row: dict = {}
        for sg in (0, size) if size else (0,):
            dev.info.subgroup_size = sg
            g = wr.Graph()
            ins = [g.input(f"x{i}", s) for i, s in enumerate(shapes)]
            exe = wr.compile(g, outputs=[fn(*ins)])
            feeds = {f"x{i}": v for i, v in enumerate(arrays)}
            prof = exe.profile(feeds, repeats=5)
            r = {"gpu_us": round(prof.total_ms * 1e3, 1)}
            for defer in (False, True):
                wgpu_native.DEFER_SUBMITS = defer
                dev.stats.clear()
                r[f"wall_us_defer_{'on' if defer else 'off'}"] = round(
                    time_executable(exe, feeds, 10, 5) * 1e6, 1)
                r[f"held_{'on' if defer else 'off'}"] = dev.stats["submits_held"]
            row[f"subgroups {sg or 'off'}"] = r
        dev.info.subgroup_size = size
        wgpu_native.DEFER_SUBMITS = True
        ref = _ref_timer(lambda *a: None, tfn, arrays, 10, 5, "float32")
        row["ref"] = ref["reference"]
        row["ref_us"] = round(ref["ref_ms"] * 1e3, 1)
        out["cases"][name] = row
        print(name, row, file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
