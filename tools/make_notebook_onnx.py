"""Write notebooks/tiny_mlp.onnx, the model notebooks/onnx_models.ipynb runs where torch is
absent (JupyterLite): the graph the legacy torch.onnx exporter makes of
`nn.Sequential(Linear(16, 32), ReLU(), Linear(32, 4), Softmax(-1))` (Gemm with transB=1, the
same initializer names), with seeded weights. About 3 KB.

    python tools/make_notebook_onnx.py [--out notebooks/tiny_mlp.onnx]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parents[1] / "notebooks" / "tiny_mlp.onnx"
SIZES = (16, 32, 4)
OPSET = 17


def make_model(seed: int = 0) -> onnx.ModelProto:
    """The MLP with weights drawn as torch's Linear draws them: U(-1/sqrt(in), 1/sqrt(in))."""
    rng = np.random.default_rng(seed)
    inits = []
    for layer, (n_in, n_out) in zip((0, 2), zip(SIZES, SIZES[1:])):
        bound = 1.0 / np.sqrt(n_in)
        inits += [numpy_helper.from_array(rng.uniform(-bound, bound, (n_out, n_in))
                                          .astype(np.float32), f"{layer}.weight"),
                  numpy_helper.from_array(rng.uniform(-bound, bound, n_out)
                                          .astype(np.float32), f"{layer}.bias")]
    nodes = [
        helper.make_node("Gemm", ["x", "0.weight", "0.bias"], ["h"], alpha=1.0, beta=1.0,
                         transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "2.weight", "2.bias"], ["logits"], alpha=1.0, beta=1.0,
                         transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "tiny_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", SIZES[0]])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", SIZES[-1]])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="webrlx tools/make_notebook_onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    onnx.save(make_model(), args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
