"""MiniLM end to end with and without attention_flash on short sequences (A/B in one run):
lower_attention.FLASH_MAX_KEYS at 0 (the two-matmul form) and at its default, alternated
`--rounds` times, each a fresh encoder through the bench's minilm cases (sentence-transformers
on torch CUDA beside it where present), plus the largest difference between the two paths'
embeddings of the same sentences. Prints JSON.
    python bench/probes/flash_minilm_ab.py [--rounds 2]"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from webrlx.cli.bench import minilm_cases  # noqa: E402
from webrlx.compiler import lower_attention  # noqa: E402
from webrlx.models import minilm  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    default = lower_attention.FLASH_MAX_KEYS
    out: dict = {"runs": []}
    rng = np.random.default_rng(1)
    ids = [[101] + list(rng.integers(1000, 29000, 126)) + [102] for _ in range(8)]
    emb = {}
    for _ in range(a.rounds):
        for keys in (0, default):
            lower_attention.FLASH_MAX_KEYS = keys
            for row in minilm_cases(10, 5, [(1, 128), (32, 128)]):
                row["flash_max_keys"] = keys
                out["runs"].append(row)
                print(keys, row["case"], round(row.get("webrlx_ms", 0), 4),
                      round(row.get("ref_ms", 0), 4), round(row.get("ratio_vs_ref", 0), 3),
                      file=sys.stderr, flush=True)
            enc = minilm.load()
            emb[keys] = enc.executable.run(enc.feeds(ids))[0]
    out["max_abs_diff_embeddings"] = float(np.abs(emb[0] - emb[default]).max())
    lower_attention.FLASH_MAX_KEYS = default
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
