"""Probe: SmolLM2 greedy decode tokens/s by run length (64, 128, 256 new tokens after an
11-token prompt, two runs each), and under the browser backend (js_webgpu) also with one FFI
call per pass method (ONE_CALL_ENCODE off): where a decode run's time goes as it grows.
Natively, or under Dawn: `python -m webrlx dawn -- python bench/probes/decode_lengths_probe.py`.
Prints one JSON line."""
from __future__ import annotations

import json
import time

from webrlx.backends import js_webgpu
from webrlx.models import smollm2


def runs(lm, prompt: list[int]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for new in (64, 128, 256):
        for _ in range(2):
            t = time.perf_counter()
            lm.generate_ids(prompt, new, ignore_eos=True)
            wall = time.perf_counter() - t
            out.setdefault(str(new), []).append(
                {"tok_s": round(lm.stats.tokens_per_s, 1), "wall_s": round(wall, 4),
                 "readbacks": lm.stats.readbacks})
    return out


def main() -> None:
    lm = smollm2.load(capacity=512)
    prompt = lm.tokenizer.encode("Count by sevens: 7, 14, 21,")
    lm.generate_ids(prompt, 4)
    res = {"adapter": lm.device.info.name, "backend": lm.device.info.backend,
           "one_call": runs(lm, prompt)}
    if lm.device.info.backend == "navigator.gpu":
        js_webgpu.ONE_CALL_ENCODE = False
        res["per_call"] = runs(lm, prompt)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
