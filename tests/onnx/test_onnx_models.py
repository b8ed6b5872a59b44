"""Real models through webrlx.onnx against onnxruntime's CPU EP on the same inputs, each made at
test time into build/onnx/ by an export script in tests/onnx/models/: float32 models agree to
1e-4 x max|ref|, int8 and 4-bit ones to cosine >= 0.999 per output row. The default run takes
MiniLM (exported, ORT-optimized, int8) and the CNN; WEBRLX_ONNX_MODELS=1 adds the tiny ViT,
CLIP towers, Whisper encoder, Whisper decoder with past key/values (32 greedy steps) and the
Llama decoder with its KV cache."""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("torch")
pytest.importorskip("transformers")

from webrlx.onnx import InferenceSession  # noqa: E402

OPT_IN = pytest.mark.skipif(os.environ.get("WEBRLX_ONNX_MODELS") != "1",
                            reason="big model exports: WEBRLX_ONNX_MODELS=1")


def compare(path: Path, feeds: dict[str, np.ndarray], quantized: bool = False
            ) -> list[np.ndarray]:
    """Run path on onnxruntime and webrlx; assert agreement; return webrlx's outputs."""
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = InferenceSession(str(path)).run(None, feeds)
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.shape == r.shape, f"output {i}: shape {g.shape} != {r.shape}"
        if quantized:
            g2, r2 = g.reshape(-1, r.shape[-1]), r.reshape(-1, r.shape[-1])
            cos = (g2 * r2).sum(-1) / (np.linalg.norm(g2, axis=-1) *
                                       np.linalg.norm(r2, axis=-1) + 1e-30)
            assert cos.min() >= 0.999, f"output {i}: min cosine per row {cos.min()}"
        else:
            err = float(np.abs(g - r).max())
            assert err <= 1e-4 * float(np.abs(r).max()), f"output {i}: max error {err}"
    return got


