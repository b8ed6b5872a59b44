"""MiniLM's ONNX export (tests/onnx/export_minilm.py) optimized by onnxruntime's transformer
optimizer (model_type 'bert': com.microsoft Attention, SkipLayerNormalization, BiasGelu /
FastGelu, EmbedLayerNormalization) and dynamically quantized to int8 (quantize_dynamic).
Run: `python -m tests.onnx.models.minilm_variants` -> build/onnx/minilm_{opt,int8}.onnx."""
from __future__ import annotations

from pathlib import Path

from tests.onnx.export_minilm import DEFAULT_OUT, export

OUT = DEFAULT_OUT.parent


def base() -> Path:
    """The plain export (made if missing)."""
    return DEFAULT_OUT if DEFAULT_OUT.exists() else export()


def optimized(out: Path = OUT / "minilm_opt.onnx") -> Path:
    """onnxruntime.transformers.optimizer over the export (fusions only, float32)."""
    if out.exists():
        return out
    from onnxruntime.transformers import optimizer
    model = optimizer.optimize_model(str(base()), model_type="bert", num_heads=12,
                                     hidden_size=384, opt_level=0)
    model.save_model_to_file(str(out))
    return out


def int8(out: Path = OUT / "minilm_int8.onnx") -> Path:
    """quantize_dynamic of the export: MatMulInteger / DynamicQuantizeLinear, int8 weights."""
    if out.exists():
        return out
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(str(base()), str(out), weight_type=QuantType.QInt8)
    return out


if __name__ == "__main__":
    print(optimized(), int8())
