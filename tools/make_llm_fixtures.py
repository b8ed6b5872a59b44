"""Small random-weight GGUF language models, one per family, made without the network.

    python tools/make_llm_fixtures.py [--out build/llm_fixtures] [--types F32,Q8_0]

Each family's model comes from a transformers config (<= 4 layers, small width, the family's
head layout and options: biases, q/k norms, sliding windows, soft-caps, Llama 3 rope scaling,
fused Phi-3 tensors, Phi-3's LongRoPE) with seeded random weights, and is written to GGUF by
`write_gguf` with the `gguf` package's writer, constants and tensor-name maps, as llama.cpp's
converter writes it (Llama q/k rows permuted for the interleaved rope, Gemma norms stored as
1 + w, rope_freqs for Llama 3; rope_factors_long / _short, the original context and the
attention factor for LongRoPE). The K-quant types (Q2_K .. Q6_K, IQ4_XS, quantized by
tools/kquant.py) take a wide shape (width 256, 4 x 64 query heads, FFN 512: rows of whole
256-weight blocks); the other types (IQ4_NL too, by tools/kquant.py) keep width 64.
Tokenizers: the first 2048 tokens of SmolLM2's byte-level BPE (gpt2 model), or a
SentencePiece-style vocabulary built from its merges (llama model, Llama and Gemma spellings).
`transformers_model` loads a fixture back with transformers' GGUF reader (the tests' reference).
"""
from __future__ import annotations

import argparse
import functools
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

N_BPE = 2048                  # tokens kept from SmolLM2's vocabulary
N_SPM_PIECES = 700            # merged pieces of the SentencePiece-style vocabulary
SPACE = "\u2581"
ROOT = Path(__file__).resolve().parents[1]
# written by tools/kquant.py; all but IQ4_NL (blocks of 32) take the wide shape
KQUANT_TYPES = ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS")


@functools.cache
def _smollm2_md() -> dict[str, Any]:
    import sys
    sys.path.insert(0, str(ROOT))
    from webrlx.models import gguf as ours
    from webrlx.models.assets import smollm2_gguf
    return ours.load(smollm2_gguf(None)).metadata


def _kquant() -> Any:
    """tools/kquant.py (imported from here whether tools/ is on sys.path or a package)."""
    import sys
    sys.path.insert(0, str(ROOT / "tools"))
    import kquant
    return kquant


def gpt2_vocab(pre: str) -> dict[str, Any]:
    """tokenizer.* metadata: SmolLM2's first N_BPE tokens and the merges among them."""
    md = _smollm2_md()
    tokens = md["tokenizer.ggml.tokens"][:N_BPE]
    keep = set(tokens)
    merges = [m for m in md["tokenizer.ggml.merges"]
              if m.replace(" ", "") in keep and all(p in keep for p in m.split(" "))]
    return {"model": "gpt2", "pre": pre, "tokens": tokens, "merges": merges,
            "types": md["tokenizer.ggml.token_type"][:N_BPE], "bos": 1, "eos": 2, "unk": 0,
            "add_bos": False, "template": md["tokenizer.chat_template"]}


def spm_vocab(gemma: bool) -> dict[str, Any]:
    """tokenizer.* metadata of a SentencePiece-style vocabulary: specials, 256 byte tokens,
    single characters, then pieces from SmolLM2's merges (Ġ -> ▁), best first."""
    md = _smollm2_md()
    chars = [SPACE] + [chr(c) for c in range(33, 127)]
    pieces: list[str] = []
    have = set(chars)
    for m in md["tokenizer.ggml.merges"]:
        left, right = (p.replace("\u0120", SPACE) for p in m.split(" "))
        if left in have and right in have and left + right not in have:
            pieces.append(left + right)
            have.add(left + right)
        if len(pieces) == N_SPM_PIECES:
            break
    if gemma:
        specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]
        ids = {"bos": 2, "eos": 1, "unk": 3}
        types = [3, 3, 3, 2, 3, 3]
    else:
        specials, ids, types = ["<unk>", "<s>", "</s>"], {"bos": 1, "eos": 2, "unk": 0}, [2, 3, 3]
    tokens = specials + [f"<0x{b:02X}>" for b in range(256)] + chars + pieces
    types = types + [6] * 256 + [1] * (len(chars) + len(pieces))
    scores = [0.0] * (len(specials) + 256) + [-1e4 - i for i in range(len(chars))] + \
        [-float(i) for i in range(len(pieces))]
    return {"model": "llama", "pre": "default", "tokens": tokens, "scores": scores,
            "types": types, "add_bos": True, "template": None, **ids}