def minilm_feeds(batch: int = 2, seq: int = 24) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seq)
    ids = rng.integers(1000, 29000, (batch, seq)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[-1, seq - 5:] = 0
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


@pytest.mark.parametrize("variant", ["optimized", "int8"])
def test_minilm_variants(variant: str) -> None:
    from tests.onnx.models import minilm_variants
    make: Callable[[], Path] = getattr(minilm_variants, variant)
    path = make()
    feeds = minilm_feeds()
    if variant == "optimized":           # ORT's fused graph takes the mask as int64 too
        names = {i.name for i in ort.InferenceSession(
            str(path), providers=["CPUExecutionProvider"]).get_inputs()}
        feeds = {k: v for k, v in feeds.items() if k in names}
    compare(path, feeds, quantized=variant == "int8")


def test_cnn() -> None:
    from tests.onnx.models.cnn import export
    pixels = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    compare(export(), {"pixels": pixels})


@OPT_IN
def test_vit() -> None:
    from tests.onnx.models.hf_tiny import vit
    pixels = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
    compare(vit(), {"pixel_values": pixels})


@OPT_IN
def test_clip_text_and_vision() -> None:
    from tests.onnx.models.hf_tiny import clip
    rng = np.random.default_rng(2)
    ids = rng.integers(1, 99, (2, 10)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    compare(clip(), {"input_ids": ids, "attention_mask": mask,
                     "pixel_values": rng.standard_normal((3, 3, 32, 32)).astype(np.float32)})


@OPT_IN
def test_whisper_encoder() -> None:
    from tests.onnx.models.hf_tiny import whisper_encoder
    mel = np.random.default_rng(3).standard_normal((1, 80, 3000)).astype(np.float32)
    compare(whisper_encoder(), {"input_features": mel})


@OPT_IN
def test_llama_genai_greedy_tokens_match() -> None:
    """Prompt then 32 greedy steps with the KV cache fed back: the same tokens as onnxruntime,
    logits to cosine >= 0.999 per row (4-bit weights)."""
    from tests.onnx.models.llama_genai import build, empty_past
    path = str(build())
    sessions = {"ort": ort.InferenceSession(path, providers=["CPUExecutionProvider"]),
                "webrlx": InferenceSession(path)}
    names = [o.name for o in sessions["ort"].get_outputs()]
    prompt = np.random.default_rng(4).integers(0, 256, (1, 7)).astype(np.int64)
    tokens: dict[str, list[int]] = {}
    for who, sess in sessions.items():
        ids, past, out = prompt, empty_past(), []
        for step in range(33):
            total = past["past_key_values.0.key"].shape[2] + ids.shape[1]
            feeds = {"input_ids": ids, "attention_mask": np.ones((1, total), np.int64), **past}
            res = dict(zip(names, sess.run(None, feeds)))
            if step == 0:
                out_logits = res["logits"]
                if who == "ort":
                    ref_logits = out_logits
                else:
                    g, r = out_logits.reshape(-1, 256), ref_logits.reshape(-1, 256)
                    cos = (g * r).sum(-1) / np.linalg.norm(g, axis=-1) / np.linalg.norm(
                        r, axis=-1)
                    assert cos.min() >= 0.999, cos
            nxt = int(res["logits"][0, -1].argmax())
            out.append(nxt)
            ids = np.array([[nxt]], np.int64)
            past = {k.replace("present", "past_key_values"): v for k, v in res.items()
                    if k.startswith("present")}
        tokens[who] = out[:32]
    assert tokens["webrlx"] == tokens["ort"], tokens


def whisper_greedy(variant: str, make: Callable[[Path], object], enc: np.ndarray,
                   steps: int = 32, each_step: Callable[[int], None] | None = None
                   ) -> tuple[list[int], np.ndarray]:
    """Greedy decoding with tests.onnx.models.whisper_decoder's models: "pair" runs the prompt
    through decoder_model, then one token a step through decoder_with_past_model with the
    present keys/values fed back; "merged" runs decoder_model_merged throughout (past of length
    0 and use_cache_branch false first). Returns (tokens, last-position logits per step)."""
    from tests.onnx.models.whisper_decoder import PROMPT, export, merged, past_names
    if variant == "pair":
        plain, past = (make(p) for p in export())
    else:
        plain = past = make(merged())
    feeds: dict[str, np.ndarray] = {"input_ids": PROMPT, "encoder_hidden_states": enc}
    heads, width = 4, 16
    if variant == "merged":
        feeds.update({n: np.zeros((1, heads, 0, width), np.float32)
                      for n in past_names("past_key_values")},
                     use_cache_branch=np.array([False]))
    tokens: list[int] = []
    logits = []
    for step in range(steps):
        sess = plain if step == 0 else past
        names = [o.name for o in sess.get_outputs()]          # type: ignore[attr-defined]
        res = dict(zip(names, sess.run(None, feeds)))          # type: ignore[attr-defined]
        logits.append(res["logits"][0, -1])
        tokens.append(int(logits[-1].argmax()))
        feeds = {k: v for k, v in feeds.items() if k.startswith("past_key_values")}
        feeds.update({k.replace("present", "past_key_values"): v for k, v in res.items()
                      if k.startswith("present")})
        feeds["input_ids"] = np.array([[tokens[-1]]], np.int64)
        if variant == "merged":     # (the with-past branch reads no encoder states)
            feeds.update(encoder_hidden_states=enc[:, :1], use_cache_branch=np.array([True]))
        if each_step is not None:
            each_step(step)
    return tokens, np.array(logits)


@OPT_IN
@pytest.mark.parametrize("variant", ["pair", "merged"])
def test_whisper_decoder_with_past_greedy_tokens_match(variant: str) -> None:
    """Whisper-tiny-shaped encoder, then 32 greedy decoder steps with past key/values, as
    optimum's decoder_model + decoder_with_past_model pair and as its decoder_model_merged:
    the same tokens as onnxruntime, the logits of each step to 1e-4 x max|ref|. A plan a step
    (the past grows): the weights are uploaded once, kernels come from the device's pipeline
    cache, and past max_plans the oldest plan's memory is freed, so device buffers stop
    growing."""
    from tests.onnx.models.hf_tiny import whisper_encoder
    mel = np.random.default_rng(5).standard_normal((1, 80, 3000)).astype(np.float32)
    enc_path = str(whisper_encoder())
    enc_ref = ort.InferenceSession(enc_path, providers=["CPUExecutionProvider"]).run(
        None, {"input_features": mel})[0]
    ref_tokens, ref_logits = whisper_greedy(variant, lambda p: ort.InferenceSession(
        str(p), providers=["CPUExecutionProvider"]), enc_ref)
    assert len(set(ref_tokens)) > 8, ref_tokens     # a decode worth comparing
    enc = InferenceSession(enc_path).run(None, {"input_features": mel})[0]
    assert float(np.abs(enc - enc_ref).max()) <= 1e-4 * float(np.abs(enc_ref).max())
    sessions: list[InferenceSession] = []

    def make(p: Path) -> InferenceSession:
        sessions.append(InferenceSession(str(p), max_plans=4))
        return sessions[-1]
    live: list[int] = []
    pipelines: list[int] = []

    def each_step(step: int) -> None:
        stats = sessions[0].executable.stats           # type: ignore[union-attr]
        live.append(stats["buffers"] - stats.get("buffers_released", 0))
        pipelines.append(stats["pipelines"])
    tokens, logits = whisper_greedy(variant, make, enc, each_step=each_step)
    assert tokens == ref_tokens, (tokens, ref_tokens)
    err = np.abs(logits - ref_logits).max(-1) / np.abs(ref_logits).max(-1)
    assert err.max() <= 1e-4, f"max error / max|ref| per step: {err}"
    assert max(live[8:]) == live[8], f"device buffers alive after each step: {live}"
    assert pipelines[-1] == pipelines[8], f"pipelines after each step: {pipelines}"
