"""MiniLM on the GPU machine (issue 30's speed point): the ONNX export through webrlx.onnx beside
the hand-built webrlx.models.minilm, onnxruntime (CUDA EP where installed, else CPU EP) and torch
CUDA f32, in one run; prints JSON with the ratios.

    python bench/device_onnx_minilm.py [--shapes 1x128,32x128] [--iters 20] [--repeats 5]
                                       [--out F]

The weights are random (speed does not depend on them; the real model's 90 MB exceed what a
device call carries): a transformers BertModel with all-MiniLM-L6-v2's shape is saved to
/tmp/minilm with a generated WordPiece tokenizer.json (hand-built loader), then exported with
tests/onnx/export_minilm.py (WEBRLX_MINILM_DIR points both at /tmp/minilm).

Method: every figure is the median over `repeats` batches of at least `iters` back-to-back runs
ended by one sync (webrlx.cli.bench._time), after a warm-up run. webrlx sides time a compiled
executable's run on inputs already on the device (time_executable), hand-built and ONNX batches
alternating; `onnx_webrlx_session_run_ms` is InferenceSession.run with upload and readback.
onnxruntime: session.run from numpy (upload and readback included) and, on the CUDA EP, an
IOBinding run with inputs and output on the GPU; the CUDA EP runs with use_tf32=0. torch: the
same BertModel (sdpa attention), eval, no_grad, TF32 off, inputs on the GPU. Agreement: max abs
difference of last_hidden_state over max |reference|.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from onnx_minilm import feeds as bert_feeds  # noqa: E402  (bench/ is the script's folder)
from onnx_minilm import time_hand_and_onnx  # noqa: E402

from webrlx.cli.bench import _time  # noqa: E402

MODEL_DIR = Path("/tmp/minilm")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def make_model(model_dir: Path) -> Any:
    """Save a random-weight BertModel of all-MiniLM-L6-v2's shape and a WordPiece tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                     num_attention_heads=12, intermediate_size=1536,
                     max_position_embeddings=512)
    model = BertModel(cfg, add_pooling_layer=True).eval()
    model_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(model_dir), safe_serialization=True)
    words = SPECIALS + [f"w{i}" for i in range(cfg.vocab_size - len(SPECIALS))]
    tokenizer = {"model": {"type": "WordPiece", "vocab": {w: i for i, w in enumerate(words)}},
                 "normalizer": {"type": "BertNormalizer", "lowercase": True},
                 "pre_tokenizer": {"type": "BertPreTokenizer"}}
    (model_dir / "tokenizer.json").write_text(json.dumps(tokenizer))
    return model


def _rel(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def _ort_sessions(path: str) -> tuple[Any, str, dict[str, Any]]:
    import onnxruntime as ort
    available = ort.get_available_providers()
    if "CUDAExecutionProvider" in available:
        providers: list[Any] = [("CUDAExecutionProvider", {"use_tf32": 0}),
                                "CPUExecutionProvider"]
    else:
        providers = ["CPUExecutionProvider"]
    sess = ort.InferenceSession(path, providers=providers)
    info = {"version": ort.__version__, "available_providers": available,
            "session_providers": sess.get_providers()}
    return sess, sess.get_providers()[0], info


def _ort_iobinding(sess: Any, feeds: dict[str, np.ndarray]) -> Any:
    """A callable running sess on inputs bound on GPU 0, output left there."""
    import onnxruntime as ort
    io = sess.io_binding()
    for name, arr in feeds.items():
        io.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(arr, "cuda", 0))
    io.bind_output("last_hidden_state", "cuda", 0)
    return lambda: sess.run_with_iobinding(io)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="1x128,32x128", help="batch x seq list")
    p.add_argument("--iters", type=int, default=20, help="runs per timed batch (at least)")
    p.add_argument("--repeats", type=int, default=5, help="timed batches per side")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    import torch

    os.environ["WEBRLX_MINILM_DIR"] = str(MODEL_DIR)
    ref_model = make_model(MODEL_DIR)
    from tests.onnx.export_minilm import export
    from webrlx.models import minilm
    from webrlx.onnx import InferenceSession
    path = str(export(Path("/tmp/minilm_onnx/minilm.onnx")))

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tmodel = ref_model.to("cuda")
    enc = minilm.load(MODEL_DIR)
    sess = InferenceSession(path, device=enc.device)
    ort_sess, ort_provider, ort_info = _ort_sessions(path)
    on_cuda = ort_provider == "CUDAExecutionProvider"
    rows = []
    for case in a.shapes.split(","):
        batch, seq = (int(v) for v in case.split("x"))
        feeds = bert_feeds(batch, seq, cls_sep=(2, 3))   # this tokenizer's [CLS], [SEP]
        (got,) = sess.run(None, feeds)
        t_hand, t_onnx, _ = time_hand_and_onnx(enc, sess, feeds, a.iters, a.repeats)
        t_sess = _time(lambda: sess.run(None, feeds), lambda: None, a.iters, a.repeats)

        (ort_out,) = ort_sess.run(None, feeds)
        t_ort = _time(lambda: ort_sess.run(None, feeds), lambda: None, a.iters, a.repeats)
        t_ort_io = _time(_ort_iobinding(ort_sess, feeds), lambda: None, a.iters, a.repeats) \
            if on_cuda else None

        tfeeds = {k: torch.from_numpy(v).to("cuda") for k, v in feeds.items()}
        with torch.no_grad():
            torch_out = tmodel(**tfeeds).last_hidden_state.float().cpu().numpy()
            t_torch = _time(lambda: tmodel(**tfeeds), torch.cuda.synchronize, a.iters,
                            a.repeats)
        ort_key = "onnxruntime_cuda" if on_cuda else "onnxruntime_cpu"
        row: dict[str, Any] = {
            "case": f"minilm {batch}x{seq}",
            "onnx_webrlx_ms": t_onnx * 1e3, "hand_built_webrlx_ms": t_hand * 1e3,
            "onnx_webrlx_session_run_ms": t_sess * 1e3,
            f"{ort_key}_run_ms": t_ort * 1e3,
            f"{ort_key}_iobinding_ms": None if t_ort_io is None else t_ort_io * 1e3,
            "torch_cuda_f32_ms": t_torch * 1e3,
            "hand_built_over_onnx": t_hand / t_onnx,
            f"{ort_key}_run_over_onnx_webrlx": t_ort / t_onnx,
            f"{ort_key}_iobinding_over_onnx_webrlx":
                None if t_ort_io is None else t_ort_io / t_onnx,
            f"{ort_key}_run_over_onnx_session_run": t_ort / t_sess,
            "torch_over_onnx_webrlx": t_torch / t_onnx,
            "rel_err_onnx_webrlx_vs_onnxruntime": _rel(got, ort_out),
            "rel_err_onnx_webrlx_vs_torch": _rel(got, torch_out),
            "rel_err_onnxruntime_vs_torch": _rel(ort_out, torch_out),
        }
        row["agree_1e-3"] = row["rel_err_onnx_webrlx_vs_onnxruntime"] <= 1e-3 and \
            row["rel_err_onnx_webrlx_vs_torch"] <= 1e-3
        rows.append(row)
    result = {"adapter": enc.device.info.name, "backend": enc.device.info.backend,
              "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "onnxruntime": ort_info, "weights": "random (torch.manual_seed(0)), MiniLM shape",
              "method": (__doc__ or "").split("Method: ")[1].strip(),
              "command": "python bench/device_onnx_minilm.py " + " ".join(sys.argv[1:]),
              "cases": rows}
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