def _llama3_rope(cfg: Any) -> np.ndarray:
    """llama.cpp's rope_freqs: the divisor of each rope frequency (transformers' values)."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    inv, _ = ROPE_INIT_FUNCTIONS["llama3"](cfg, "cpu")
    d = cfg.head_dim
    base = cfg.rope_parameters["rope_theta"] ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    return (base / inv.double().numpy()).astype(np.float32)


def _common(wide: bool, **kw: Any) -> dict[str, Any]:
    """Config fields every family shares: width 64 (4 x 16 query heads, 2 kv heads, FFN 128),
    or with `wide` 256 (4 x 64, 2 kv heads, FFN 512) so that every 2-D weight's rows are whole
    256-weight K-quant blocks."""
    return dict(vocab_size=kw.pop("vocab_size"), hidden_size=256 if wide else 64,
                intermediate_size=512 if wide else 128,
                num_hidden_layers=kw.pop("layers", 2), num_attention_heads=4,
                num_key_value_heads=2, head_dim=_head_dim(wide), max_position_embeddings=256,
                rms_norm_eps=1e-5, **kw)


def _head_dim(wide: bool) -> int:
    return 64 if wide else 16


def is_wide(qtype: str) -> bool:
    """Whether a type's fixtures take the wide shape (the K-quants' 256-weight blocks)."""
    return qtype in KQUANT_TYPES and qtype != "IQ4_NL"


# family -> (GGUF architecture, tokenizer maker, transformers config maker); a config maker
# takes the vocabulary size and whether the shape is the wide one.
ConfigMaker = Callable[[int, bool], Any]
FAMILIES: dict[str, tuple[str, Callable[[], dict[str, Any]], ConfigMaker]] = {}


def _family(name: str, arch: str, vocab: Callable[[], dict[str, Any]]) -> Callable[..., Any]:
    def register(fn: ConfigMaker) -> ConfigMaker:
        FAMILIES[name] = (arch, vocab, fn)
        return fn
    return register


@_family("llama", "llama", lambda: gpt2_vocab("llama-bpe"))
def _llama(v: int, wide: bool) -> Any:
    from transformers import LlamaConfig
    return LlamaConfig(**_common(
        wide, vocab_size=v, tie_word_embeddings=True, rope_parameters={
            "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32}))


@_family("mistral", "llama", lambda: spm_vocab(gemma=False))
def _mistral(v: int, wide: bool) -> Any:
    from transformers import MistralConfig
    return MistralConfig(**_common(wide, vocab_size=v, sliding_window=8,
                                   tie_word_embeddings=False, rope_theta=10000.0))


@_family("qwen2", "qwen2", lambda: gpt2_vocab("qwen2"))
def _qwen2(v: int, wide: bool) -> Any:
    from transformers import Qwen2Config
    return Qwen2Config(**_common(wide, vocab_size=v, tie_word_embeddings=False,
                                 rope_theta=1000000.0))


@_family("qwen3", "qwen3", lambda: gpt2_vocab("qwen2"))
def _qwen3(v: int, wide: bool) -> Any:
    from transformers import Qwen3Config
    return Qwen3Config(**_common(wide, vocab_size=v, tie_word_embeddings=True,
                                 rope_theta=1000000.0))


@_family("gemma2", "gemma2", lambda: spm_vocab(gemma=True))
def _gemma2(v: int, wide: bool) -> Any:
    from transformers import Gemma2Config
    return Gemma2Config(**_common(wide, vocab_size=v, layers=4,
                                  query_pre_attn_scalar=_head_dim(wide), sliding_window=8,
                                  attn_logit_softcapping=1.0, final_logit_softcapping=5.0,
                                  hidden_activation="gelu_pytorch_tanh"))


@_family("gemma3", "gemma3", lambda: spm_vocab(gemma=True))
def _gemma3(v: int, wide: bool) -> Any:
    from transformers import Gemma3TextConfig
    return Gemma3TextConfig(**_common(
        wide, vocab_size=v, layers=4, query_pre_attn_scalar=_head_dim(wide), sliding_window=8,
        layer_types=["sliding_attention", "full_attention"] * 2,
        hidden_activation="gelu_pytorch_tanh",
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default",
                                               "rope_theta": 10000.0}}))


@_family("phi3", "phi3", lambda: gpt2_vocab("smollm"))
def _phi3(v: int, wide: bool) -> Any:
    from transformers import Phi3Config
    # Phi-3-mini-4k's own window (2047 keys: past these sequences, so it changes no value);
    # llama.cpp refuses a phi3 file without a positive sliding_window
    kw = _common(wide, vocab_size=v, tie_word_embeddings=False, rope_theta=10000.0,
                 sliding_window=2047, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    kw.pop("head_dim")
    return Phi3Config(**kw)


LONGROPE_ORIGINAL = 64   # the phi3-longrope fixture's original context (4 prompts + 32 tokens
#                          fit: transformers keeps the short factors up to it)


@_family("phi3-longrope", "phi3", lambda: gpt2_vocab("smollm"))
def _phi3_longrope(v: int, wide: bool) -> Any:
    """Phi-3-mini-128k / Phi-3.5-mini's LongRoPE at small scale: original context 64 of 256
    (attention factor sqrt(1 + ln 4 / ln 64)), short and long factors drawn in [1, 4]."""
    from transformers import Phi3Config
    kw = _common(wide, vocab_size=v, tie_word_embeddings=False, sliding_window=None,
                 pad_token_id=0, bos_token_id=1, eos_token_id=2,
                 original_max_position_embeddings=LONGROPE_ORIGINAL)
    half = kw.pop("head_dim") // 2
    rng = np.random.default_rng(31)
    kw["rope_parameters"] = {"rope_type": "longrope", "rope_theta": 10000.0,
                             "short_factor": [float(f) for f in rng.uniform(1, 4, half)],
                             "long_factor": [float(f) for f in rng.uniform(1, 4, half)]}
    return Phi3Config(**kw)


def make_model(family: str, seed: int = 0, wide: bool = False) -> tuple[Any, dict[str, Any]]:
    """(transformers model with seeded random weights, tokenizer metadata) of a family, in the
    width-64 shape or the wide one (`_common`)."""
    import torch
    from transformers import AutoModelForCausalLM
    _, vocab_fn, config_fn = FAMILIES[family]
    vocab = vocab_fn()
    cfg = config_fn(len(vocab["tokens"]), wide)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):     # norms near 1 (Gemma's: near 0, it adds 1)
                base = 0.0 if family.startswith("gemma") else 1.0
                p.copy_(base + 0.1 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / math.sqrt(p.shape[-1]))
    return model, vocab


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's LlamaModel.permute: HF's half-split rope rows -> interleaved pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2) \
        .reshape(w.shape)


def _tensors(family: str, model: Any) -> dict[str, np.ndarray]:
    """GGUF name -> float32 array, transformed as llama.cpp's converter does."""
    import gguf
    arch = FAMILIES[family][0]
    cfg = model.config
    tmap = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.upper()], cfg.num_hidden_layers)
    out = {}
    for hf_name, t in model.state_dict().items():
        if hf_name == "lm_head.weight" and cfg.tie_word_embeddings:
            continue
        name = tmap.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if name is None:
            raise ValueError(f"no GGUF name for {hf_name}")
        w = t.detach().numpy().astype(np.float32)
        if arch == "llama" and hf_name.endswith("q_proj.weight"):
            w = _permute(w, cfg.num_attention_heads)
        if arch == "llama" and hf_name.endswith("k_proj.weight"):
            w = _permute(w, cfg.num_key_value_heads)
        if family.startswith("gemma") and name.endswith("norm.weight"):
            w = w + 1.0
        out[name] = w
    rope = getattr(cfg, "rope_parameters", None) or {}
    if rope.get("rope_type") == "llama3":
        out["rope_freqs.weight"] = _llama3_rope(cfg)
    if rope.get("rope_type") == "longrope":            # llama.cpp's Phi3MiniModel
        out["rope_factors_long.weight"] = np.array(rope["long_factor"], np.float32)
        out["rope_factors_short.weight"] = np.array(rope["short_factor"], np.float32)
    return out


