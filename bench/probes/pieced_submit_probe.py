"""Does submitting a run in pieces (js_webgpu / wgpu_native.SUBMIT_FIRST: the first F
dispatches as their own command buffer, then 2F, 4F, ...) shorten a single run's wall time,
where the host encodes ~3-10 us a dispatch before the GPU has anything (under Dawn,
natively)? Per round, for each F (0: one command buffer): MiniLM 1x128 run by run with its
output read back each time (the latency a page sees), MiniLM runs back to back (bench's
throughput figure), and with --model a GGUF prompt's time to its first token (the prefill and
one sampled token) and (--decode N) its decode tokens/s. Only a submit that finds the GPU idle
goes out in pieces. Modes alternate inside one process. Prints JSON.

    python -m webrlx dawn --dawn-flag enable-dawn-features=allow_unsafe_apis,\\
        vulkan_enable_f16_on_nvidia -- python bench/probes/pieced_submit_probe.py \\
        [--model FILE.gguf --prefill 128] [--firsts 0,16,32] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

from webrlx.backends import auto, js_webgpu
from webrlx.cli import clocks
from webrlx.cli.bench import _submit_and_sync
from webrlx.models import minilm


def minilm_times(enc: Any, feeds: dict[str, np.ndarray], runs: int, batch: int
                 ) -> dict[str, float]:
    exe = enc.executable
    lat = []
    for _ in range(runs):
        t = time.perf_counter()
        exe.run(feeds)
        lat.append(time.perf_counter() - t)
    submit, sync, _ = _submit_and_sync(exe, feeds)    # bench's own timing pair
    t = time.perf_counter()
    for _ in range(batch):
        submit()
    sync()
    back = (time.perf_counter() - t) / batch
    return {"run_read_ms": round(1e3 * statistics.median(lat), 4),
            "back_to_back_ms": round(1e3 * back, 4),
            "dispatches": len(exe.last_plan.dispatches)}


class Phases:
    """Host time inside the backend's submit and read_buffer calls (wrapped), per phase."""

    def __init__(self, backend: Any) -> None:
        self.t = {"submit": 0.0, "read": 0.0}
        for name, key in (("submit", "submit"), ("read_buffer", "read")):
            inner = getattr(backend, name)

            def timed(*a: Any, _inner: Any = inner, _key: str = key, **kw: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return _inner(*a, **kw)
                finally:
                    self.t[_key] += time.perf_counter() - t0
            setattr(backend, name, timed)

    def take(self) -> dict[str, float]:
        out, self.t = self.t, {k: 0.0 for k in self.t}
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a GGUF file: its prompt's first token")
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--firsts", default="0,16,32")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=60, help="MiniLM runs read back, a median")
    ap.add_argument("--batch", type=int, default=200, help="MiniLM runs back to back")
    ap.add_argument("--phases", action="store_true", help="with --model: the host's ms inside "
                    "backend.submit and backend.read_buffer of each first-token run")
    ap.add_argument("--decode", type=int, default=0, help="with --model: tokens/s of a decode "
                    "of this many tokens (read-ahead: most steps find the GPU busy)")
    args = ap.parse_args()
    firsts = [int(v) for v in args.firsts.split(",")]
    dev = auto.device()
    if dev.info.backend == "navigator.gpu":
        mod: Any = js_webgpu
    else:                                   # natively: wgpu_native.SUBMIT_FIRST
        from webrlx.backends import wgpu_native as mod
    enc = minilm.load(device=dev)
    rng = np.random.default_rng(0)
    feeds = enc.feeds([[101] + list(rng.integers(1000, 29000, 126)) + [102]])
    lm = ids = None
    if args.model:
        from webrlx.models import llm
        lm = llm.load(args.model, device=dev, max_context=args.prefill + 64)
        ids = [int(t) for t in rng.integers(0, 256, args.prefill)]
        lm.generate_ids(ids, 1, ignore_eos=True)
    enc.executable.run(feeds)
    phases = Phases(dev) if args.phases else None
    rounds: list[dict[str, Any]] = []
    for _ in range(args.rounds):
        for f in firsts:
            mod.SUBMIT_FIRST = f
            clocks.hold_clocks(lambda: enc.executable.run(feeds), lambda: None)
            row: dict[str, Any] = {"first": f, **minilm_times(enc, feeds, args.runs, args.batch)}
            if lm is not None:
                walls, toks, split = [], [], []
                for _ in range(5):
                    if phases is not None:
                        phases.take()
                    toks = lm.generate_ids(ids, 1, ignore_eos=True)
                    walls.append(1e3 * lm.stats.first_token_s)
                    if phases is not None:
                        split.append({k: round(1e3 * v, 3) for k, v in phases.take().items()})
                if split:
                    row["first_token_host_ms"] = split
                row["first_token_ms"] = round(min(walls), 3)
                row["first_token_ms_median"] = round(statistics.median(walls), 3)
                row["token"] = int(toks[-1])
                if args.decode:
                    toks = lm.generate_ids(ids[:11], args.decode, ignore_eos=True)
                    row["decode_tok_s"] = round(lm.stats.tokens_per_s, 1)
                    row["decode_last_tokens"] = [int(t) for t in toks[-4:]]
            rounds.append(row)
            print(json.dumps(row), flush=True)
    summary = {str(f): {k: statistics.median(r[k] for r in rounds if r["first"] == f)
                        for k in rounds[0]
                        if k not in ("first", "token", "dispatches", "decode_last_tokens",
                                     "first_token_host_ms")}
               for f in firsts}
    print(json.dumps({"adapter": dev.info.name, "backend": dev.info.backend,
                      "model": args.model, "prefill": args.prefill, "rounds": rounds,
                      "median": summary}))


if __name__ == "__main__":
    main()
