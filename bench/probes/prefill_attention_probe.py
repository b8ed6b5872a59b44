"""Probe: cached_attention of a prefill (SmolLM2's heads: 9 query / 3 kv heads, head dim 64)
alone, GPU time per kernel (timestamp queries) under the lowering's knobs, to pick them.
Prints JSON. Usage: python bench/probes/prefill_attention_probe.py [S ...]

Knobs (webrlx/compiler/lower_decoder.py): PREFILL_KERNEL (attn_flash or attn_prefill),
WORKGROUP_TARGET (how many key chunks nsplit cuts, merged by attn_combine), PREFILL_PAD
(attn_prefill's K/V tile rows padded)."""
from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.compiler import lower_decoder  # noqa: E402


def run(s: int, t: int) -> dict:
    rng = np.random.default_rng(0)
    g = wr.Graph()
    q = g.input("q", (1, s, 9, 64))
    kc = g.input("kc", (1, 3, t, 64))
    vc = g.input("vc", (1, 3, t, 64))
    pos = g.input("pos", (1,), "int32")
    exe = wr.compile(g, outputs=[wr.nn.cached_attention(q, kc, vc, pos)])
    feeds = {"q": rng.standard_normal((1, s, 9, 64), np.float32),
             "kc": rng.standard_normal((1, 3, t, 64), np.float32),
             "vc": rng.standard_normal((1, 3, t, 64), np.float32),
             "pos": np.zeros(1, np.int32)}
    exe.run(feeds)
    prof = exe.profile(feeds, repeats=5)
    return {"gpu_us": round(prof.total_ms * 1e3, 1),
            "kernels": {k: round(v * 1e3, 1) for k, v in prof.by_kernel().items()},
            "grids": [str(r["grid"]) for r in prof.rows]}


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [128, 512]
    out = {"device": wr.device().info.name, "cases": []}
    base = (lower_decoder.WORKGROUP_TARGET, lower_decoder.PREFILL_PAD,
            lower_decoder.PREFILL_KERNEL)
    for s in sizes:
        for kern, wt, pad in itertools.product(("flash", "prefill"), (1, 64, 256, 1024), (0, 1)):
            if (kern == "flash" and pad == 0) or (kern == "prefill" and wt < 256):
                continue
            (lower_decoder.WORKGROUP_TARGET, lower_decoder.PREFILL_PAD,
             lower_decoder.PREFILL_KERNEL) = wt, pad, kern
            row = {"S": s, "kernel": kern, "wg_target": wt, "pad": pad, **run(s, 2048)}
            print(json.dumps(row), file=sys.stderr)
            out["cases"].append(row)
    (lower_decoder.WORKGROUP_TARGET, lower_decoder.PREFILL_PAD,
     lower_decoder.PREFILL_KERNEL) = base
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
