"""MiniLM's ONNX export (tests/onnx/export_minilm.py) through webrlx.onnx beside the hand-built
webrlx.models.minilm and onnxruntime's CPU EP, in one run; prints JSON with the ratios.

    python bench/onnx_minilm.py [--shapes 1x128,32x128] [--iters 3] [--repeats 5] [--out F]

Method: both webrlx sides time a compiled executable's run on inputs already on the device,
synchronized (webrlx.cli.bench.time_executable), alternating hand-built and ONNX batches
`repeats` times so a shared machine's load falls on both alike (median); the hand-built graph also
mean-pools and normalizes (a few small dispatches), the ONNX one ends at last_hidden_state.
onnxruntime times session.run of the same .onnx file. Also reported: dispatches per run and
attention ops in each schedule, and the ONNX output's agreement with onnxruntime.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from webrlx.cli.bench import _time, time_executable  # noqa: E402


def feeds(batch: int, seq: int, cls_sep: tuple[int, int] = (101, 102)) -> dict[str, np.ndarray]:
    """Seeded BERT feeds of shape (batch, seq): random word ids between [CLS] and [SEP]."""
    rng = np.random.default_rng(batch * 7 + seq)
    ids = rng.integers(1000, 29000, (batch, seq)).astype(np.int64)
    ids[:, 0], ids[:, -1] = cls_sep
    return {"input_ids": ids, "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids)}


def time_hand_and_onnx(enc: Any, sess: Any, onnx_feeds: dict[str, np.ndarray], iters: int,
                       repeats: int) -> tuple[float, float, Any]:
    """Median seconds of the hand-built encoder and the ONNX session's compiled run on the same
    ids (inputs already on the device, batches alternated so load falls on both), and the
    ONNX plan's executable."""
    hand = enc.feeds([list(r) for r in onnx_feeds["input_ids"]])
    plan, fed = sess._plan(onnx_feeds)
    assert plan.executable is not None
    hand_s, onnx_s = [], []
    for _ in range(repeats):
        hand_s.append(time_executable(enc.executable, hand, iters, 1))
        onnx_s.append(time_executable(plan.executable, fed, iters, 1))
    return statistics.median(hand_s), statistics.median(onnx_s), plan.executable


def _ops(exe: object) -> dict[str, int]:
    plan = exe.last_plan                                           # type: ignore[attr-defined]
    graph = exe.graph                                              # type: ignore[attr-defined]
    return {"dispatches_per_run": len(plan.dispatches) if plan else 0,
            "attention_ops": sum(n.op == "attention" for n in graph.nodes)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="1x128,32x128", help="batch x seq list")
    p.add_argument("--model", default=None, help="the .onnx (default: export to build/onnx)")
    p.add_argument("--iters", type=int, default=3, help="runs per timed batch (at least)")
    p.add_argument("--repeats", type=int, default=5, help="alternating batches per side")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    import onnxruntime as ort

    from tests.onnx.export_minilm import DEFAULT_OUT, export
    from webrlx.models import minilm
    from webrlx.onnx import InferenceSession
    path = a.model or str(DEFAULT_OUT if DEFAULT_OUT.exists() else export())
    enc = minilm.load()
    sess = InferenceSession(path, device=enc.device)
    ref_sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rows = []
    for case in a.shapes.split(","):
        batch, seq = (int(v) for v in case.split("x"))
        case_feeds = feeds(batch, seq)
        (got,) = sess.run(None, case_feeds)
        t_hand, t_onnx, onnx_exe = time_hand_and_onnx(enc, sess, case_feeds, a.iters, a.repeats)
        (ref,) = ref_sess.run(None, case_feeds)
        t_ort = _time(lambda: ref_sess.run(None, case_feeds), lambda: None, 3, 3)
        rows.append({"case": f"minilm {batch}x{seq}", "onnx_webrlx_ms": t_onnx * 1e3,
                     "hand_built_webrlx_ms": t_hand * 1e3, "onnxruntime_cpu_ms": t_ort * 1e3,
                     "onnx_vs_hand_built": t_onnx / t_hand,
                     "onnx_vs_onnxruntime_cpu": t_onnx / t_ort,
                     "max_abs_err_vs_onnxruntime": float(np.abs(got - ref).max()),
                     "max_abs_ref": float(np.abs(ref).max()),
                     "onnx_schedule": _ops(onnx_exe),
                     "hand_built_schedule": _ops(enc.executable)})
    result = {"adapter": enc.device.info.name, "backend": enc.device.info.backend,
              "onnxruntime": f"onnxruntime {ort.__version__} CPU", "model": path,
              "method": __doc__.split("Method: ")[1].strip(), "cases": rows}
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
