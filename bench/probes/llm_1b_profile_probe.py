"""Where a 1B-class model's time goes: per-kernel GPU time (Executable.profile) of the batched
Engine's decode step at 1 and N live sequences, with the wall time of a steady Engine step
beside it (the gap is the host's), and of the LanguageModel's whole-prompt prefill (with its
wall time to the first token, best of 3). Run it on
the file bench/llm_1b.py makes (`--make-only`), on the GPU machine. Prints JSON.

    python bench/probes/llm_1b_profile_probe.py --model /tmp/llm_1b/llama-1b.Q4_K_M.gguf \
        [--sizes 1,8] [--prefill 512] [--top 14] [--smat off] [--decode 128] [--read-only off]
        [--rpt-rq on] [--dequant-first off] [--dequant-min-m 32] [--int8-prefill on]
(--sizes '': prefill only; --decode N: also lm.generate's greedy decode tokens/s over N new
tokens, best of 3; --read-only off: every storage binding read_write, as before
kernels.read_only_storage, for the A/B)
Each timing follows --warm seconds (webrlx.cli.clocks.WARM_S) of the same work back to back:
the GPU's clock up (an NVIDIA GPU idle for seconds runs short bursts at its floor clock).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from webrlx import kernels  # noqa: E402
from webrlx.backends import auto  # noqa: E402
from webrlx.cli.clocks import WARM_S, hold_clocks  # noqa: E402
from webrlx.compiler import smat  # noqa: E402
from webrlx.models import llm  # noqa: E402
from webrlx.models.engine import Engine  # noqa: E402


def top(prof: Any, n: int) -> dict[str, Any]:
    """A profile's total, dispatch count and its n most expensive kernels (ms)."""
    kernels = prof.by_kernel()
    return {"gpu_ms": round(prof.total_ms, 4), "source": prof.source,
            "dispatches": len(prof.rows),
            "kernels": {k: round(v, 4) for k, v in list(kernels.items())[:n]}}


