"""Regenerate webrlx/data/tune_tables.json, the autotuner's shipped table per adapter family.
The browser does not time variants on a page's critical path; it reads this table for
adapters of these families (webrlx/runtime/autotune.py).

- swiftshader, llvmpipe (this box): MiniLM's shapes (batches and lengths a page commonly
  runs), tuned natively on SwiftShader (the ICD Debian's chromium ships: Chromium's own
  software WebGPU) and on llvmpipe, each with an empty tune cache:

      python tools/make_tune_tables.py            # a few minutes on a 2-core machine

- nvidia: tuned under Dawn (Chrome's WebGPU, `python -m webrlx dawn`) on an NVIDIA GPU, the
  browser's code path: MiniLM's shapes and SmolLM2's (prompts of 16 to 128 tokens, decode
  steps, an 8-sequence batch). Timestamps unquantized (Dawn's timestamp_quantization off), so
  the tuner times on the GPU clock. On the GPU machine (bench/device_dawn.sh `tune`):

      python -m webrlx dawn --dawn-flag enable-dawn-features=allow_unsafe_apis,\\
          vulkan_enable_f16_on_nvidia --dawn-flag disable-dawn-features=timestamp_quantization \\
          -- python tools/make_tune_tables.py --here > tune-nvidia.json
      python tools/make_tune_tables.py --merge nvidia tune-nvidia.json       # back here

  MiniLM and SmolLM2 come from $WEBRLX_MINILM_DIR / $WEBRLX_SMOLLM2_DIR (or their packages).
  Any other GGUF language model's shapes: `--models gguf --gguf FILE` (prompts of --prompts
  tokens, decode steps, an 8-sequence batch), e.g. the Llama-3.2-1B layout that
  bench/llm_1b.py makes (bench/device_dawn.sh `tune1b`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "webrlx" / "data" / "tune_tables.json"
ICDS = {"swiftshader": "/usr/lib/chromium/vk_swiftshader_icd.json", "llvmpipe": None}
SHAPES = [(1, 16), (1, 32), (1, 128), (2, 48), (3, 16), (4, 32), (8, 128)]   # (batch, length)
LLM_PROMPTS = (16, 48, 128)          # SmolLM2 prompt lengths (tokens) tuned for smollm2
LLM_BATCH = 8                        # sequences of the batched-decode shapes tuned for smollm2


def tune_llm(lm: object, prompts: tuple[int, ...], name: str) -> None:
    """A language model's shapes: prompts of each length with 4 decode steps, then the
    8-sequence batch (lm: a webrlx.models.llm.LanguageModel)."""
    import numpy as np
    rng = np.random.default_rng(0)
    vocab = min(40000, lm.config.vocab)                   # type: ignore[attr-defined]
    for n in prompts:
        print(f"tune: {name} prompt {n}, 4 decode steps", file=sys.stderr)
        lm.generate_ids([int(i) for i in rng.integers(100, vocab, n)], 4,  # type: ignore
                        ignore_eos=True)
    print(f"tune: {name} {LLM_BATCH} sequences", file=sys.stderr)
    lm.generate_batch([f"Question {i}: what is {i} + {i}?" for i in range(LLM_BATCH)], 4,  # type: ignore
                      ignore_eos=True)


def tune_here(models: list[str], gguf: str | None = None,
              prompts: tuple[int, ...] = LLM_PROMPTS,
              shapes: list[tuple[int, int]] | None = None) -> dict:
    """Tune in this process (timing on, whatever the platform) the shapes of the models named
    (minilm, minilm16: its float16 form, at `shapes` (batch, length), default SHAPES; smollm2;
    gguf: the file `gguf`); return {adapter, table}."""
    import numpy as np

    import webrlx as wr
    from webrlx.runtime import autotune
    autotune.enable(True)
    rng = np.random.default_rng(0)
    for name in ("minilm", "minilm16"):
        if name not in models:
            continue
        from webrlx.models import minilm
        enc = minilm.load(dtype="float16" if name == "minilm16" else "float32")
        for b, s in shapes or SHAPES:
            print(f"tune: {name} {b}x{s}", file=sys.stderr)
            enc.executable.run(enc.feeds([[101] + list(rng.integers(1000, 29000, s - 2)) +
                                          [102] for _ in range(b)]))
    if "smollm2" in models:
        from webrlx.models import smollm2
        tune_llm(smollm2.load(capacity=512), LLM_PROMPTS, "SmolLM2")
    if "gguf" in models:
        if not gguf:
            raise SystemExit("--models gguf needs --gguf FILE")
        from webrlx.backends import auto
        from webrlx.models import llm
        # the device first: in Pyodide a load without one cuts weights at WebGPU's default
        # 128 MiB binding, not at the adapter's
        tune_llm(llm.load(gguf, device=auto.device(), max_context=max(prompts) + 64),
                 prompts, Path(gguf).name)
    info = wr.device().info
    return {"adapter": info.name, "table": autotune.table(info.tune_name)}


def merge(family: str, path: str) -> None:
    """Add a --here run's table to the family's in the shipped file (a shape tuned again takes
    the new pick; runs of different models add up)."""
    from webrlx.runtime.autotune import read_run
    got = read_run(path)
    if family not in got["adapter"].lower():
        raise SystemExit(f"--merge {family}: the run's adapter {got['adapter']!r} is not of "
                         f"that family")
    tables = json.loads(OUT.read_text()) if OUT.exists() else {}
    tables[family] = dict(sorted({**tables.get(family, {}), **got["table"]}.items()))
    OUT.write_text(json.dumps(tables, indent=1) + "\n")
    print(f"wrote {OUT}: {family} from {got['adapter']}, {len(got['table'])} shapes added to "
          f"{len(tables[family])}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--here", action="store_true",
                    help="tune in this process (e.g. under `python -m webrlx dawn`) and print "
                         "the table as JSON")
    ap.add_argument("--models", default="minilm,smollm2",
                    help="--here: the models whose shapes to tune (minilm, minilm16, smollm2, "
                    "gguf)")
    ap.add_argument("--gguf", default=None, help="--models gguf: the GGUF file")
    ap.add_argument("--prompts", default=",".join(map(str, LLM_PROMPTS)),
                    help="--models gguf: prompt lengths to tune (tokens)")
    ap.add_argument("--minilm-shapes", default=None,
                    help="--models minilm/minilm16: BATCHxLENGTH,... to tune (default: "
                    + ",".join(f"{b}x{n}" for b, n in SHAPES) + ")")
    ap.add_argument("--merge", nargs=2, metavar=("FAMILY", "FILE"),
                    help="add a --here run's table to FAMILY's in the shipped file")
    args = ap.parse_args()
    if args.here:
        shapes = [(int(b), int(n)) for b, n in (v.split("x") for v in
                                                args.minilm_shapes.split(","))] \
            if args.minilm_shapes else None
        print(json.dumps(tune_here(args.models.split(","), args.gguf,
                                   tuple(int(v) for v in args.prompts.split(",")), shapes)))
        return
    if args.merge:
        merge(*args.merge)
        return
    tables = json.loads(OUT.read_text()) if OUT.exists() else {}
    for family, icd in ICDS.items():
        with tempfile.TemporaryDirectory() as home:
            env = {**os.environ, "HOME": home, "WEBRLX_AUTOTUNE": "1", "PYTHONPATH": str(ROOT)}
            if icd:
                env["VK_DRIVER_FILES"] = icd
            out = subprocess.run([sys.executable, __file__, "--here", "--models", "minilm"],
                                 env=env, check=True, capture_output=True, text=True).stdout
        got = json.loads(out.strip().splitlines()[-1])
        assert family in got["adapter"].lower(), (family, got["adapter"])
        tables[family] = dict(sorted(got["table"].items()))
        print(f"{family}: {got['adapter']}: {len(got['table'])} shapes", file=sys.stderr)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(tables, indent=1) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
