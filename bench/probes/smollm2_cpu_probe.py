"""Probe: SmolLM2 on a CPU adapter (lavapipe; SwiftShader with
VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json) under one quantized-GEMV shape,
autotuner off: the prefill of 32 tokens and the decode ms per step (best of 3). Usage:
python bench/probes/smollm2_cpu_probe.py TPRxRPT (e.g. 4x1, the old default, or 1x8, the new
one)."""
from __future__ import annotations

import sys
import time

import numpy as np

from webrlx.compiler import lower_quant
from webrlx.models import smollm2
from webrlx.runtime import autotune


def main() -> None:
    autotune.TIME_VARIANTS = False
    tpr, rpt = (int(a) for a in sys.argv[1].split("x"))
    lower_quant.gemv_shape = lambda n, k, cpu=False: (tpr, rpt, 1)
    lm = smollm2.load(capacity=256)
    ids = [int(i) for i in np.random.default_rng(0).integers(100, 40000, 32)]
    lm.generate_ids(ids, 2)
    best_p = best_d = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        lm.generate_ids(ids, 1)
        p = time.perf_counter() - t
        t = time.perf_counter()
        lm.generate_ids(ids, 17)
        best_p, best_d = min(best_p, p), min(best_d, (time.perf_counter() - t - p) / 16)
    print(f"{lm.device.info.name} {sys.argv[1]}: prefill of 32 {best_p * 1e3:.0f} ms, "
          f"decode {best_d * 1e3:.0f} ms/step")


if __name__ == "__main__":
    main()
