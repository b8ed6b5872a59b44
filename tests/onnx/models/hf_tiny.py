"""Tiny transformers models from configs with random weights (seeded), exported with torch.onnx
(opset 17, eager attention): a ViT, CLIP's text and vision towers (one model, two outputs) and
a Whisper encoder. Run: `python -m tests.onnx.models.hf_tiny` -> build/onnx/{vit,clip,
whisper_encoder}.onnx."""
from __future__ import annotations

from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[3] / "build" / "onnx"


def _export(model: Any, args: tuple, out: Path, inputs: list[str], outputs: list[str],
            dynamic: dict[str, dict[int, str]]) -> Path:
    import torch
    out.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(model.eval(), args, str(out), input_names=inputs,
                          output_names=outputs, dynamic_axes=dynamic, opset_version=17,
                          dynamo=False)
    return out


def vit(out: Path = OUT / "vit.onnx") -> Path:
    """ViT: 32x32 images, 8x8 patches, 2 layers of 64 wide, 4 heads -> last_hidden_state."""
    if out.exists():
        return out
    import torch
    from transformers import ViTConfig, ViTModel
    torch.manual_seed(0)
    cfg = ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=128, attn_implementation="eager")
    return export_vit(ViTModel(cfg, add_pooling_layer=False), out)


def export_vit(model: Any, out: Path) -> Path:
    """Export a ViTModel (built with eager attention) as pixel_values (dynamic batch) ->
    last_hidden_state; bench/device_onnx_vit.py exports its 224x224 ViT with this too."""
    import torch

    class Wrap(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, pixel_values):  # noqa: ANN001, ANN201
            return self.m(pixel_values=pixel_values).last_hidden_state
    cfg = model.config
    example = torch.randn(2, cfg.num_channels, cfg.image_size, cfg.image_size)
    return _export(Wrap(), (example,), out, ["pixel_values"], ["last_hidden_state"],
                   {"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"}})


def clip(out: Path = OUT / "clip.onnx") -> Path:
    """CLIP text (causal + padding mask) and vision towers -> text_embeds, image_embeds."""
    if out.exists():
        return out
    import torch
    from transformers import CLIPConfig, CLIPModel
    torch.manual_seed(0)
    cfg = CLIPConfig(text_config=dict(vocab_size=100, hidden_size=64, intermediate_size=128,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      max_position_embeddings=32),
                     vision_config=dict(image_size=32, patch_size=8, hidden_size=64,
                                        intermediate_size=128, num_hidden_layers=2,
                                        num_attention_heads=4),
                     projection_dim=32, attn_implementation="eager")
    model = CLIPModel(cfg)

    class Wrap(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, pixel_values):  # noqa: ANN001, ANN201
            o = self.m(input_ids=input_ids, attention_mask=attention_mask,
                       pixel_values=pixel_values)
            return o.text_embeds, o.image_embeds
    ids = torch.randint(1, 99, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    return _export(Wrap(), (ids, mask, torch.randn(2, 3, 32, 32)), out,
                   ["input_ids", "attention_mask", "pixel_values"],
                   ["text_embeds", "image_embeds"],
                   {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                    "pixel_values": {0: "images"}})


def whisper_encoder(out: Path = OUT / "whisper_encoder.onnx") -> Path:
    """Whisper encoder: 80 mel bins x 3000 frames -> 1500 positions of 64 (2 layers)."""
    if out.exists():
        return out
    import torch
    from transformers import WhisperConfig, WhisperModel
    torch.manual_seed(0)
    cfg = WhisperConfig(d_model=64, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=4, decoder_attention_heads=4,
                        encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=80,
                        attn_implementation="eager")
    enc = WhisperModel(cfg).get_encoder()

    class Wrap(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = enc

        def forward(self, input_features):  # noqa: ANN001, ANN201
            return self.m(input_features=input_features).last_hidden_state
    return _export(Wrap(), (torch.randn(1, 80, 3000),), out, ["input_features"],
                   ["last_hidden_state"], {"input_features": {0: "batch"},
                                           "last_hidden_state": {0: "batch"}})


if __name__ == "__main__":
    print(vit(), clip(), whisper_encoder())
