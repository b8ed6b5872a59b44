"""A ViT on the GPU machine (issue 30's speed point, beside bench/device_onnx_minilm.py): the
ONNX export through webrlx.onnx beside onnxruntime (CUDA EP where installed, else CPU EP) and
torch f32 (CUDA where there is one), in one run; prints JSON with the ratios.

    python bench/device_onnx_vit.py [--config base|tiny] [--batches 1,8] [--iters 10]
                                    [--repeats 5] [--out F]

The weights are random (seeded): a transformers ViTModel (no pooler) of google/vit-base-patch16-
224's shape (`base`: 224x224 images, 16x16 patches -> 197 tokens, 12 layers of 768, 12 heads,
MLP 3072) or the tiny one of the opt-in model tests (`tiny`: 32x32, 8x8 patches, 2 layers of
64), exported with eager attention by tests/onnx/models/hf_tiny.export_vit (the ViT test's
exporter: torch.onnx, opset 17, dynamic batch) to /tmp/vit_onnx. Nothing is downloaded.

Method: every figure is the median over `repeats` batches of at least `iters` back-to-back runs
ended by one sync (webrlx.cli.bench._time), after a warm-up run. `onnx_webrlx_ms` times the
session's compiled executable on inputs already on the device (time_executable);
`onnx_webrlx_session_run_ms` is InferenceSession.run with upload and readback. onnxruntime:
session.run from numpy (upload and readback included) and, on the CUDA EP, an IOBinding run with
input and output on the GPU; the CUDA EP runs with use_tf32=0. torch: the same weights in a
ViTModel with sdpa attention, eval, no_grad, TF32 off, input on the device. Agreement: max abs
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

from device_onnx_minilm import _ort_iobinding, _ort_sessions, _rel  # noqa: E402  (bench/)
from onnx_minilm import _ops  # noqa: E402

from webrlx.cli.bench import _time, time_executable  # noqa: E402

CONFIGS: dict[str, dict[str, int]] = {
    "base": dict(image_size=224, patch_size=16, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072),
    "tiny": dict(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=128),
}


def make_models(config: str) -> tuple[Any, Any]:
    """The seeded ViTModel with eager attention (for the export) and a copy of its weights in
    one with sdpa attention (torch's timed side)."""
    import torch
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    eager = ViTModel(ViTConfig(**CONFIGS[config], attn_implementation="eager"),
                     add_pooling_layer=False).eval()
    sdpa = ViTModel(ViTConfig(**CONFIGS[config], attn_implementation="sdpa"),
                    add_pooling_layer=False).eval()
    sdpa.load_state_dict(eager.state_dict())
    return eager, sdpa


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="base", choices=sorted(CONFIGS))
    p.add_argument("--batches", default="1,8", help="batch sizes")
    p.add_argument("--iters", type=int, default=10, help="runs per timed batch (at least)")
    p.add_argument("--repeats", type=int, default=5, help="timed batches per side")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    import torch

    from tests.onnx.models.hf_tiny import export_vit
    from webrlx.onnx import InferenceSession

    eager, tmodel = make_models(a.config)
    out = Path(f"/tmp/vit_onnx/vit-{a.config}.onnx")
    out.unlink(missing_ok=True)
    path = str(export_vit(eager, out))
    del eager

    on_gpu = torch.cuda.is_available()
    tdev = "cuda" if on_gpu else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tmodel = tmodel.to(tdev)
    sess = InferenceSession(path)
    ort_sess, ort_provider, ort_info = _ort_sessions(path)
    on_cuda = ort_provider == "CUDAExecutionProvider"
    ort_key = "onnxruntime_cuda" if on_cuda else "onnxruntime_cpu"
    torch_key = "torch_cuda_f32" if on_gpu else "torch_cpu_f32"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    size = CONFIGS[a.config]["image_size"]
    rows, info = [], None
    for batch in (int(b) for b in a.batches.split(",")):
        pixels = np.random.default_rng(batch).standard_normal(
            (batch, 3, size, size)).astype(np.float32)
        feeds = {"pixel_values": pixels}
        (got,) = sess.run(None, feeds)
        plan, fed = sess._plan(feeds)
        assert plan.executable is not None
        info = plan.executable.device.info
        t_onnx = time_executable(plan.executable, fed, a.iters, a.repeats)
        t_sess = _time(lambda: sess.run(None, feeds), lambda: None, a.iters, a.repeats)

        (ort_out,) = ort_sess.run(None, feeds)
        t_ort = _time(lambda: ort_sess.run(None, feeds), lambda: None, a.iters, a.repeats)
        t_ort_io = _time(_ort_iobinding(ort_sess, feeds), lambda: None, a.iters, a.repeats) \
            if on_cuda else None

        tpix = torch.from_numpy(pixels).to(tdev)
        with torch.no_grad():
            torch_out = tmodel(pixel_values=tpix).last_hidden_state.float().cpu().numpy()
            t_torch = _time(lambda: tmodel(pixel_values=tpix), sync, a.iters, a.repeats)
        row: dict[str, Any] = {
            "case": f"vit-{a.config} {batch}x3x{size}x{size}",
            "onnx_webrlx_ms": t_onnx * 1e3,
            "onnx_webrlx_session_run_ms": t_sess * 1e3,
            f"{ort_key}_run_ms": t_ort * 1e3,
            f"{ort_key}_iobinding_ms": None if t_ort_io is None else t_ort_io * 1e3,
            f"{torch_key}_ms": t_torch * 1e3,
            f"{ort_key}_run_over_onnx_webrlx": t_ort / t_onnx,
            f"{ort_key}_iobinding_over_onnx_webrlx":
                None if t_ort_io is None else t_ort_io / t_onnx,
            f"{ort_key}_run_over_onnx_session_run": t_ort / t_sess,
            f"{torch_key}_over_onnx_webrlx": t_torch / t_onnx,
            **_ops(plan.executable),
            "rel_err_onnx_webrlx_vs_onnxruntime": _rel(got, ort_out),
            "rel_err_onnx_webrlx_vs_torch": _rel(got, torch_out),
            "rel_err_onnxruntime_vs_torch": _rel(ort_out, torch_out),
        }
        row["agree_1e-4"] = row["rel_err_onnx_webrlx_vs_onnxruntime"] <= 1e-4 and \
            row["rel_err_onnx_webrlx_vs_torch"] <= 1e-4
        rows.append(row)
    assert info is not None
    result = {"adapter": info.name, "backend": info.backend,
              "gpu": torch.cuda.get_device_name(0) if on_gpu else None,
              "torch": torch.__version__, "onnxruntime": ort_info,
              "weights": f"random (torch.manual_seed(0)), ViT {a.config}: {CONFIGS[a.config]}",
              "method": (__doc__ or "").split("Method: ")[1].strip(),
              "command": "python bench/device_onnx_vit.py " + " ".join(sys.argv[1:]),
              "cases": rows}
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
