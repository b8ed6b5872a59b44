"""Per-kernel GPU time of a compiled MiniLM run with `Executable.profile` (timestamp queries
where the adapter has them, host-timed dispatches otherwise), as JSON.

    python bench/probes/profile_plan.py [--model DIR] [--batch 1] [--seq 128]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from webrlx.models import minilm  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=None)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128)
    a = p.parse_args()
    enc = minilm.load(a.model)
    rows = [[101] + [2000 + i for i in range(a.seq - 2)] + [102] for _ in range(a.batch)]
    prof = enc.executable.profile(enc.feeds(rows), repeats=3)
    print(prof, file=sys.stderr)
    print(json.dumps({"device": prof.device, "source": prof.source,
                      "gpu_sum_ms": round(prof.total_ms, 4),
                      "per_kernel_ms": {k: round(v, 4) for k, v in prof.by_kernel().items()}},
                     indent=1))


if __name__ == "__main__":
    main()
