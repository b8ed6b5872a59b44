"""The peer of the subgroup-matrix probes: torch f16 matmul (cuBLAS, tensor cores) at n^3 on
the same GPU machine, timed like them (a batch of dispatches ended by a sync, median of 5,
after 1 s of them: the GPU's clock up); prints JSON.
    python3 bench/probes/torch_f16_matmul.py [--n 4096 2048]"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from webrlx.cli.clocks import hold_clocks  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, nargs="+", default=[4096, 2048])
    p.add_argument("--reps", type=int, default=20)
    a = p.parse_args()
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "sizes": {}}
    for n in a.n:
        x = torch.randn(n, n, device="cuda", dtype=torch.float16)
        y = torch.randn(n, n, device="cuda", dtype=torch.float16)
        hold_clocks(lambda: x @ y, torch.cuda.synchronize)    # the GPU's clock up first
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(a.reps):
                x @ y
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t) / a.reps)
        s = statistics.median(ts)
        out["sizes"][str(n)] = {"ms": s * 1e3, "tflops": 2 * n ** 3 / s / 1e12}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
