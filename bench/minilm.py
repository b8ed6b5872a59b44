"""MiniLM end to end: webrlx beside sentence-transformers (torch, CUDA where present) and
onnxruntime CPU, in one run; prints JSON. Also checks webrlx's embeddings against
sentence-transformers on the same weights (cosine, max abs diff).

    python bench/minilm.py [--model DIR] [--shapes 1x128,32x128] [--sentences 3] [--out F]
                           [--dtype float16] [--no-onnx]

--dtype float16: webrlx's f16 MiniLM (minilm.load(dtype="float16")), and torch timed in f16 as
well (the model .half(), CUDA only) beside its f32.

Method: webrlx times a compiled executable's run on inputs already on the device, synchronized
(webrlx.cli.bench.time_executable); torch times the sentence-transformers forward + cuda sync;
onnxruntime times session.run of the exported BertModel + mean pooling. Median of repeats.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from webrlx.cli.bench import _time, time_executable  # noqa: E402
from webrlx.models import minilm  # noqa: E402
from webrlx.models.assets import minilm_dir  # noqa: E402

SENTENCES = ["A man is eating food.", "The new movie is awesome for the whole family.",
             "Can you recommend a good book about the history of mathematics?"]


def _median_time(fn, sync, iters: int = 10, repeats: int = 5) -> float:
    return _time(fn, sync, iters, repeats)


def synthetic_feeds(enc: minilm.MiniLMEncoder, batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    rows = [[101] + list(rng.integers(1000, 29000, seq - 2)) + [102] for _ in range(batch)]
    return enc.feeds(rows)


def torch_side(model_dir: Path, feeds_list, texts, f16: bool = False):
    """(name, f32 embeddings of texts, f32 times, f16 times or None: f16 asked and CUDA)."""
    import torch
    from sentence_transformers import SentenceTransformer
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    st = SentenceTransformer(str(model_dir), device=dev)
    st.eval()
    ref = st.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    def times() -> list[float]:
        out = []
        with torch.inference_mode():
            for f in feeds_list:
                inp = {k: torch.from_numpy(f[k].astype(np.int64)).to(dev)
                       for k in ("input_ids", "attention_mask", "token_type_ids")}
                out.append(_median_time(lambda: st(inp), sync))
        return out
    t32 = times()
    t16 = None
    if f16 and dev == "cuda":
        st.half()
        t16 = times()
    return f"sentence-transformers torch {torch.__version__} {dev} eager", ref, t32, t16


def onnx_side(model_dir: Path, feeds_list):
    import onnxruntime as ort
    import torch
    from transformers import AutoModel
    bert = AutoModel.from_pretrained(str(model_dir)).eval().requires_grad_(False)

    class Hidden(torch.nn.Module):
        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001
            return bert(input_ids=input_ids, attention_mask=attention_mask,
                        token_type_ids=token_type_ids).last_hidden_state
    model = Hidden()
    path = Path(tempfile.mkdtemp()) / "minilm.onnx"
    ex = {k: torch.ones((1, 8), dtype=torch.int64) for k in
          ("input_ids", "attention_mask", "token_type_ids")}
    dyn = {k: {0: "batch", 1: "seq"} for k in ex}
    torch.onnx.export(model, (ex["input_ids"], ex["attention_mask"], ex["token_type_ids"]),
                      str(path), input_names=list(ex), output_names=["hidden"],
                      dynamic_axes={**dyn, "hidden": {0: "batch", 1: "seq"}}, opset_version=17,
                      dynamo=False)
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    times = []
    for f in feeds_list:
        inp = {k: f[k].astype(np.int64) for k in ex}

        def run():
            h = sess.run(None, inp)[0]
            m = inp["attention_mask"][..., None]
            e = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            return e / np.linalg.norm(e, axis=-1, keepdims=True)
        times.append(_median_time(run, lambda: None, iters=3, repeats=3))
    return f"onnxruntime {ort.__version__} CPU", times


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=None)
    p.add_argument("--shapes", default="", help="batch x seq list, e.g. 1x128,32x128")
    p.add_argument("--sentences", type=int, default=3)
    p.add_argument("--check", default="", help="JSON list of sentences to check (file)")
    p.add_argument("--out", default=None)
    p.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    p.add_argument("--no-onnx", action="store_true", help="leave onnxruntime CPU out")
    a = p.parse_args()
    model_dir = minilm_dir(a.model)
    enc = minilm.load(model_dir, dtype=a.dtype)
    texts = json.loads(Path(a.check).read_text()) if a.check else SENTENCES[:a.sentences]
    cases = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",") if s]
    feeds_list = [synthetic_feeds(enc, b, s) for b, s in cases]
    if not cases:                               # time the sentences themselves, as one batch
        (batches, _) = enc._batches(texts, 32)
        feeds_list, cases = batches, [("sentences", len(texts))]
    rows = []
    wr_times = [time_executable(enc.executable, f, 10, 5) for f in feeds_list]
    got = enc.encode(texts)
    torch_name, ref, torch_times, torch16 = torch_side(model_dir, feeds_list, texts,
                                                       a.dtype == "float16")
    ort_name, ort_times = ("", [None] * len(cases)) if a.no_onnx else \
        onnx_side(model_dir, feeds_list)
    for i, (c, w, t, o) in enumerate(zip(cases, wr_times, torch_times, ort_times)):
        row = {"case": f"minilm {c[0]}x{c[1]}", "webrlx_ms": w * 1e3, "torch_ms": t * 1e3,
               "webrlx_vs_torch": w / t}
        if o is not None:
            row.update(onnxruntime_cpu_ms=o * 1e3, webrlx_vs_onnxruntime=w / o)
        if torch16 is not None:
            row.update(torch_f16_ms=torch16[i] * 1e3, webrlx_vs_torch_f16=w / torch16[i])
        rows.append(row)
    cos = (got * ref).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(ref, axis=-1)
    result = {"adapter": enc.device.info.name, "backend": enc.device.info.backend,
              "dtype": a.dtype, "torch": torch_name, "onnxruntime": ort_name,
              "method": __doc__.split("Method: ")[1].strip(),
              "dispatches_per_run": len(enc.executable.last_plan.dispatches)
              if enc.executable.last_plan else 0,
              "check": {"sentences": len(texts), "min_cosine": float(cos.min()),
                        "max_abs_diff": float(np.abs(got - ref).max())},
              "cases": rows}
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
