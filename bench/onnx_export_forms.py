"""MiniLM through webrlx.onnx in its two torch exports beside the hand-built encoder, runs
interleaved in one process: natively, or under the Dawn runner (the browser's code path).

    python bench/onnx_export_forms.py [--shapes 1x128] [--repeats 3] [--no-tune]
    python -m webrlx dawn -- python bench/onnx_export_forms.py --build $PWD/build --repeats 3

The exports: `sdpa` = build/minilm.onnx (`python -m webrlx bench --browser`'s export:
transformers' default scaled_dot_product_attention, weights as Constant nodes, as torch.onnx
writes a module called from a closure); `eager` = build/onnx/minilm.onnx
(tests/onnx/export_minilm.py: eager attention, weights as initializers). A run is inputs from
the host -> pooled, L2-normalized embedding on the host (webrlx.onnx: session.run_async, pooled
in numpy; hand-built: executable.run_async, pooled on the device), as bench --browser's runners
do. first = a shape's first run; then one untimed run; then `repeats` rounds, each timing
hand, sdpa and eager once (so a shared machine's load falls on all alike); warm = median.
Also per side: dispatches per run, attention ops, and the min cosine against the hand-built
embedding. --no-tune keeps the autotuner off natively, as it is in the browser.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))             # the checkout's webrlx before any installed copy
MOUNT = "/home/pyodide/onnx-forms"        # build/, mounted inside Pyodide
EXPORTS = {"sdpa": "minilm.onnx", "eager": "onnx/minilm.onnx"}     # under build/


def build_dir(host: Path) -> Path:
    """The host's build/, or (under the Dawn runner, given as an absolute host path) that
    folder mounted through NODEFS inside Pyodide."""
    if sys.platform != "emscripten":
        return host
    import js
    import pyodide_js
    from pyodide.ffi import to_js
    node_fs = getattr(js.process, "getBuiltinModule", None)
    real = node_fs("fs").realpathSync(str(host)) if node_fs else str(host)
    fs = pyodide_js.FS
    fs.mkdirTree(MOUNT)
    fs.mount(fs.filesystems.NODEFS, to_js({"root": real}, dict_converter=js.Object.fromEntries),
             MOUNT)
    return Path(MOUNT)


def token_ids(batch: int, seq: int) -> list[list[int]]:
    """bench --browser's ids: [CLS] + rng words + [SEP], rng = default_rng(0) per case."""
    rng = np.random.default_rng(0)
    return [[101] + [int(v) for v in rng.integers(1000, 29000, seq - 2)] + [102]
            for _ in range(batch)]


def pooled(hidden: np.ndarray) -> np.ndarray:
    """Mean over the tokens (mask all ones), then L2 norm per row."""
    mean = np.asarray(hidden, np.float64).mean(axis=1)
    return mean / np.linalg.norm(mean, axis=-1, keepdims=True)


def min_cosine(a: Any, b: Any) -> float:
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(((x * y).sum(-1) / np.linalg.norm(x, axis=-1) / np.linalg.norm(y, axis=-1))
                 .min())


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import webrlx as wr
    from webrlx.models import minilm
    from webrlx.onnx import InferenceSession
    from webrlx.runtime import autotune
    if args.no_tune:
        autotune.enable(False)
    device = await wr.device_async()
    root = build_dir(Path(args.build))
    t = time.perf_counter()
    enc = minilm.load(device=device)
    load_s = {"hand": time.perf_counter() - t}
    sessions = {}
    for side, rel in EXPORTS.items():
        t = time.perf_counter()
        sessions[side] = InferenceSession(str(root / rel), device=device)
        load_s[side] = time.perf_counter() - t
    cases: dict[str, Any] = {}
    for batch, seq in ([int(v) for v in s.split("x")] for s in args.shapes.split(",")):
        rows = token_ids(batch, seq)
        ids = np.asarray(rows, np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                 "token_type_ids": np.zeros_like(ids)}
        hand_feeds = enc.feeds(rows)

        async def hand() -> Any:
            return (await enc.executable.run_async(hand_feeds))[0]

        def onnx_side(s: Any) -> Any:
            async def run() -> Any:
                return pooled((await s.run_async(None, feeds))[0])
            return run
        runs = {"hand": hand, **{side: onnx_side(s) for side, s in sessions.items()}}
        case: dict[str, Any] = {side: {} for side in runs}
        emb = {}
        for side, run in runs.items():
            t = time.perf_counter()
            emb[side] = await run()
            case[side]["first_ms"] = (time.perf_counter() - t) * 1e3
            await run()
        warm: dict[str, list[float]] = {side: [] for side in runs}
        for _ in range(args.repeats):
            for side, run in runs.items():
                t = time.perf_counter()
                await run()
                warm[side].append((time.perf_counter() - t) * 1e3)
        for side, r in case.items():
            exe = enc.executable if side == "hand" else sessions[side].executable
            r.update(warm_ms=statistics.median(warm[side]), warm_all_ms=warm[side],
                     dispatches_per_run=len(exe.last_plan.dispatches),
                     attention_ops=sum(n.op == "attention" for n in exe.graph.nodes),
                     cosine_vs_hand=min_cosine(emb[side], emb["hand"]))
        case["ratios"] = {f"{side}_over_hand_warm": case[side]["warm_ms"] / case["hand"]["warm_ms"]
                          for side in EXPORTS}
        cases[f"{batch}x{seq}"] = case
    info = device.info
    return {"platform": sys.platform, "adapter": info.name, "backend": info.backend,
            "autotune": autotune.TIME_VARIANTS, "repeats": args.repeats, "load_s": load_s,
            "cases": cases}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="1x128")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-tune", action="store_true")
    ap.add_argument("--build", default=str(ROOT / "build"),
                    help="the checkout's build/ (an absolute host path under the Dawn runner)")
    args = ap.parse_args()
    if sys.platform == "emscripten":       # the Dawn runner: runpy, sync; JSPI waits
        from pyodide.ffi import run_sync
        out = run_sync(main_async(args))
    else:
        out = asyncio.run(main_async(args))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
