"""Probe: decode and prefill speed of the webrlx on sys.path (for A/B runs of two trees on
one GPU: PYTHONPATH=<tree> python bench/probes/decode_probe.py [MODEL.gguf]): decode tokens/s
over 128 new tokens (best of 3), the prefill of 128 tokens (best of 5), and both plans' GPU
profiles by the variant each kernel ran. SmolLM2 by default. Prints one JSON line."""
from __future__ import annotations

import json
import sys
import time

import numpy as np

from webrlx.models import llm, smollm2


def main() -> None:
    lm = llm.load(sys.argv[1], max_context=512) if len(sys.argv) > 1 else \
        smollm2.load(capacity=512)
    prompt = lm.tokenizer.encode("Count by sevens: 7, 14, 21,")
    prefill = [int(i) for i in np.random.default_rng(0).integers(100, 40000, 128)]
    lm.generate_ids(prefill, 2)
    lm.generate_ids(prompt, 2)
    tok_s = []
    for _ in range(3):
        lm.generate_ids(prompt, 128, ignore_eos=True)
        tok_s.append(lm.stats.tokens_per_s)
    pre = []
    for _ in range(5):
        t = time.perf_counter()
        lm.generate_ids(prefill, 1)
        pre.append(1e3 * (time.perf_counter() - t))
    fp = {"fparams": np.array([0, 1, 1, 0], np.float32), "iparams": np.zeros(2, np.int32)}
    dec = lm.executable.profile({"ids": np.array([[prompt[-1]]], np.int32),
                                 "pos": np.array([60], np.int32),
                                 "last": np.zeros(1, np.int32), **fp}, repeats=5)
    pf = lm.executable.profile({"ids": np.array([prefill], np.int32),
                                "pos": np.zeros(1, np.int32),
                                "last": np.array([127], np.int32), **fp}, repeats=3)
    print(json.dumps({"module": smollm2.__file__, "decode_tok_s": max(tok_s),
                      "prefill_ms": min(pre), "decode_gpu_ms": dec.total_ms,
                      "prefill_gpu_ms": pf.total_ms,
                      "decode_kernels": {k: round(v, 4) for k, v in dec.by_kernel().items()},
                      "prefill_kernels": {k: round(v, 4) for k, v in
                                          list(pf.by_kernel().items())[:8]}}))


if __name__ == "__main__":
    main()