def engine_step(lm: llm.LanguageModel, live: int, context: int, n: int,
                warm_s: float = 0.0) -> dict[str, Any]:
    """An Engine with `live` sequences decoding: the wall ms of a steady step (median of 24,
    each waited for) and the decode step's kernel profile."""
    eng = Engine(lm, max_sequences=live, max_context=context)
    rng = np.random.default_rng(live)
    for _ in range(live):
        eng.add_request([int(t) for t in rng.integers(0, 256, 11)], max_new_tokens=context - 20,
                        ignore_eos=True)
    for _ in range(4):                      # prefills, then compiled decode steps
        eng.step()
    # the clock up, leaving the sequences room for the 24 timed steps and the profiled one
    room = [context - 20 - 4 - 24 - 8]

    def warm_step() -> None:
        if room[0] > 0:
            room[0] -= 1
            eng.step()
    hold_clocks(warm_step, lambda: eng.executable.read_state("tokens"), warm_s)
    walls = []
    for _ in range(24):
        t = time.perf_counter()
        eng.step()
        eng.executable.read_state("tokens")     # waits for the step
        walls.append(1e3 * (time.perf_counter() - t))
    runs = eng._plan()                      # the next step's decode feeds
    feeds = next(f for kind, (_, f) in runs if kind == "decode")
    prof = eng.executable.profile(feeds, repeats=3)
    return {"sequences": live, "step_wall_ms": round(float(np.median(walls)), 4),
            **top(prof, n)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--sizes", default="1,8")
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--top", type=int, default=14)
    ap.add_argument("--smat", default="on",
                    help="off: no subgroup-matrix (tensor core) kernels (compiler/smat.py); a "
                    "shape's name (matmul_smat_...): that shape for every matmul")
    ap.add_argument("--decode", type=int, default=0)
    ap.add_argument("--read-only", default="on", choices=("on", "off"))
    ap.add_argument("--qsplit", type=int, default=None, help="K pieces of every quantized "
                    "subgroup-matrix matmul (lower_quant.QSMAT_SPLIT; 1: none; default: its rule)")
    ap.add_argument("--rpt-rq", default="off", choices=("on", "off"),
                    help="on: also offer the batched-decode GEMVs 2 weight rows a thread over "
                    "row quads (lower_quant.GEMV_RPT_RQ) to the autotuner")
    ap.add_argument("--dequant-first", default="on", choices=("on", "off"),
                    help="off: tall prefills' quantized matmuls on the tiled kernels, not "
                    "decoded once and run as f32 matmuls (lower_quant.DEQUANT_FIRST)")
    ap.add_argument("--dequant-min-m", type=int, default=None,
                    help="rows from which a big weight is decoded first "
                    "(lower_quant.DEQUANT_MIN_M)")
    ap.add_argument("--int8", default="off", choices=("on", "off"),
                    help="on: prefills on the int8 tensor-core kernels where the adapter has "
                    "them (compiler/smat.INT8, quant/qmatmul_mmq.wgsl)")
    ap.add_argument("--int8-decode", default="off", choices=("on", "off"),
                    help="batched steps' GEMVs on int8 x (compiler/int8_decode.INT8_DECODE)")
    ap.add_argument("--int8-prefill", default="off", choices=("on", "off"),
                    help="prefills' products on int8 dp4a without tensor cores "
                         "(compiler/int8_prefill.INT8_PREFILL)")
    ap.add_argument("--mmq-group", type=int, default=None,
                    help="k a group of the int8 prefill (lower_quant.MMQ_GROUP)")
    ap.add_argument("--logits-out", default=None,
                    help="save the prompt's last logits (one greedy step) as .npy here")
    ap.add_argument("--picks", default=None, help="a `tools/make_tune_tables.py --here` run's "
                    "JSON: its table as this adapter's own (the A/B of a table before it ships)")
    ap.add_argument("--warm", type=float, default=WARM_S,
                    help="seconds of the same work before each timing (0: none)")
    ap.add_argument("--device", default="first", choices=("first", "none"),
                    help="none: llm.load(device=None), as before 6420ee7 (the A/B of a Dawn "
                    "prefill wall that grew from 34.7 to 52.8 ms with the same GPU ms)")
    ap.add_argument("--tune-states", default="gpu", choices=("gpu", "all", "off"),
                    help="which adapters time the calls that bind a KV cache, on stand-ins "
                    "(runtime/plan.TIME_STATE_CALLS; off: never, as before 2026-11-29)")
    a = ap.parse_args()
    from webrlx.runtime import plan as plan_mod
    plan_mod.TIME_STATE_CALLS = a.tune_states
    kernels.READ_ONLY_BINDINGS = a.read_only == "on"
    if a.smat != "on":
        smat.MODE = a.smat
    if a.rpt_rq == "on":
        from webrlx.compiler import lower_quant
        lower_quant.GEMV_RPT_RQ = True
    if a.dequant_first == "off":
        from webrlx.compiler import lower_quant
        lower_quant.DEQUANT_FIRST = False
    if a.dequant_min_m is not None:
        from webrlx.compiler import lower_quant
        lower_quant.DEQUANT_MIN_M = a.dequant_min_m
    if a.int8 == "on":
        smat.INT8 = True
    if a.int8_decode == "on":
        from webrlx.compiler import int8_decode
        int8_decode.INT8_DECODE = True
    if a.int8_prefill == "on":
        from webrlx.compiler import int8_prefill
        int8_prefill.INT8_PREFILL = True
    if a.mmq_group is not None:
        from webrlx.compiler import lower_quant
        lower_quant.MMQ_GROUP = a.mmq_group
    if a.qsplit is not None:
        from webrlx.compiler import lower_quant
        lower_quant.QSMAT_SPLIT = a.qsplit
    context = max(a.prefill, 11 + a.decode) + 64     # (the decode's prompt is 11 ids)
    # the device first: in Pyodide (the Dawn runner) a load without one at hand cuts weights
    # at WebGPU's default 128 MiB binding (llm.param_bytes_limit), not at the adapter's
    if a.picks:
        from webrlx.runtime import autotune
        autotune.install_run(a.picks, auto.device().info.tune_name)
    lm = llm.load(a.model, device=auto.device() if a.device == "first" else None,
                  max_context=context)
    out: dict[str, Any] = {"model": Path(a.model).name, "adapter": str(lm.device.info.name),
                           "smat": a.smat, "smat_available": smat.available(lm.device.info),
                           "read_only": a.read_only, "device_first": a.device,
                           "picks": a.picks, "qsplit": a.qsplit, "rpt_rq": a.rpt_rq,
                           "dequant_first": a.dequant_first, "dequant_min_m": a.dequant_min_m,
                           "int8": a.int8, "mmq_group": a.mmq_group,
                           "int8_prefill": a.int8_prefill,
                           "tune_states": a.tune_states,
                           "int8_available": smat.available_i8(lm.device.info)}
    ids = [int(t) for t in np.random.default_rng(0).integers(0, 256, a.prefill)]
    walls = []
    for i in range(4):                      # the first compiles
        first = lm.generate_ids(ids, 4, ignore_eos=True)[-4:]
        walls.append(1e3 * lm.stats.first_token_s)
        if i == 0:
            hold_clocks(lambda: lm.generate_ids(ids, 1, ignore_eos=True), lambda: None, a.warm)
    if a.logits_out:                        # the prompt's last logits: the A/B's accuracy
        lm.generate_ids(ids, 1, ignore_eos=True)
        np.save(a.logits_out, lm.last_logits.numpy().reshape(-1))
    prof = lm.executable.profile({"ids": np.array([ids], np.int32),
                                  "pos": np.zeros(1, np.int32),
                                  "last": np.array([a.prefill - 1], np.int32),
                                  "fparams": llm.Sampling().fparams(),
                                  "iparams": llm.Sampling().iparams()}, repeats=3)
    out["prefill"] = {"tokens": a.prefill, "wall_ms": round(min(walls[1:]), 3),
                      "greedy_tokens": [int(t) for t in first],
                      **top(prof, a.top)}
    if a.decode:
        rates, short = [], ids[:11]
        for i in range(4):                  # the first compiles the decode step
            if i == 1:
                hold_clocks(lambda: lm.generate_ids(short, 16, ignore_eos=True), lambda: None,
                            a.warm)
            toks = lm.generate_ids(short, a.decode, ignore_eos=True)
            rates.append(lm.stats.tokens_per_s)
        out["decode"] = {"new_tokens": a.decode, "tok_s": round(max(rates[1:]), 1),
                         "greedy_tokens": [int(t) for t in toks[-8:]]}
    out["warm_s"] = a.warm
    out["engine"] = [engine_step(lm, int(s), context, a.top, a.warm)
                     for s in a.sizes.split(",") if s]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
