"""The decoder of every supported GGUF language-model family, as ONE webrlx graph builder
parameterized by a family table (FAMILIES) whose options come from the GGUF metadata.

The graph has a symbolic sequence length "s": prefill binds s to the (bucketed) prompt length,
a decode step binds s = 1. Both are plans of one executable, so they share one copy of the
weights (params, quantized ones kept as their GGUF blocks) and of the KV cache (states):

    ids (1, s) -> embedding (x sqrt(width) for Gemma) -> layers x [norm -> q/k/v (+ biases;
    Phi-3: one fused qkv) -> per-head q/k norm (Qwen3, Gemma 3) -> rope -> write the KV cache
    at pos -> causal GQA attention over the cache (sliding window on the layers that have
    one; Gemma 2 soft-caps the scores) -> o proj (-> post-norm, Gemma) (+ residual) -> norm
    -> gated FFN (SiLU, or GELU-tanh for Gemma; Phi-3 fuses gate and up) (-> post-norm)
    (+ residual)] -> row `last` -> norm -> head (tied: the embedding) (Gemma 2: soft-capped)
    -> logits (1, V) -> repetition penalty, temperature, top-k, top-p, draw -> token (1, 1)

and writes the token into the `tokens` state at pos_next = pos + last + 1, marks it in the
`seen` state, and returns (token, pos_next, logits).

RoPE layout: llama.cpp's converter permutes the rows of attn_q / attn_k of `llama` files for
the interleaved (GPT-J) rotation; the other families keep HF's layout, rotated in halves
(NeoX). Gemma's RMSNorm weights are stored as (1 + w) by llama.cpp's converter, so every family
multiplies by the stored weight.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import nn, quant
from ..tensor import Graph, Tensor, concat
from . import gguf

# read as float32 params where not kept as blocks (block_format): F32 weights, norms, biases,
# and F16 / BF16 rows whose length is not a multiple of 32
FLOAT_TYPES = ("F32", "F16", "BF16")


@dataclass(frozen=True)
class Family:
    """How one `general.architecture` differs from Llama (one row of FAMILIES)."""
    interleaved_rope: bool = False   # llama.cpp permuted q/k for pairs (2i, 2i+1)
    embed_scale: bool = False        # Gemma: embeddings x sqrt(width)
    post_norms: bool = False         # Gemma 2/3: norms after attention and after the FFN
    activation: str = "silu"         # of the FFN gate: "silu" | "gelu_tanh"
    swa_pattern: int = 0             # every n-th layer global, the rest sliding (0: all alike)
    swa_base: float = 0.0            # rope base of the sliding layers (Gemma 3), 0: the same
    gemma_scale: bool = False        # attention scale from query_pre_attn_scalar (see below)


# general.architecture -> its row; q/k/v biases, q/k norms, fused qkv / gate_up and a tied
# head follow from the tensors the file holds.
FAMILIES: dict[str, Family] = {
    "llama": Family(interleaved_rope=True),
    "mistral": Family(interleaved_rope=True),
    "qwen2": Family(),
    "qwen3": Family(),
    "phi3": Family(),
    "gemma2": Family(embed_scale=True, post_norms=True, activation="gelu_tanh",
                     swa_pattern=2, gemma_scale=True),
    "gemma3": Family(embed_scale=True, post_norms=True, activation="gelu_tanh",
                     swa_pattern=6, swa_base=10000.0, gemma_scale=True),
}


class UnsupportedModelError(ValueError):
    """A GGUF file webrlx cannot run: the message names what and lists what it runs."""


@dataclass(frozen=True)
class LlamaConfig:
    """The architecture numbers and options, all read from the GGUF metadata."""
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
    arch: str = "llama"
    window: int = 0                          # sliding window (0: none)
    swa_layers: tuple[bool, ...] = ()        # which layers slide (empty: all, if window)
    swa_base: float = 0.0                    # rope base of the sliding layers (0: rope_base)
    rope_factors: tuple[float, ...] = ()     # rope frequency divisors (linear; Llama 3's
    #                                          rope_freqs.weight, set by llm.load)
    # LongRoPE (Phi-3-mini-128k, Phi-3.5-mini): divisors for a KV cache longer than
    # rope_original_context (rope_long) and for one within it (rope_short), from the tensors
    # rope_factors_long / _short.weight (set by llm.model_config); see rope_scaling()
    rope_long: tuple[float, ...] = ()
    rope_short: tuple[float, ...] = ()
    rope_original_context: int = 0           # rope.scaling.original_context_length (0: context)
    rope_attn_factor: float = 1.0            # rope.scaling.attn_factor: multiplies cos and sin
    attn_scale: float = 0.0                  # 0: 1 / sqrt(head_dim)
    attn_softcap: float = 0.0
    final_softcap: float = 0.0
    family: Family = field(default_factory=Family)

    @classmethod
    def from_metadata(cls, md: Mapping[str, Any], where: str = "gguf") -> LlamaConfig:
        """Read the config from GGUF metadata; an unsupported architecture raises naming it."""
        arch = md.get("general.architecture")
        if arch not in FAMILIES:
            raise UnsupportedModelError(
                f"{where}: general.architecture is {arch!r}; webrlx runs "
                f"{', '.join(sorted(FAMILIES))}")
        fam = FAMILIES[arch]

        def get(key: str, default: Any = None) -> Any:
            if f"{arch}.{key}" not in md:
                if default is None:
                    raise ValueError(f"{where}: metadata key {arch}.{key} is missing")
                return default
            return md[f"{arch}.{key}"]
        width, heads = int(get("embedding_length")), int(get("attention.head_count"))
        layers = int(get("block_count"))
        head_dim = int(get("attention.key_length", get("rope.dimension_count", width // heads)))
        rotary = int(get("rope.dimension_count", head_dim))
        if rotary != head_dim or (f"{arch}.attention.key_length" not in md
                                  and rotary != width // heads):
            raise UnsupportedModelError(          # llama.cpp's Phi-4-mini: 96 of 128
                f"{where}: rope.dimension_count {rotary} is not the head dim "
                f"{width // heads if rotary == head_dim else head_dim}: partial rotary "
                "embeddings; webrlx rotates the whole head")
        kv = get("attention.head_count_kv", heads)
        vocab = get("vocab_size", 0) or len(md.get("tokenizer.ggml.tokens", ()))
        window = int(get("attention.sliding_window", 0))
        pattern = get("attention.sliding_window_pattern", fam.swa_pattern)
        if isinstance(pattern, list):               # per layer: True where it slides
            swa = tuple(bool(v) for v in pattern)
        else:                                       # llama.cpp's set_swa_pattern(n)
            n = int(pattern)
            swa = tuple(n == 0 or i % n < n - 1 for i in range(layers))
        scaling = str(get("rope.scaling.type", "none"))
        factors: tuple[float, ...] = ()
        if scaling == "linear":
            factors = (float(get("rope.scaling.factor")),) * (head_dim // 2)
        elif scaling not in ("none", "", "longrope", "su"):   # longrope: its tensors decide
            raise UnsupportedModelError(f"{where}: rope scaling {scaling!r}; webrlx runs "
                                        "none, linear, llama3 (rope_freqs.weight) and longrope "
                                        "(rope_factors_long / _short.weight)")
        scale = 0.0
        if fam.gemma_scale:     # llama.cpp: 1/sqrt(head_dim), 1/sqrt(width/heads) for 27B
            big = (arch, layers) in (("gemma2", 46), ("gemma3", 62))
            scale = 1.0 / math.sqrt(width / heads if big else head_dim)
        scale = float(get("attention.scale", scale))
        attn_factor = float(get("rope.scaling.attn_factor", 1.0))
        if not 0 < attn_factor < math.inf:
            raise UnsupportedModelError(f"{where}: rope.scaling.attn_factor {attn_factor} "
                                        "must be a finite value > 0")
        return cls(layers=layers, width=width, ffn=int(get("feed_forward_length")),
                   heads=heads, kv_heads=int(kv if not isinstance(kv, list) else max(kv)),
                   head_dim=head_dim, rope_base=float(get("rope.freq_base", 10000.0)),
                   eps=float(get("attention.layer_norm_rms_epsilon")), vocab=int(vocab),
                   context=int(get("context_length")), arch=arch, window=window,
                   swa_layers=swa, swa_base=float(get("rope.freq_base_swa", fam.swa_base)),
                   rope_factors=factors, attn_scale=scale,
                   rope_original_context=int(get("rope.scaling.original_context_length", 0)),
                   rope_attn_factor=attn_factor,
                   attn_softcap=float(get("attn_logit_softcapping", 0.0) or 0.0),
                   final_softcap=float(get("final_logit_softcapping", 0.0) or 0.0),
                   family=fam)

    def rope_scaling(self, capacity: int) -> tuple[tuple[float, ...], float]:
        """(rope frequency divisors, attention-score factor) for KV caches of `capacity`
        positions per sequence.

        LongRoPE as llama.cpp runs it (llama_model::get_rope_factors): the long factors when
        the context of a sequence (here: the KV cache's capacity) exceeds the original context
        (rope.scaling.original_context_length, else the model's), the short ones otherwise,
        for the whole run; transformers instead switches per forward pass on the sequence
        length, so the two agree while a sequence stays on one side of the original context.
        Both multiply cos and sin by rope.scaling.attn_factor (llama.cpp: in every file that
        has the key, 1 when it is absent), which scales q.k by its square: folded into the
        attention scale (exact, as the rotation is linear and the scores are the only reader
        of the rotated q and k). Without LongRoPE factors: rope_factors.
        """
        factors = self.rope_factors
        if self.rope_long:
            original = self.rope_original_context or self.context
            factors = self.rope_long if capacity > original else self.rope_short
        return factors, self.rope_attn_factor ** 2

    def sliding(self, layer: int) -> bool:
        """Whether this layer attends through the sliding window."""
        if not self.window:
            return False
        return not self.swa_layers or self.swa_layers[layer % len(self.swa_layers)]


ROPE_LONG, ROPE_SHORT = "rope_factors_long.weight", "rope_factors_short.weight"


def check_rope_tensors(cfg: LlamaConfig, infos: Mapping[str, Any], where: str = "gguf"
                       ) -> None:
    """Raise UnsupportedModelError where the file's rope-factor tensors are ones webrlx
    cannot honour (from the tensor infos alone): LongRoPE needs both rope_factors_long and
    rope_factors_short, F32 / F16 / BF16 vectors of head_dim / 2, and neither rope_freqs nor
    linear scaling beside them."""
    have = [n for n in (ROPE_LONG, ROPE_SHORT) if n in infos]
    if not have:
        return
    if len(have) == 1:
        missing = ROPE_SHORT if have[0] == ROPE_LONG else ROPE_LONG
        raise UnsupportedModelError(f"{where}: tensor {have[0]!r} without {missing!r}: "
                                    "LongRoPE needs both")
    if "rope_freqs.weight" in infos or cfg.rope_factors:
        other = "rope_freqs.weight" if "rope_freqs.weight" in infos else "linear rope scaling"
        raise UnsupportedModelError(f"{where}: both {other} and LongRoPE factors "
                                    "(rope_factors_long / _short.weight); webrlx runs one")
    for name in have:
        info = infos[name]
        n = int(np.prod(info.shape))
        if info.type not in FLOAT_TYPES or n != cfg.head_dim // 2:
            raise UnsupportedModelError(
                f"{where}: tensor {name!r} is {info.type} of shape {tuple(info.shape)}; "
                f"LongRoPE factors must be {cfg.head_dim // 2} values (head_dim / 2) of "
                f"{', '.join(FLOAT_TYPES)} (webrlx rotates the whole head)")


def weight_words(raw: np.ndarray) -> np.ndarray:
    """GGUF block bytes as the uint32 words a quantized param holds (padded to 4 bytes)."""
    raw = np.asarray(raw).reshape(-1).view(np.uint8)
    if raw.nbytes % 4:
        raw = np.concatenate([raw, np.zeros(4 - raw.nbytes % 4, np.uint8)])
    return raw.view(np.uint32)


def block_format(info: Any) -> str | None:
    """The quant.FORMATS row a tensor stays in on the device (its GGUF bytes as stored: every
    quant type, and 2-D F16 / BF16 of k % 32 == 0 as blocks of 32 floats), or None."""
    fmt = info.type.lower()
    if fmt not in quant.FORMATS or len(info.shape) != 2:
        return None
    return fmt if int(info.shape[1]) % quant.FORMATS[fmt].block == 0 else None


def device_bytes(info: Any) -> int:
    """Bytes a tensor's param takes: its blocks as stored, else float32."""
    return int(info.nbytes) if block_format(info) else info.n_elements * 4


# blocks weights that _Weights.row_pieces cuts into params of at most one binding each
ROW_PIECE_TENSORS = ("token_embd.weight", "output.weight")


def least_limits(info: Any) -> tuple[int, int]:
    """The smallest (maxBufferSize, maxStorageBufferBindingSize) a device may have and still
    hold this tensor's param(s), from the header alone:
    - blocks of ROW_PIECE_TENSORS: one row's bytes both (row_pieces cuts them to the binding);
    - other blocks: the whole param both (one buffer, bound whole by the quantized kernels);
    - float32 params: the whole param in one buffer, but only a window of it bound at once
      (compiler/split.py: rows of a table, K slabs of a matmul weight), one row of its
      longer dim at the least."""
    whole = device_bytes(info)
    if block_format(info) is not None:
        if info.name in ROW_PIECE_TENSORS:
            row = whole // max(1, int(info.shape[0]))
            return row, row
        return whole, whole
    if len(info.shape) < 2:
        return whole, whole
    return whole, max(int(d) for d in info.shape) * 4


def _readable() -> str:
    return ", ".join(dict.fromkeys([*FLOAT_TYPES, *(f.upper() for f in quant.FORMATS)]))


def _rows(name: str) -> tuple[str, int, int]:
    """'t[r0:r1]' -> (t, r0, r1): a param holding rows r0..r1 of a fused tensor; 't' -> -1s."""
    if not name.endswith("]"):
        return name, -1, -1
    base, _, rng = name[:-1].rpartition("[")
    r0, r1 = (int(v) for v in rng.split(":"))
    return base, r0, r1


def tensor_name(param: str) -> str:
    """The GGUF tensor a param is read from ('t^T', 't[r0:r1]' -> 't')."""
    return _rows(param.removesuffix("^T"))[0]


class _Weights:
    """Declares the params of the graph from the GGUF tensor infos (format, shape, words)."""

    def __init__(self, g: Graph, infos: Mapping[str, Any], max_bytes: int | None = None
                 ) -> None:
        self.g = g
        self.infos = infos
        self.max_bytes = max_bytes      # the most bytes one param may hold (one binding)

    def _info(self, name: str) -> Any:
        if name not in self.infos:
            raise ValueError(f"gguf: tensor {name!r} is missing from the file")
        return self.infos[name]

    def norm(self, name: str) -> Tensor:
        info = self._info(name)
        if info.type not in FLOAT_TYPES:
            raise UnsupportedModelError(f"gguf: tensor {name!r} is {info.type}; norms and "
                                        f"biases must be {', '.join(FLOAT_TYPES)}")
        return self.g.param(name, tuple(info.shape), "float32")

    def linear(self, name: str, rows: tuple[int, int] | None = None) -> tuple[Any, ...]:
        """A (n, k) weight (rows r0..r1 of it): ("q", param, format, n, k) kept as its GGUF
        blocks (block_format: quant types, F16, BF16), or ("f", (k, n) float32 param) for F32
        (and F16 / BF16 rows of k % 32 != 0)."""
        info = self._info(name)
        n, k = (int(d) for d in info.shape)
        pname = name
        if rows is not None:
            pname, n = f"{name}[{rows[0]}:{rows[1]}]", rows[1] - rows[0]
        fmt = block_format(info)
        if fmt is not None:
            return "q", self.g.param(pname, (quant.nwords(fmt, n, k),), "uint32"), fmt, n, k
        if info.type in FLOAT_TYPES:
            return ("f", self.g.param(pname + "^T", (k, n), "float32"))
        raise UnsupportedModelError(
            f"gguf: tensor {name!r} is {info.type}; webrlx reads {_readable()} weights")

    def row_pieces(self, name: str) -> list[tuple[int, int]] | None:
        """Row ranges that cut a blocks weight (block_format) over max_bytes into params of at
        most max_bytes each (a big vocabulary's embedding and head: Gemma 3's 262144 rows of
        Q8_0 are 178 MB, over the 128 MiB one binding holds in many browsers); None when it
        fits or is not blocks (float tables: the kernels bind windows, compiler/split.py)."""
        # (the page's check before a download counts these cut: least_limits)
        assert name in ROW_PIECE_TENSORS, name
        info = self._info(name)
        fmt = block_format(info)
        if fmt is None or self.max_bytes is None:
            return None
        n = int(info.shape[0])
        row = info.nbytes // n
        if info.nbytes <= self.max_bytes:
            return None
        fit = max(1, self.max_bytes // row)
        per = fit // 256 * 256 or fit               # whole 256-row groups where they fit
        return [(r, min(n, r + per)) for r in range(0, n, per)]

    def linear_pieces(self, name: str) -> tuple[Any, ...]:
        """linear(name), or ("pieces", [linear of each row piece]) where row_pieces cuts it."""
        pieces = self.row_pieces(name)
        if pieces is None:
            return self.linear(name)
        return ("pieces", [self.linear(name, r) for r in pieces])

    def bias(self, name: str) -> Tensor | None:
        return self.norm(name) if name in self.infos else None


def _linear(x: Tensor, w: tuple[Any, ...], bias: Tensor | None = None) -> Tensor:
    if w[0] == "pieces":                    # row pieces of one weight: outputs side by side
        assert bias is None
        return concat([_linear(x, piece) for piece in w[1]], axis=-1)
    if w[0] == "q":
        _, param, fmt, n, k = w
        return nn.qlinear(x, param, fmt, n, k, bias)
    return nn.linear(x, w[1], bias)


def _embedding(W: _Weights, ids: Tensor) -> tuple[Tensor, tuple[Any, ...]]:
    """(embeddings (1, s, width), the tied head) from token_embd.weight."""
    info = W._info("token_embd.weight")
    vocab, width = (int(d) for d in info.shape)
    fmt = block_format(info)
    pieces = W.row_pieces("token_embd.weight")
    if pieces is not None:       # each piece's lookup gives zeros for ids outside its rows
        assert fmt is not None   # (row_pieces cuts only blocks)
        parts = [W.linear("token_embd.weight", r) for r in pieces]
        x = None
        for (r0, _), (_, param, _, n, _) in zip(pieces, parts):
            e = nn.qembedding(ids - r0 if r0 else ids, param, fmt, n, width)
            x = e if x is None else x + e
        assert x is not None
        return x, ("pieces", parts)
    if fmt is not None:
        param = W.g.param("token_embd.weight", (quant.nwords(fmt, vocab, width),), "uint32")
        return nn.qembedding(ids, param, fmt, vocab, width), ("q", param, fmt, vocab, width)
    if info.type not in FLOAT_TYPES:
        W.linear("token_embd.weight")               # raises naming the type
    table = W.g.param("token_embd.weight", (vocab, width), "float32")
    return nn.embedding(table, ids), ("f", table.T)


def _qkv(cfg: LlamaConfig, W: _Weights, p: str, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    hd, H, Hkv = cfg.head_dim, cfg.heads, cfg.kv_heads
    if p + "attn_qkv.weight" in W.infos:            # Phi-3: rows [q; k; v] of one tensor
        name, q1, k1 = p + "attn_qkv.weight", H * hd, (H + Hkv) * hd
        wq, wk = W.linear(name, (0, q1)), W.linear(name, (q1, k1))
        wv = W.linear(name, (k1, k1 + Hkv * hd))
    else:
        wq, wk, wv = (W.linear(p + f"attn_{x}.weight") for x in "qkv")
    b = h.shape[0]
    q = _linear(h, wq, W.bias(p + "attn_q.bias")).reshape(b, -1, H, hd)
    k = _linear(h, wk, W.bias(p + "attn_k.bias")).reshape(b, -1, Hkv, hd)
    v = _linear(h, wv, W.bias(p + "attn_v.bias")).reshape(b, -1, Hkv, hd)
    if p + "attn_q_norm.weight" in W.infos:         # Qwen3, Gemma 3: RMSNorm per head
        q = nn.rms_norm(q, W.norm(p + "attn_q_norm.weight"), cfg.eps)
        k = nn.rms_norm(k, W.norm(p + "attn_k_norm.weight"), cfg.eps)
    return q, k, v


def _ffn(cfg: LlamaConfig, W: _Weights, p: str, h: Tensor) -> Tensor:
    if p + "ffn_gate.weight" in W.infos:
        wg, wu = W.linear(p + "ffn_gate.weight"), W.linear(p + "ffn_up.weight")
    else:                                           # Phi-3: rows [gate; up] of ffn_up
        wg = W.linear(p + "ffn_up.weight", (0, cfg.ffn))
        wu = W.linear(p + "ffn_up.weight", (cfg.ffn, 2 * cfg.ffn))
    gate, up = _linear(h, wg), _linear(h, wu)
    act = gate.silu() if cfg.family.activation == "silu" else gate.gelu("tanh")
    return _linear(act * up, W.linear(p + "ffn_down.weight"))


def decoder_layers(cfg: LlamaConfig, W: _Weights, x: Tensor, pos: Tensor,
                   cache: tuple[int, int, int, int]) -> Tensor:
    """The layers over x (batch, s, width) with KV cache states k{i} / v{i} of shape cache
    (batch or slots, kv_heads, capacity, head_dim); pos as nn.cached_attention reads it."""
    fam = cfg.family
    hd, H = cfg.head_dim, cfg.heads
    factors, score_factor = cfg.rope_scaling(cache[2])
    scale = (cfg.attn_scale or 1.0 / math.sqrt(hd)) * score_factor
    for i in range(cfg.layers):
        p = f"blk.{i}."
        h = nn.rms_norm(x, W.norm(p + "attn_norm.weight"), cfg.eps)
        q, k, v = _qkv(cfg, W, p, h)
        sliding = cfg.sliding(i)
        base = cfg.swa_base if sliding and cfg.swa_base else cfg.rope_base
        f = () if sliding and cfg.swa_base else factors   # Gemma 3 scales global layers only
        q = nn.rope(q, pos, base, interleaved=fam.interleaved_rope, factors=f)
        k = nn.rope(k, pos, base, interleaved=fam.interleaved_rope, factors=f)
        kc = nn.cache_write(W.g.state(f"k{i}", cache), k, pos)
        vc = nn.cache_write(W.g.state(f"v{i}", cache), v, pos)
        a = nn.cached_attention(q, kc, vc, pos, scale, window=cfg.window if sliding else 0,
                                softcap=cfg.attn_softcap).reshape(x.shape[0], -1, H * hd)
        a = _linear(a, W.linear(p + "attn_output.weight"))
        if fam.post_norms:
            a = nn.rms_norm(a, W.norm(p + "post_attention_norm.weight"), cfg.eps)
        x = x + a
        h = nn.rms_norm(x, W.norm(p + "ffn_norm.weight"), cfg.eps)
        m = _ffn(cfg, W, p, h)
        if fam.post_norms:
            m = nn.rms_norm(m, W.norm(p + "post_ffw_norm.weight"), cfg.eps)
        x = x + m
    return x


def build_llama(cfg: LlamaConfig, infos: Mapping[str, Any], capacity: int,
                max_param_bytes: int | None = None) -> tuple[Graph, list[Tensor]]:
    """Return (graph, [token (1, 1), pos_next (1,), logits (1, V)]) for KV caches of
    `capacity` positions. Inputs: ids (1, s) int32, pos (1,), last (1,) (the row whose logits
    are sampled), fparams (4,) = [temperature, top_p, repetition_penalty, 0], iparams (2,)
    = [top_k, seed]. max_param_bytes: weights over it are cut into row pieces
    (_Weights.row_pieces)."""
    g = Graph()
    W = _Weights(g, infos, max_param_bytes)
    fam = cfg.family
    ids = g.input("ids", (1, "s"), "int32")
    pos = g.input("pos", (1,), "int32")
    last = g.input("last", (1,), "int32")
    fparams = g.input("fparams", (4,), "float32")
    iparams = g.input("iparams", (2,), "int32")
    x, tied = _embedding(W, ids)                                     # (1, s, width)
    if fam.embed_scale:
        x = x * math.sqrt(cfg.width)
    x = decoder_layers(cfg, W, x, pos, (1, cfg.kv_heads, capacity, cfg.head_dim))
    # row `last` first: the norm is per row, and then runs as the head GEMV's prologue
    x = nn.rms_norm(x.gather(last, axis=1), W.norm("output_norm.weight"), cfg.eps)
    head = W.linear_pieces("output.weight") if "output.weight" in infos else tied
    logits = _linear(x, head).reshape(1, cfg.vocab)
    if cfg.final_softcap:
        logits = (logits * (1.0 / cfg.final_softcap)).tanh() * cfg.final_softcap
    flat_ids = ids.reshape(-1)
    seen = g.state("seen", (cfg.vocab,), "int32").scatter_set(flat_ids, flat_ids * 0 + 1)
    pos_next = pos + last + 1
    token = nn.sample(logits, seen, fparams, concat([iparams, pos_next, pos_next * 0]))
    seen.scatter_set(token, token * 0 + 1)                           # effects: states only
    g.state("tokens", (capacity + 1,), "int32").scatter_set(pos_next, token)
    return g, [token.reshape(1, 1), pos_next, logits]


def weight_arrays(infos: Mapping[str, Any], tensor_bytes: Any, names: list[str]
                  ) -> dict[str, np.ndarray]:
    """Param arrays for `names`: blocks (block_format) as uint32 words ('t[r0:r1]': rows of a
    fused tensor), the rest as float32 (F16 / BF16 widened), weights 't^T' transposed to
    (k, n)."""
    out = {}
    for pname in names:
        name, transposed = (pname[:-2], True) if pname.endswith("^T") else (pname, False)
        name, r0, r1 = _rows(name)
        info = infos[name]
        raw = np.frombuffer(tensor_bytes(name), np.uint8)
        if block_format(info) is None:
            shape = tuple(info.shape)
            arr = (raw.view("<f4").reshape(shape) if info.type == "F32"     # no copy
                   else gguf.dequantize(raw, info.type, shape))
            if r0 >= 0:
                arr = arr[r0:r1]
            out[pname] = np.ascontiguousarray(arr.T if transposed else arr, np.float32)
        else:
            if r0 >= 0:
                row = info.nbytes // info.shape[0]
                raw = raw[r0 * row: r1 * row]
            out[pname] = weight_words(raw)
    return out
