"""BERT encoder (all-MiniLM-L6-v2 and friends) built with the webrlx API.

Graph inputs: input_ids, attention_mask, token_type_ids (batch, seq) int32 and position_ids
(seq,) int32; output: (batch, hidden) mean-pooled, L2-normalized sentence embeddings.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import nn
from ..tensor import Graph, Tensor


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BertConfig:
        """Read a transformers config.json dict (absent fields keep their defaults); a field of
        the wrong type or an impossible size raises ValueError naming it."""
        if d.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"bert: hidden_act {d['hidden_act']!r} is not supported (gelu only)")
        values = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        for k, v in values.items():
            want = cls.__dataclass_fields__[k].type
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) if want == "float" \
                else isinstance(v, int) and not isinstance(v, bool) and v > 0
            if not ok:
                kind = "a number" if want == "float" else "a positive int"
                raise ValueError(f"bert: {k} must be {kind}, got {v!r}")
        cfg = cls(**values)
        if cfg.hidden_size % cfg.num_attention_heads:
            raise ValueError(f"bert: hidden_size {cfg.hidden_size} is not a multiple of "
                             f"num_attention_heads {cfg.num_attention_heads}")
        return cfg


def _linear_names(cfg: BertConfig) -> list[str]:
    names = []
    for i in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{i}."
        names += [p + "attention.self.query", p + "attention.self.key",
                  p + "attention.self.value", p + "attention.output.dense",
                  p + "intermediate.dense", p + "output.dense"]
    return names


def bert_params(cfg: BertConfig, tensors: Mapping[str, np.ndarray], dtype: str = "float32"
                ) -> dict[str, np.ndarray]:
    """Map checkpoint tensors to graph params: Linear weights [out, in] become [in, out];
    every param in `dtype` (build_bert's)."""
    linear = {n + ".weight" for n in _linear_names(cfg)}
    out = {}
    for name, arr in tensors.items():
        if name.startswith("bert."):
            name = name[5:]
        if name.endswith("position_ids") or name.startswith("pooler."):
            continue
        arr = np.asarray(arr, dtype)
        out[name] = np.ascontiguousarray(arr.T) if name in linear else arr
    # each layer's query, key and value projections as one [H, 3H] matmul (build_bert's
    # "attention.self.qkv"): one wide matmul runs the big tiles where three narrow ones ran
    # 64x64 tiles (H200, MiniLM at 32x128: three 4096x384x384 matmuls ~48 us each)
    for i in range(cfg.num_hidden_layers):
        a = f"encoder.layer.{i}.attention.self."
        parts = [a + n for n in ("query", "key", "value")]
        if all(n + ".weight" in out and n + ".bias" in out for n in parts):
            out[a + "qkv.weight"] = np.ascontiguousarray(
                np.concatenate([out.pop(n + ".weight") for n in parts], axis=1))
            out[a + "qkv.bias"] = np.concatenate([out.pop(n + ".bias") for n in parts])
    return out


def build_bert(cfg: BertConfig, dtype: str = "float32") -> tuple[Graph, Tensor]:
    """Return (graph, embeddings) of the encoder with mean pooling and L2 normalization.

    dtype: the params' and the encoder's activations' type, "float32" or "float16" (f16
    inputs to every matmul: tensor cores where the adapter offers subgroup matrices; the
    kernels accumulate in f32). Pooling and the embeddings are float32 either way."""
    g = Graph()
    ids = g.input("input_ids", ("batch", "seq"), "int32")
    mask = g.input("attention_mask", ("batch", "seq"), "int32")
    types = g.input("token_type_ids", ("batch", "seq"), "int32")
    pos = g.input("position_ids", ("seq",), "int32")
    H, E = cfg.hidden_size, cfg.num_attention_heads
    D = H // E

    def p(name: str, *shape: int) -> Tensor:
        return g.param(name, shape, dtype)

    def layer_norm(x: Tensor, prefix: str) -> Tensor:
        return nn.layer_norm(x, p(prefix + ".weight", H), p(prefix + ".bias", H),
                             cfg.layer_norm_eps)

    def linear(x: Tensor, prefix: str, n_in: int, n_out: int, act: str = "none") -> Tensor:
        return nn.linear(x, p(prefix + ".weight", n_in, n_out), p(prefix + ".bias", n_out), act)

    def heads(t: Tensor) -> Tensor:   # (batch, seq, H) -> (batch, heads, seq, D)
        return t.reshape("batch", "seq", E, D).permute(0, 2, 1, 3)

    e = "embeddings."
    x = (nn.embedding(p(e + "word_embeddings.weight", cfg.vocab_size, H), ids)
         + nn.embedding(p(e + "position_embeddings.weight", cfg.max_position_embeddings, H), pos)
         + nn.embedding(p(e + "token_type_embeddings.weight", cfg.type_vocab_size, H), types))
    x = layer_norm(x, e + "LayerNorm")
    for i in range(cfg.num_hidden_layers):
        a = f"encoder.layer.{i}.attention."
        qkv = linear(x, a + "self.qkv", H, 3 * H)                     # (batch, seq, 3H)
        q, k, v = (heads(qkv[..., j * H:(j + 1) * H]) for j in range(3))
        ctx = nn.attention(q, k, v, mask=mask).permute(0, 2, 1, 3).reshape("batch", "seq", H)
        x = layer_norm(linear(ctx, a + "output.dense", H, H) + x, a + "output.LayerNorm")
        o = f"encoder.layer.{i}."
        h = linear(x, o + "intermediate.dense", H, cfg.intermediate_size, "gelu")
        x = layer_norm(linear(h, o + "output.dense", cfg.intermediate_size, H) + x,
                       o + "output.LayerNorm")
    x = x.cast("float32") if dtype != "float32" else x
    # Mean pooling then L2 normalization (sentence-transformers'). The mean's division by the
    # count of unmasked tokens is a positive scale of each row, which the normalization takes
    # out again, so the masked sum is enough: one batched GEMV (mask row @ x), then rms_norm
    # with weights 1 / sqrt(H) = x / ||x||. Two dispatches where the mean, the sums of squares
    # and the divisions took ten (81 -> 74 in MiniLM 1x128 on a GPU).
    m = mask.cast("float32").unsqueeze(1)                             # (batch, 1, seq)
    summed = (m @ x).reshape("batch", H)                              # (batch, H)
    # eps: ||x|| >= ~1e-12 as sentence-transformers' max(||x||, 1e-12); a zero row stays zero
    unit = g.constant(np.full(H, 1.0 / np.sqrt(H), np.float32))
    return g, nn.rms_norm(summed, unit, eps=1e-24 / H)
