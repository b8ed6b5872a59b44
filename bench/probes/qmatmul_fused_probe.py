"""Probe: SmolLM2's fused prefill projections (128 rows by default) under every kernel the
lowering offers for them (quant/qgemv_fused.wgsl's GEMV shapes, quant/qmatmul_fused.wgsl's
tiles), GPU microseconds from timestamp queries, each variant forced by autotune.PREFER.
Prints JSON. Usage: python bench/probes/qmatmul_fused_probe.py [M]"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx import nn, quant  # noqa: E402
from webrlx.runtime import autotune  # noqa: E402


def weight(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return quant.words(quant.quantize(rng.standard_normal((n, k)).astype(np.float32) * 0.05,
                                      "q4_1"))


def cases(m: int):
    """(name, build(g, x, params) -> output, params, K) of one projection each."""
    d, f = 576, 1536
    g1 = np.ones(d, np.float32)
    yield ("q+norm+rope", d, {"w": weight(d, d, 1), "g": g1},
           lambda x, p, pos: nn.rope(nn.qlinear(nn.rms_norm(x, p["g"], 1e-5), p["w"], "q4_1",
                                                d, d).reshape(1, m, 9, 64), pos, 1e5))
    yield ("gate_up+norm+swiglu", d, {"w": weight(f, d, 2), "w2": weight(f, d, 3), "g": g1},
           lambda x, p, pos: (lambda h: nn.qlinear(h, p["w"], "q4_1", f, d).silu() *
                              nn.qlinear(h, p["w2"], "q4_1", f, d))(nn.rms_norm(x, p["g"], 1e-5)))
    yield ("down+res", f, {"w": weight(d, f, 4)},
           lambda x, p, pos: x[..., :d] + nn.qlinear(x, p["w"], "q4_1", d, f))
    yield ("o+res", d, {"w": weight(d, d, 5)},
           lambda x, p, pos: x + nn.qlinear(x, p["w"], "q4_1", d, d))


def main() -> None:
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 128
    out = {"device": wr.device().info.name, "M": m, "cases": []}
    rng = np.random.default_rng(0)
    for name, k, params, build in cases(m):
        g = wr.Graph()
        x = g.input("x", (1, m, k))
        pos = g.input("pos", (1,), "int32")
        ps = {n: g.param(n, a.shape, a.dtype) for n, a in params.items()}
        exe = wr.compile(g, outputs=[build(x, ps, pos) * 1.0])
        exe.set_params(params)
        feeds = {"x": rng.standard_normal((1, m, k)).astype(np.float32),
                 "pos": np.zeros(1, np.int32)}
        call = next(c for c in exe.plan({}).program.calls if c.name.startswith("qgemv["))
        row = {"case": name, "default": call.name, "us": {}}
        for v in [call.name, *(v.name for v in call.variants)]:
            autotune.PREFER = v
            e = wr.compile(g, outputs=[build(x, ps, pos) * 1.0])
            e.set_params(params)
            want = e.run(feeds)[0]
            prof = e.profile(feeds, repeats=5)
            row["us"][v] = round(1e3 * sum(ms for kname, ms in prof.by_kernel().items()
                                           if kname.startswith("qgemv[")), 1)
            row.setdefault("check", float(np.abs(want).max()))
        autotune.PREFER = None
        row["best"] = min(row["us"], key=row["us"].get)
        print(json.dumps(row), file=sys.stderr)
        out["cases"].append(row)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
