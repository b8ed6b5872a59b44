"""Row ops over the row lengths the GPU-speed issue names (64-8192), at a fixed element count
(rows x length = --elements): softmax, layer_norm, rms_norm and a row sum, webrlx beside torch
CUDA (numpy elsewhere) in the same run, the bench's method (bench._case). Prints JSON.
    python bench/row_lengths_probe.py [--lengths 64,128,...,8192] [--elements 16777216]"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import _case  # noqa: E402


def _torch_fn(name: str, n: int):
    def fn(t):
        import torch
        if name == "softmax":
            return t.softmax(-1)
        if name == "layer_norm":
            return torch.nn.functional.layer_norm(t, (n,), eps=1e-5)
        if name == "rms_norm":
            return torch.nn.functional.rms_norm(t, (n,), eps=1e-5)
        return t.sum(-1)
    return fn


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lengths", default="64,128,256,512,1024,2048,4096,8192")
    p.add_argument("--elements", type=int, default=1 << 24)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    builds = {"softmax": lambda t: t.softmax(-1),
              "layer_norm": lambda t: wr.nn.layer_norm(t, eps=1e-5),
              "rms_norm": lambda t: wr.nn.rms_norm(t, eps=1e-5),
              "sum": lambda t: t.sum(-1)}
    nps = {"softmax": lambda x: np.exp(x - x.max(-1, keepdims=True))
           / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True),
           "layer_norm": lambda x: (x - x.mean(-1, keepdims=True))
           / np.sqrt(x.var(-1, keepdims=True) + 1e-5),
           "rms_norm": lambda x: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5),
           "sum": lambda x: x.sum(-1)}
    out = {"device": wr.device().info.name, "elements": a.elements, "cases": []}
    for n in (int(v) for v in a.lengths.split(",")):
        x = rng.standard_normal((a.elements // n, n)).astype(np.float32)
        for name, build in builds.items():
            try:
                row = _case(f"{name} {x.shape[0]}x{n}", build, [x], nps[name],
                            _torch_fn(name, n), 0, 10, 5)
            except Exception as e:     # noqa: BLE001 - report the op and go on
                row = {"case": f"{name} {x.shape[0]}x{n}", "error": str(e)[-300:]}
            out["cases"].append(row)
            print(f"{row['case']:24s} {row.get('webrlx_ms', 0):8.4f} ms ref "
                  f"{row.get('ref_ms', 0):8.4f} ratio {row.get('ratio_vs_ref', 0):.2f}",
                  file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
