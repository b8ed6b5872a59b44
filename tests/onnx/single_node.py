"""One-node ONNX models for the row tests: the op over fed inputs (None: an omitted optional
input), its outputs typed by onnx's shape inference."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper


def single_node_model(op: str, inputs: list[np.ndarray | None], attrs: dict, outs: int = 1,
                      opset: int = 21) -> tuple[bytes, dict[str, np.ndarray]]:
    """(serialized model, feeds) of op(inputs, **attrs) with outs outputs named y0, y1, ..."""
    names = [f"x{i}" if a is not None else "" for i, a in enumerate(inputs)]
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for n, a in zip(names, inputs) if a is not None]
    while names and not names[-1]:          # trailing omitted inputs are left out entirely
        names.pop()
    node = helper.make_node(op, names, [f"y{i}" for i in range(outs)], **attrs)
    ys = [helper.make_tensor_value_info(f"y{i}", 0, None) for i in range(outs)]
    g = helper.make_graph([node], "g", vis, ys)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)     # the outputs' types
    return m.SerializeToString(), {n: a for n, a in zip(names, inputs) if a is not None}
