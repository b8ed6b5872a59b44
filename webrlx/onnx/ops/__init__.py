"""The ONNX op rows, one module per family; importing this package fills ONNX_OPS."""
from . import control, elementwise, nn, reduce, tensor  # noqa: F401  (each registers rows)
from .registry import ONNX_OPS, OpRow, lookup, op

__all__ = ["ONNX_OPS", "OpRow", "lookup", "op"]
