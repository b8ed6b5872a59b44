"""webrlx on one WebGPU engine, to set engines side by side on one machine (wgpu-native natively,
Dawn in Pyodide through `python -m webrlx dawn`): MiniLM embeddings of fixed sentences and warm
1x128 / 32x128 times, SmolLM2 greedy tokens, 128-token prefill and decode tokens/s. Prints JSON.

    python bench/engines.py [--only minilm,smollm2] [--new 256] > native.json
    python -m webrlx dawn -- python bench/engines.py > dawn.json
    python bench/engines.py --compare native.json dawn.json
    python -m webrlx dawn -- python bench/engines.py --only minilm --dtype float16

Method: MiniLM as bench/minilm.py (time_executable: runs on inputs already on the device,
synchronized by a 4-byte readback, median of batches); SmolLM2 as bench/smollm2.py's webrlx side
(greedy, EOS ignored, 11-token prompt). --compare gives the cosine of each embedding pair, the
first differing token, and Dawn over native time ratios (> 1: Dawn is slower).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# held out from the tests' fixtures: sentences no test was written against
SENTENCES = ["Rain fell on the quiet harbour all night.",
             "The committee postponed its decision until the spring meeting.",
             "A small robot sorted the red blocks from the blue ones.",
             "Which river flows through the capital of Hungary?"]


def minilm_side(iters: int, repeats: int, dtype: str = "float32") -> dict[str, Any]:
    from minilm import synthetic_feeds

    from webrlx.cli.bench import time_executable
    from webrlx.models import minilm
    enc = minilm.load(dtype=dtype)
    emb = enc.encode(SENTENCES)
    times = {f"{b}x{s}": 1e3 * time_executable(enc.executable, synthetic_feeds(enc, b, s),
                                                 iters, repeats)
             for b, s in ((1, 128), (32, 128))}
    return {"adapter": enc.device.info.name, "backend": enc.device.info.backend,
            "dtype": dtype, "warm_ms": times, "embeddings": emb.tolist()}


def smollm2_side(new: int) -> dict[str, Any]:
    from smollm2 import PROMPT, bench_webrlx

    from webrlx.models import smollm2
    from webrlx.models.assets import smollm2_gguf
    path = smollm2_gguf()
    tok = smollm2.load(path, device="reference", capacity=16).tokenizer
    prompt = tok.encode(PROMPT)
    prefill = tok.encode("The history of computing is a story of layers. " * 20)[:128]
    out = bench_webrlx(path, prompt, prefill, new, None)
    out.pop("decode_step_top_kernels_ms", None)
    return out


def compare(native: dict[str, Any], dawn: dict[str, Any]) -> dict[str, Any]:
    """Both runs beside each other: cosines, token equality, Dawn / native time ratios."""
    out: dict[str, Any] = {"native": native, "dawn": dawn}
    if "minilm" in native and "minilm" in dawn:
        a, b = (np.array(r["minilm"].pop("embeddings")) for r in (native, dawn))
        cos = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
        out["minilm"] = {"sentences": len(a), "min_cosine": float(cos.min()),
                         "max_abs_diff": float(np.abs(a - b).max()),
                         "dawn_over_native_ms": {k: v / native["minilm"]["warm_ms"][k] for k, v
                                                 in dawn["minilm"]["warm_ms"].items()}}
    if "smollm2" in native and "smollm2" in dawn:
        n, d = native["smollm2"], dawn["smollm2"]
        same = next((i for i, (x, y) in enumerate(zip(n["tokens"], d["tokens"], strict=False))
                     if x != y), min(len(n["tokens"]), len(d["tokens"])))
        out["smollm2"] = {"tokens": len(n["tokens"]), "greedy_tokens_equal": same,
                          "decode_dawn_over_native": d["decode_tok_s"] / n["decode_tok_s"],
                          "prefill_dawn_over_native": d["prefill_ms"] / n["prefill_ms"]}
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--only", default="minilm,smollm2")
    p.add_argument("--new", type=int, default=256, help="SmolLM2 tokens to generate")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--compare", nargs=2, metavar=("NATIVE", "DAWN"))
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"),
                   help="MiniLM's weights and activations (minilm.load's dtype)")
    p.add_argument("--tune", help="a tools/make_tune_tables.py --here JSON: installed as this "
                   "adapter's own autotune table first (A/B of a table before it ships)")
    a = p.parse_args()
    if a.compare:
        native, dawn = (json.loads(Path(f).read_text()) for f in a.compare)
        print(json.dumps(compare(native, dawn), indent=1))
        return
    out: dict[str, Any] = {"method": __doc__.split("Method: ")[1].strip()}
    if a.tune:
        import webrlx as wr
        from webrlx.runtime import autotune
        out["tune"] = {"file": a.tune,
                       "entries": autotune.install_run(a.tune, wr.device().info.tune_name)}
    only = a.only.split(",")
    if "minilm" in only:
        out["minilm"] = minilm_side(a.iters, a.repeats, a.dtype)
    if "smollm2" in only:
        out["smollm2"] = smollm2_side(a.new)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
