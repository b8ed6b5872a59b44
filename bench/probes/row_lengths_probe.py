"""Row ops over the row lengths the GPU-speed issue names (64-8192), at a fixed element count
(rows x length = --elements): softmax, layer_norm, rms_norm and a row sum, webrlx beside torch
CUDA (numpy elsewhere) in the same run, the bench's method (bench._case). Prints JSON.
    python bench/probes/row_lengths_probe.py [--lengths 64,128,...,8192] [--elements 16777216]
        [--ops softmax,layer_norm] [--tpr ,32,64,128] [--min-n 128,64]
(--tpr: threads a row of the register-row kernels, lower_rows.REGS_ROW_TPR, "" the default;
--min-n: lower_rows.REGS_ROW_MIN_N, the shortest row they take: each combination is timed)"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import _case  # noqa: E402
from webrlx.compiler import lower_rows  # noqa: E402


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
    p.add_argument("--ops", default="softmax,layer_norm,rms_norm,sum")
    p.add_argument("--tpr", default="")
    p.add_argument("--min-n", default=str(lower_rows.REGS_ROW_MIN_N))
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
        for name in a.ops.split(","):
            for tpr in a.tpr.split(","):
                for min_n in (int(v) for v in a.min_n.split(",")):
                    lower_rows.REGS_ROW_TPR = int(tpr) if tpr else None
                    lower_rows.REGS_ROW_MIN_N = min_n
                    tag = f"{name} {x.shape[0]}x{n}" + (f" tpr {tpr}" if tpr else "") + \
                        (f" min_n {min_n}" if "," in a.min_n else "")
                    try:
                        row = _case(tag, builds[name], [x], nps[name], _torch_fn(name, n), 0,
                                    10, 5)
                    except Exception as e:     # noqa: BLE001 - report the op and go on
                        row = {"case": tag, "error": str(e)[-300:]}
                    out["cases"].append(row)
                    print(f"{row['case']:36s} {row.get('webrlx_ms', 0):8.4f} ms ref "
                          f"{row.get('ref_ms', 0):8.4f} ratio {row.get('ratio_vs_ref', 0):.2f}",
                          file=sys.stderr, flush=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
