"""Probe: cached_attention of a prefill (a prompt of S rows at pos 0) alone, GPU time per kernel
(timestamp queries; host-timed dispatches where the device has none), to pick the lowering's
knobs. Prints JSON.

Usage:
  python bench/probes/prefill_attention_probe.py [S ...]
      SmolLM2's heads (9 query / 3 kv, head dim 64) under the knobs of
      webrlx/compiler/lower_decoder.py: PREFILL_KERNEL (attn_flash or attn_prefill),
      WORKGROUP_TARGET (how many key chunks nsplit cuts, merged by attn_combine) and
      PREFILL_PAD (attn_prefill's K/V tile rows padded). S 128 and 512 by default.
  python bench/probes/prefill_attention_probe.py --d 128 [--s 128 --s 512 ...]
      each kernel (attn_flash, attn_prefill and attn_decode, the path head dims past 64 took
      before) at the lowering's knobs, on a real model's heads at that head dim (LAYOUTS, or
      --heads / --kv-heads). S 128, 512 and 2048 by default (--s 64 for a CPU adapter)."""
from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import warm_executable  # noqa: E402
from webrlx.compiler import lower_decoder  # noqa: E402

# head dim -> (query heads, kv heads) of a model with it
LAYOUTS = {64: (9, 3),         # SmolLM2-135M
           96: (32, 32),       # Phi-3-mini
           128: (32, 8),       # Llama-3-8B, Qwen3-8B, Mistral-7B
           256: (16, 8)}       # Gemma-2-9B
KNOBS = ("WORKGROUP_TARGET", "PREFILL_PAD", "PREFILL_KERNEL")


def run(s: int, t: int, h: int = 9, hkv: int = 3, d: int = 64) -> dict:
    """Compile and profile one cached_attention of s rows over a cache of t keys."""
    rng = np.random.default_rng(0)
    g = wr.Graph()
    q = g.input("q", (1, s, h, d))
    kc = g.input("kc", (1, hkv, t, d))
    vc = g.input("vc", (1, hkv, t, d))
    pos = g.input("pos", (1,), "int32")
    exe = wr.compile(g, outputs=[wr.nn.cached_attention(q, kc, vc, pos)])
    feeds = {"q": rng.standard_normal((1, s, h, d), np.float32),
             "kc": rng.standard_normal((1, hkv, t, d), np.float32),
             "vc": rng.standard_normal((1, hkv, t, d), np.float32),
             "pos": np.zeros(1, np.int32)}
    warm_executable(exe, feeds)             # (the GPU's clock up: clocks.hold_clocks)
    prof = exe.profile(feeds, repeats=5)
    return {"gpu_us": round(prof.total_ms * 1e3, 1),
            "kernels": {k: round(v * 1e3, 1) for k, v in prof.by_kernel().items()},
            "grids": [str(r["grid"]) for r in prof.rows]}


def sweep(sizes: list[int]) -> list[dict]:
    """SmolLM2's heads under each knob setting worth timing."""
    rows = []
    for s in sizes:
        for kern, wt, pad in itertools.product(("flash", "prefill"), (1, 64, 256, 1024), (0, 1)):
            if (kern == "flash" and pad == 0) or (kern == "prefill" and wt < 256):
                continue
            lower_decoder.WORKGROUP_TARGET, lower_decoder.PREFILL_PAD = wt, pad
            lower_decoder.PREFILL_KERNEL = kern
            rows.append({"S": s, "kernel": kern, "wg_target": wt, "pad": pad, **run(s, 2048)})
            print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def each_kernel(sizes: list[int], d: int, h: int, hkv: int) -> list[dict]:
    """Every cached_attention kernel at the lowering's knobs, at head dim d."""
    rows = []
    for s in sizes:
        for kern in ("flash", "prefill", "decode"):
            lower_decoder.PREFILL_KERNEL = kern
            rows.append({"S": s, "D": d, "heads": h, "kv_heads": hkv, "kernel": kern,
                         **run(s, max(2048, s), h, hkv, d)})
            print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sizes", nargs="*", type=int, help="prompt lengths S")
    ap.add_argument("--s", action="append", type=int, default=[], help="a prompt length S")
    ap.add_argument("--d", type=int, help="head dim: time each kernel (see LAYOUTS)")
    ap.add_argument("--heads", type=int, help="query heads (default: LAYOUTS[d])")
    ap.add_argument("--kv-heads", type=int, help="kv heads (default: LAYOUTS[d])")
    args = ap.parse_args()
    sizes = args.sizes + args.s
    base = {k: getattr(lower_decoder, k) for k in KNOBS}
    out: dict = {"device": wr.device().info.name}
    try:
        if args.d is None:
            out["cases"] = sweep(sizes or [128, 512])
        else:
            h, hkv = LAYOUTS.get(args.d, (32, 8))
            out["cases"] = each_kernel(sizes or [128, 512, 2048], args.d, args.heads or h,
                                       args.kv_heads or hkv)
    finally:
        for k, v in base.items():
            setattr(lower_decoder, k, v)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
