"""A Llama-architecture decoder (SmolLM2) as ONE webrlx executable over GGUF weights.

The graph has a symbolic sequence length "s": prefill binds s to the (bucketed) prompt length,
a decode step binds s = 1. Both are plans of one executable, so they share one copy of the
quantized weights (params) and of the KV cache (states). Per run the graph:

    ids (1, s) -> Q8_0 embedding -> 30 x [rms_norm -> q/k/v (Q4_1) -> rope -> write the KV
    cache at pos -> causal GQA attention over cache[0 : pos + s] -> o proj (+ residual) ->
    rms_norm -> SwiGLU FFN (Q4_1) (+ residual)] -> rms_norm -> row `last` -> tied Q8_0 head
    -> logits (1, V) -> repetition penalty, temperature, top-k, top-p, draw -> token (1, 1)

and writes the token into the `tokens` state at pos_next = pos + last + 1, marks it in the
`seen` state, and returns (token, pos_next, logits). A decode step feeds token and pos_next
back as DeviceTensors, so nothing crosses to the CPU between steps; the caller reads the
`tokens` state every few steps to stream text.

RoPE layout: llama.cpp's GGUF converter permutes the rows of attn_q / attn_k for the
interleaved (GPT-J style, pairs 2i, 2i+1) rotation, and we use the weights as stored with the
interleaved rope. transformers un-permutes them and rotates halves (NeoX style); the two give
the same q.k products (the same permutation applies to q and k), hence the same logits.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import nn, quant
from ..tensor import Graph, Tensor, concat


@dataclass(frozen=True)
class LlamaConfig:
    """The architecture numbers, all read from the GGUF metadata."""
    layers: int
    width: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    rope_base: float
    eps: float
    vocab: int
    context: int

    @classmethod
    def from_metadata(cls, md: Mapping[str, Any], where: str = "gguf") -> LlamaConfig:
        """Read the config from GGUF metadata (general.architecture must be llama)."""
        arch = md.get("general.architecture")
        if arch != "llama":
            raise ValueError(f"{where}: general.architecture is {arch!r}; webrlx's decoder "
                             "runs 'llama' models")

        def get(key: str) -> Any:
            if f"llama.{key}" not in md:
                raise ValueError(f"{where}: metadata key llama.{key} is missing")
            return md[f"llama.{key}"]
        width, heads = int(get("embedding_length")), int(get("attention.head_count"))
        vocab = md.get("llama.vocab_size") or len(md.get("tokenizer.ggml.tokens", ()))
        return cls(layers=int(get("block_count")), width=width,
                   ffn=int(get("feed_forward_length")), heads=heads,
                   kv_heads=int(md.get("llama.attention.head_count_kv", heads)),
                   head_dim=int(md.get("llama.rope.dimension_count", width // heads)),
                   rope_base=float(md.get("llama.rope.freq_base", 10000.0)),
                   eps=float(get("attention.layer_norm_rms_epsilon")), vocab=int(vocab),
                   context=int(get("context_length")))


def weight_words(raw: np.ndarray) -> np.ndarray:
    """GGUF block bytes as the uint32 words a quantized param holds (padded to 4 bytes)."""
    raw = np.asarray(raw).reshape(-1).view(np.uint8)
    if raw.nbytes % 4:
        raw = np.concatenate([raw, np.zeros(4 - raw.nbytes % 4, np.uint8)])
    return raw.view(np.uint32)


class _Weights:
    """Declares the params of the graph from the GGUF tensor infos (format, shape, words)."""

    def __init__(self, g: Graph, infos: Mapping[str, Any]) -> None:
        self.g = g
        self.infos = infos

    def _info(self, name: str) -> Any:
        if name not in self.infos:
            raise ValueError(f"gguf: tensor {name!r} is missing from the file")
        return self.infos[name]

    def norm(self, name: str) -> Tensor:
        info = self._info(name)
        return self.g.param(name, tuple(info.shape), "float32")

    def quant(self, name: str) -> tuple[Tensor, str, int, int]:
        """(param, format, n, k) of a quantized (n, k) weight, kept as its GGUF blocks (any
        row of quant.FORMATS: a Q4_K_M file's Q4_K and Q6_K tensors alike)."""
        info = self._info(name)
        fmt = info.type.lower()
        if fmt not in quant.FORMATS:
            raise ValueError(f"gguf: tensor {name!r} is {info.type}; webrlx reads "
                             f"{', '.join(f.upper() for f in quant.FORMATS)} weights")
        n, k = (int(d) for d in info.shape)
        return self.g.param(name, (-(-info.nbytes // 4),), "uint32"), fmt, n, k


def _linear(x: Tensor, w: tuple[Tensor, str, int, int]) -> Tensor:
    param, fmt, n, k = w
    return nn.qlinear(x, param, fmt, n, k)


def build_llama(cfg: LlamaConfig, infos: Mapping[str, Any], capacity: int
                ) -> tuple[Graph, list[Tensor]]:
    """Return (graph, [token (1, 1), pos_next (1,), logits (1, V)]) for KV caches of
    `capacity` positions. Inputs: ids (1, s) int32, pos (1,), last (1,) (the row whose logits
    are sampled), fparams (4,) = [temperature, top_p, repetition_penalty, 0], iparams (2,)
    = [top_k, seed]."""
    g = Graph()
    W = _Weights(g, infos)
    ids = g.input("ids", (1, "s"), "int32")
    pos = g.input("pos", (1,), "int32")
    last = g.input("last", (1,), "int32")
    fparams = g.input("fparams", (4,), "float32")
    iparams = g.input("iparams", (2,), "int32")
    emb, efmt, vocab, width = W.quant("token_embd.weight")
    x = nn.qembedding(ids, emb, efmt, vocab, width)                  # (1, s, width)
    hd, H, Hkv = cfg.head_dim, cfg.heads, cfg.kv_heads
    for i in range(cfg.layers):
        p = f"blk.{i}."
        h = nn.rms_norm(x, W.norm(p + "attn_norm.weight"), cfg.eps)
        q = _linear(h, W.quant(p + "attn_q.weight")).reshape(1, -1, H, hd)
        k = _linear(h, W.quant(p + "attn_k.weight")).reshape(1, -1, Hkv, hd)
        v = _linear(h, W.quant(p + "attn_v.weight")).reshape(1, -1, Hkv, hd)
        q = nn.rope(q, pos, cfg.rope_base, interleaved=True)
        k = nn.rope(k, pos, cfg.rope_base, interleaved=True)
        kc = nn.cache_write(g.state(f"k{i}", (1, Hkv, capacity, hd)), k, pos)
        vc = nn.cache_write(g.state(f"v{i}", (1, Hkv, capacity, hd)), v, pos)
        a = nn.cached_attention(q, kc, vc, pos).reshape(1, -1, H * hd)   # (1, s, width)
        x = x + _linear(a, W.quant(p + "attn_output.weight"))
        h = nn.rms_norm(x, W.norm(p + "ffn_norm.weight"), cfg.eps)
        gate = _linear(h, W.quant(p + "ffn_gate.weight"))
        up = _linear(h, W.quant(p + "ffn_up.weight"))
        x = x + _linear(gate.silu() * up, W.quant(p + "ffn_down.weight"))
    x = nn.rms_norm(x, W.norm("output_norm.weight"), cfg.eps)
    head = W.quant("output.weight") if "output.weight" in infos else (emb, efmt, vocab, width)
    logits = _linear(x.gather(last, axis=1), head).reshape(1, vocab)  # tied: the embedding
    flat_ids = ids.reshape(-1)
    seen = g.state("seen", (vocab,), "int32").scatter_set(flat_ids, flat_ids * 0 + 1)
    pos_next = pos + last + 1
    token = nn.sample(logits, seen, fparams, concat([iparams, pos_next, pos_next * 0]))
    seen.scatter_set(token, token * 0 + 1)                           # effects: states only
    g.state("tokens", (capacity + 1,), "int32").scatter_set(pos_next, token)
    return g, [token.reshape(1, 1), pos_next, logits]


def weight_arrays(infos: Mapping[str, Any], tensor_bytes: Any, names: list[str]
                  ) -> dict[str, np.ndarray]:
    """Param arrays for `names`: F32 norms as float32, quantized blocks as uint32 words."""
    out = {}
    for name in names:
        raw = tensor_bytes(name)
        if infos[name].type == "F32":
            out[name] = np.frombuffer(raw, np.float32).reshape(tuple(infos[name].shape))
        else:
            out[name] = weight_words(np.frombuffer(raw, np.uint8))
    return out
