"""A tiny Whisper decoder with past key/values, exported the way optimum (and so the Hub's
onnx-community / transformers.js files) splits it: `decoder_model.onnx` takes the prompt and
the encoder's hidden states and returns logits plus `present.N.{decoder,encoder}.{key,value}`;
`decoder_with_past_model.onnx` takes one new token and `past_key_values.N.{decoder,encoder}.
{key,value}` and returns logits plus `present.N.decoder.{key,value}` (the cross-attention keys
and values never change, so they are fed back from the first model's outputs). Random weights
from a transformers WhisperConfig (seeded; hf_tiny.whisper_encoder's sizes, so its output
feeds it), torch.onnx's TorchScript exporter, opset 17, eager attention, dynamic batch,
sequence and past length.
merged() joins the pair into optimum's decoder_model_merged (an If on use_cache_branch).
Run: `python -m tests.onnx.models.whisper_decoder` -> build/onnx/whisper_decoder{,_with_past,
_merged}.onnx.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parents[3] / "build" / "onnx"
LAYERS = 2
# init_std 0.5: the default 0.02 greedy-decodes one token over and over, 0.5 32 different ones
CONFIG: dict[str, Any] = dict(d_model=64, encoder_layers=2, decoder_layers=LAYERS,
                              encoder_attention_heads=4, decoder_attention_heads=4,
                              encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=80,
                              init_std=0.5)
# <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>: Whisper's usual prompt
PROMPT = np.array([[50258, 50259, 50359, 50363]], np.int64)
KINDS = [(kind, part) for kind in ("decoder", "encoder") for part in ("key", "value")]


def past_names(prefix: str, kinds: list[tuple[str, str]] = KINDS) -> list[str]:
    """`prefix.N.kind.part` for every layer N, in the order the models list them."""
    return [f"{prefix}.{i}.{k}.{p}" for i in range(LAYERS) for k, p in kinds]


def _model() -> Any:
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    torch.manual_seed(0)
    cfg = WhisperConfig(**CONFIG, attn_implementation="eager")
    return WhisperForConditionalGeneration(cfg).eval()


def _wrap(model: Any, with_past: bool) -> Any:
    """The decoder as a module of flat tensors: (ids, encoder states | past...) -> (logits,
    present...)."""
    import torch
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, *rest):  # noqa: ANN001, ANN002, ANN201
            if with_past:
                layers = [rest[4 * i:4 * i + 4] for i in range(LAYERS)]
                cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
                for i, (sk, sv, ck, cv) in enumerate(layers):
                    cache.self_attention_cache.update(sk, sv, i)
                    cache.cross_attention_cache.update(ck, cv, i)
                    cache.is_updated[i] = True
                # any non-None states make the layers run cross-attention; with is_updated
                # set they read its keys/values from the cache and never use these
                ck = layers[0][2]
                enc = ck.transpose(1, 2).reshape(ck.shape[0], ck.shape[2], -1)
            else:
                cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
                enc = rest[0]
            out = self.m.model.decoder(input_ids=input_ids, encoder_hidden_states=enc,
                                       past_key_values=cache, use_cache=True)
            logits = self.m.proj_out(out.last_hidden_state)
            present: list[torch.Tensor] = []
            for i in range(LAYERS):
                sa, ca = cache.self_attention_cache.layers[i], cache.cross_attention_cache.layers[i]
                present += [sa.keys, sa.values]
                if not with_past:
                    present += [ca.keys, ca.values]
            return (logits, *present)
    return Decoder()


def export(out_dir: Path = OUT) -> tuple[Path, Path]:
    """Write (decoder_model, decoder_with_past_model) and return their paths."""
    plain, past = out_dir / "whisper_decoder.onnx", out_dir / "whisper_decoder_with_past.onnx"
    if plain.exists() and past.exists():
        return plain, past
    import torch
    out_dir.mkdir(parents=True, exist_ok=True)
    model = _model()
    heads = CONFIG["decoder_attention_heads"]
    d = CONFIG["d_model"] // heads
    ids = torch.randint(0, model.config.vocab_size, (1, 4))
    enc = torch.randn(1, 1500, CONFIG["d_model"])
    present_all = past_names("present")
    seq_axes = {"decoder": "total_sequence_length", "encoder": "encoder_sequence_length"}
    dyn: dict[str, dict[int, str]] = {
        "input_ids": {0: "batch", 1: "sequence_length"},
        "encoder_hidden_states": {0: "batch", 1: "encoder_sequence_length"},
        "logits": {0: "batch", 1: "sequence_length"}}
    for n in present_all:
        dyn[n] = {0: "batch", 2: seq_axes[n.split(".")[2]]}
    with torch.no_grad():
        torch.onnx.export(_wrap(model, False), (ids, enc), str(plain),
                          input_names=["input_ids", "encoder_hidden_states"],
                          output_names=["logits", *present_all], dynamic_axes=dyn,
                          opset_version=17, dynamo=False)
        past_in = past_names("past_key_values")
        present_self = past_names("present", KINDS[:2])
        feeds = [torch.randn(1, heads, 5 if "decoder" in n else 1500, d) for n in past_in]
        dyn_past: dict[str, dict[int, str]] = {
            "input_ids": {0: "batch"}, "logits": {0: "batch"}}
        for n in past_in:
            kind = n.split(".")[2]
            dyn_past[n] = {0: "batch", 2: "past_sequence_length" if kind == "decoder"
                           else "encoder_sequence_length"}
        for n in present_self:
            dyn_past[n] = {0: "batch", 2: "past_sequence_length + 1"}
        torch.onnx.export(_wrap(model, True), (ids[:, :1], *feeds), str(past),
                          input_names=["input_ids", *past_in],
                          output_names=["logits", *present_self], dynamic_axes=dyn_past,
                          opset_version=17, dynamo=False)
    return plain, past


def merged(out: Path = OUT / "whisper_decoder_merged.onnx") -> Path:
    """Write decoder_model_merged (what transformers.js loads): one If on the bool input
    use_cache_branch, its else branch decoder_model's graph, its then branch
    decoder_with_past_model's (passing the encoder's past through as present.N.encoder.*), the
    inputs of both; the first step feeds past tensors of length 0. Built with onnx.helper from
    the pair as optimum's merge_decoders builds it, less its sharing of equal initializers."""
    if out.exists():
        return out
    import onnx
    from onnx import TensorProto, helper
    plain, past = (onnx.load(str(p)) for p in export(out.parent))
    names = [o.name for o in plain.graph.output]

    def branch(m: Any, prefix: str, extra: list[Any]) -> tuple[Any, list[Any]]:
        g = m.graph
        inits = {t.name for t in g.initializer}
        outer = {i.name for i in g.input if i.name not in inits}

        def ren(n: str) -> str:
            return n if not n or n in outer else prefix + n
        for node in g.node:
            node.input[:] = [ren(x) for x in node.input]
            node.output[:] = [ren(x) for x in node.output]
            node.name = prefix + node.name
        for t in g.initializer:
            t.name = prefix + t.name
        made = {o.name: ren(o.name) for o in g.output}
        for n in names:
            if n not in made:             # the cross-attention cache, unchanged
                made[n] = prefix + n
                extra.append(helper.make_node("Identity", [n.replace(
                    "present", "past_key_values")], [made[n]]))
        outs = [value(made[n], n) for n in names]
        return helper.make_graph([*g.node, *extra], prefix.strip("/"), [], outs), \
            list(g.initializer)

    def value(name: str, like: str) -> Any:
        dims = ["batch", "sequence_length", plain.graph.output[0].type.tensor_type.shape.dim[
            2].dim_value] if like == "logits" else ["batch", CONFIG["decoder_attention_heads"],
                                                    f"{like}_length", CONFIG["d_model"] //
                                                    CONFIG["decoder_attention_heads"]]
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)
    then, then_inits = branch(past, "with_past/", [])
    other, other_inits = branch(plain, "no_past/", [])
    node = helper.make_node("If", ["use_cache_branch"], names, name="optimum::if",
                            then_branch=then, else_branch=other)
    inputs = [*plain.graph.input, *(i for i in past.graph.input
                                    if i.name.startswith("past_key_values")),
              helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1])]
    graph = helper.make_graph([node], "whisper_decoder_merged", inputs,
                              [value(n, n) for n in names], then_inits + other_inits)
    model = helper.make_model(graph, opset_imports=plain.opset_import)
    model.ir_version = plain.ir_version
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
    return out


if __name__ == "__main__":
    print(*export(), merged())
