"""Helpers the op families share: lifting inputs, ONNX element types as webrlx dtypes, axes."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...tensor import Tensor
from ..context import Context, NeedsHostValue, OnnxImportError, device_dtype
from ..tensors import ELEM_TYPES


def lift(ctx: Context, *xs: Any) -> list[Tensor]:
    """Inputs as graph Tensors (host arrays become constants or params)."""
    return [ctx.tensor(x) for x in xs]


def onnx_np_dtype(elem_type: int) -> np.dtype:
    """The numpy dtype of an ONNX element type, or OnnxImportError when it has none."""
    np_dtype = ELEM_TYPES.get(elem_type, ("", None))[1]
    if np_dtype is None or elem_type == 16:
        name = ELEM_TYPES.get(elem_type, (str(elem_type),))[0]
        raise OnnxImportError(f"element type {name} is not supported by webrlx.onnx")
    return np.dtype(np_dtype)


def onnx_device_dtype(elem_type: int) -> str:
    """The webrlx dtype holding ONNX element type elem_type (bfloat16 as float32)."""
    if elem_type == 16:
        return "float32"
    return device_dtype(onnx_np_dtype(elem_type))


def static_shape(ctx: Context, x: Any, what: str = "shape") -> tuple[int, ...]:
    """x's shape as ints; symbolic dims raise NeedsHostValue (the session binds them)."""
    shape = tuple(x.shape)
    if not all(isinstance(d, int) for d in shape):
        raise NeedsHostValue(ctx.g.inputs_read_by([x.id]) if isinstance(x, Tensor) else set(),
                             f"{ctx.node_name}: the {what} of a tensor with symbolic dims "
                             f"{shape}")
    return tuple(int(d) for d in shape)


def norm_axis(axis: int, rank: int) -> int:
    """A possibly negative axis as an index in [0, rank)."""
    if not -rank <= axis < max(rank, 1):
        raise OnnxImportError(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def same_dtype(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """Cast b to a's dtype when they differ (ONNX ops take one type; int64 vs int32 lifts)."""
    return a, (b if b.dtype == a.dtype else b.cast(a.dtype))
