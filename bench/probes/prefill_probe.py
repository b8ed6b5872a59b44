"""Probe: SmolLM2 prefill of 128 tokens under GEMV_MAX_M (rows up to which qmatmuls run as
fused GEMVs instead of the tiled kernel): wall ms of prefill + first token, and the prefill
plan's GPU profile (top kernels). Prints JSON. Usage: python bench/probes/prefill_probe.py [M
...]"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

from webrlx.compiler import fuse
from webrlx.models import smollm2


def main() -> None:
    results = {}
    for max_m in [int(a) for a in sys.argv[1:]] or [64, 128]:
        fuse.GEMV_MAX_M = max_m
        lm = smollm2.load(capacity=512)
        prefill = [int(i) for i in np.random.default_rng(0).integers(100, 40000, 128)]
        lm.generate_ids(prefill, 2)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            lm.generate_ids(prefill, 1)
            times.append(time.perf_counter() - t)
        prof = lm.executable.profile({"ids": np.array([prefill], np.int32),
                                      "pos": np.zeros(1, np.int32),
                                      "last": np.array([127], np.int32),
                                      "fparams": np.array([0, 1, 1, 0], np.float32),
                                      "iparams": np.zeros(2, np.int32)}, repeats=3)
        results[max_m] = {"prefill_ms": 1e3 * min(times), "gpu_ms": prof.total_ms,
                          "dispatches": len(lm.executable.engine.plan({"s": 128})
                                            .program.calls),
                          "top": dict(list(prof.by_kernel().items())[:8])}
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