def write_gguf(family: str, model: Any, vocab: dict[str, Any], qtype: str, path: Path) -> None:
    """Write the model to `path` with weights (2-D tensors) in qtype, the rest F32."""
    write_file(FAMILIES[family][0], f"webrlx-{family}-fixture", model.config, vocab,
               _tensors(family, model).items(), qtype, path)


def write_file(arch: str, name: str, cfg: Any, vocab: dict[str, Any],
               tensors: Iterable[tuple[str, np.ndarray]], qtype: str, path: Path) -> None:
    """Write a GGUF of architecture `arch` from a transformers-style config (its attributes
    only), tokenizer metadata and (GGUF name, float32 array) pairs, taken one at a time:
    2-D tensors in qtype (F16, Q8_0, ...: what the gguf package quantizes; the K-quants and
    IQ4 through tools/kquant.py, whose rows must be whole blocks), the rest F32."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    rope = getattr(cfg, "rope_parameters", None) or {}
    theta = rope.get("full_attention", rope).get("rope_theta", 10000.0)
    w.add_rope_freq_base(float(theta))
    if rope.get("rope_type") == "longrope":            # as llama.cpp's Phi3MiniModel writes it
        original = rope["original_max_position_embeddings"]
        scale = cfg.max_position_embeddings / original
        w.add_rope_scaling_orig_ctx_len(original)
        w.add_rope_scaling_attn_factors(
            math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1.0 else 1.0)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_vocab_size(cfg.vocab_size)
    if getattr(cfg, "sliding_window", None):
        w.add_sliding_window(cfg.sliding_window)
    if getattr(cfg, "layer_types", None) and arch.startswith("gemma"):
        w.add_sliding_window_pattern([t == "sliding_attention" for t in cfg.layer_types])
    if getattr(cfg, "attn_logit_softcapping", None):
        w.add_attn_logit_softcapping(cfg.attn_logit_softcapping)
    if getattr(cfg, "final_logit_softcapping", None):
        w.add_final_logit_softcapping(cfg.final_logit_softcapping)
    w.add_tokenizer_model(vocab["model"])
    w.add_tokenizer_pre(vocab["pre"])
    w.add_token_list(vocab["tokens"])
    w.add_token_types(vocab["types"])
    if "merges" in vocab:
        w.add_token_merges(vocab["merges"])
    if "scores" in vocab:
        w.add_token_scores(vocab["scores"])
    w.add_bos_token_id(vocab["bos"])
    w.add_eos_token_id(vocab["eos"])
    w.add_unk_token_id(vocab["unk"])
    w.add_add_bos_token(vocab["add_bos"])
    if vocab["template"]:
        w.add_chat_template(vocab["template"])
    for tname, arr in tensors:
        if arr.ndim == 2 and qtype != "F32":
            if qtype in KQUANT_TYPES:
                raw = _kquant().quantize(arr, qtype)
            else:
                raw = gguf.quants.quantize(arr, Q[qtype])
            w.add_tensor(tname, raw, raw_dtype=Q[qtype])
        else:
            w.add_tensor(tname, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def transformers_model(family: str, path: Path, wide: bool = False,
                       long_factors: bool = False) -> Any:
    """transformers' model of the GGUF at `path`: its weights read and dequantized by
    transformers' GGUF loader, under the family's full config (a GGUF does not carry every
    option: soft-caps, layer types, Llama 3 rope scaling); `wide` as the file was made.
    transformers reads a llama-arch file as Llama, so the Mistral fixture's weights move into
    a Mistral model (its window).

    LongRoPE (phi3-longrope): transformers' GGUF reader reads neither the factor tensors nor
    the rope.scaling keys (its phi3 table maps none of them), so the config's short and long
    factors are set to the file's rope_factors_short / _long (its attention factor it derives
    itself from max_position_embeddings / original_max_position_embeddings, as llama.cpp's
    converter does). transformers picks the long factors per forward pass only once the
    sequence passes the original context; `long_factors` makes its short factors the long
    ones too, so that it rotates every position by the long factors, as llama.cpp (and
    webrlx) do for a whole run whose context exceeds the original one."""
    import gguf
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig
    config_fn = FAMILIES[family][2]
    reader = gguf.GGUFReader(str(path))
    cfg = config_fn(len(reader.fields["tokenizer.ggml.tokens"].data), wide)
    if cfg.rope_parameters.get("rope_type") == "longrope":
        held = {t.name: [float(f) for f in t.data] for t in reader.tensors
                if t.name.startswith("rope_factors_")}
        cfg.rope_parameters["long_factor"] = held["rope_factors_long.weight"]
        cfg.rope_parameters["short_factor"] = held["rope_factors_short.weight"]
        if long_factors:
            cfg.rope_parameters["short_factor"] = held["rope_factors_long.weight"]
    elif long_factors:
        raise ValueError(f"transformers_model: {family} has no LongRoPE factors")
    load_cfg = cfg
    if family == "mistral":
        load_cfg = LlamaConfig(**_common(wide, vocab_size=cfg.vocab_size,
                                         tie_word_embeddings=False, rope_theta=10000.0))
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                 config=load_cfg, dtype=torch.float32)
    if family == "mistral":
        target = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        target.load_state_dict(model.state_dict())
        model = target
    return model.eval()


FIXTURES = ROOT / "build" / "llm_fixtures"


def fixture(family: str, qtype: str, out: Path = FIXTURES) -> Path:
    """out/<family>-<qtype>.gguf, written on first use (the tests' fixtures)."""
    path = out / f"{family}-{qtype.lower()}.gguf"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        write_gguf(family, *make_model(family, wide=is_wide(qtype.upper())), qtype.upper(),
                   path)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=str(FIXTURES))
    ap.add_argument("--types", default="F32,Q8_0")
    ap.add_argument("--families", default=",".join(FAMILIES))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for family in args.families.split(","):
        for qtype in args.types.split(","):
            model, vocab = make_model(family, wide=is_wide(qtype))
            path = out / f"{family}-{qtype.lower()}.gguf"
            write_gguf(family, model, vocab, qtype, path)
            print(f"{path} {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
