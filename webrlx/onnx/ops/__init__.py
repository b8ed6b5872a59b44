"""The ONNX op rows, one module per family (elementwise.py, tensor.py, ...). Every module of
this package is imported here, so a new family file registers its rows without editing a
shared list."""
import importlib
import pkgutil

from .registry import ONNX_OPS, OpRow, lookup, op

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if _module not in ("registry", "common"):
        importlib.import_module(f"{__name__}.{_module}")

__all__ = ["ONNX_OPS", "OpRow", "lookup", "op"]
