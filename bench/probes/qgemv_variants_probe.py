"""Probe: every variant the autotuner offers for the fused quantized GEMVs of a Llama-3.2-1B
shaped layer (hidden 2048, FFN 8192, 32/8 heads of 64) and its LM head (vocab 128256), each
timed once on the device by the tuner itself (Backend.time_dispatch, us), for M = 1 and M = 8
decode rows. Random blocks (K-quants by webrlx.quant.random_blocks).
Usage: python bench/probes/qgemv_variants_probe.py [FMT_FFN] [FMT_DOWN] [FMT_HEAD] [--x16]
[--int8] (default q4_k q6_k q6_k, a Q4_K_M file's mix). --x16: every GEMV reads its x as f16 (a
cast after the norm and after the SwiGLU product: half the x bytes, see qgemv_xtype_probe.py).
--int8: the opt-in int8 decode GEMVs (compiler/int8_decode.INT8_DECODE), whose variants are
timed at M = 8; the layer then also has its attention output projection (2048 x 2048, FMT_FFN,
plus the residual).
Prints one JSON line: per call, the variant times sorted fastest first and the tuner's pick."""
from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

import webrlx as wr
from webrlx import nn, quant
from webrlx.runtime import autotune

HIDDEN, FFN, VOCAB = 2048, 8192, 128256


def weight(fmt: str, n: int, k: int, seed: int) -> np.ndarray:
    return quant.words(quant.random_blocks(fmt, n, k, seed=seed, scale=1e-4))


def main() -> None:
    x16 = "--x16" in sys.argv
    int8 = "--int8" in sys.argv
    if int8:
        from webrlx.compiler import int8_decode
        int8_decode.INT8_DECODE = True
    args = [a for a in sys.argv[1:] if a not in ("--x16", "--int8")]
    f_ffn, f_down, f_head = (args + ["q4_k", "q6_k", "q6_k"][len(args):])[:3]

    def xin(t: Any) -> Any:
        return t.cast("float16") if x16 else t
    seen: dict[str, dict[str, Any]] = {}
    choose = autotune.choose

    def recording(adapter: str, call: Any, time_variant: Any) -> Any:
        times: dict[str, float | None] = {}

        def timed(v: Any) -> float | None:
            t = time_variant(v)
            times[v.name] = t
            return t
        pick = choose(adapter, call, timed)
        if times:
            ok = {k: round(1e6 * v, 1)
                  for k, v in sorted(times.items(), key=lambda kv: kv[1] or 1e9) if v}
            seen[call.tune_key] = {"pick": pick.name, "us": dict(list(ok.items())[:12])}
        return pick
    autotune.choose = recording
    autotune.TIME_VARIANTS = True
    arrays = {"wg": weight(f_ffn, FFN, HIDDEN, 1), "wu": weight(f_ffn, FFN, HIDDEN, 2),
              "wd": weight(f_down, HIDDEN, FFN, 3), "wh": weight(f_head, VOCAB, HIDDEN, 4),
              "wo": weight(f_ffn, HIDDEN, HIDDEN, 5),
              "g1": np.ones(HIDDEN, np.float32), "g2": np.ones(HIDDEN, np.float32)}
    out: dict[str, Any] = {"formats": [f_ffn, f_down, f_head], "x16": x16, "int8": int8}
    for m in (1, 8):
        g = wr.Graph()
        x = g.input("x", (m, HIDDEN))
        p = {n_: g.param(n_, a.shape, a.dtype) for n_, a in arrays.items()}
        h = xin(nn.rms_norm(x, p["g1"], 1e-5))
        f = (nn.qlinear(h, p["wg"], f_ffn, FFN, HIDDEN).silu() *
             nn.qlinear(h, p["wu"], f_ffn, FFN, HIDDEN))
        y = x + nn.qlinear(xin(f), p["wd"], f_down, HIDDEN, FFN)
        if int8:
            y = y + nn.qlinear(y * 0.5, p["wo"], f_ffn, HIDDEN, HIDDEN)
        logits = nn.qlinear(xin(nn.rms_norm(y, p["g2"], 1e-5)), p["wh"], f_head, VOCAB,
                            HIDDEN)
        exe = wr.compile(g, outputs=[logits])
        exe.set_params(arrays)
        seen.clear()
        feeds = {"x": np.random.default_rng(0).standard_normal((m, HIDDEN)).astype(np.float32)}
        exe.run(feeds)
        prof = exe.profile(feeds, repeats=5)
        out[f"m{m}"] = {"calls": dict(seen), "gpu_ms": prof.total_ms,
                        "by_kernel": {k: round(v, 4) for k, v in prof.by_kernel().items()}}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
