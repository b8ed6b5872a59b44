"""DType: the five element types of webrlx, their numpy twins, WGSL names and storage sizes."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    np_dtype: np.dtype
    wgsl: str          # WGSL element type of a storage buffer holding this dtype
    itemsize: int      # bytes per element on the GPU (bool is stored as u32)

    @property
    def is_float(self) -> bool:
        return self.name in ("float32", "float16")

    @property
    def is_int(self) -> bool:
        return self.name in ("int32", "uint32")

    def __repr__(self) -> str:
        return self.name


float32 = DType("float32", np.dtype(np.float32), "f32", 4)
float16 = DType("float16", np.dtype(np.float16), "f16", 2)
int32 = DType("int32", np.dtype(np.int32), "i32", 4)
uint32 = DType("uint32", np.dtype(np.uint32), "u32", 4)
bool_ = DType("bool", np.dtype(np.bool_), "u32", 4)

DTYPES = {d.name: d for d in (float32, float16, int32, uint32, bool_)}
_ALIASES = {"f32": "float32", "f16": "float16", "half": "float16", "float": "float32",
            "i32": "int32", "u32": "uint32", "bool_": "bool"}


def as_dtype(x: object) -> DType:
    """Return the DType named by a DType, a string, a numpy dtype or a numpy scalar type."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        name = _ALIASES.get(x, x)
        if name in DTYPES:
            return DTYPES[name]
        raise TypeError(f"dtype: unknown dtype {x!r}; expected one of {sorted(DTYPES)}")
    try:
        name = np.dtype(x).name  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"dtype: cannot interpret {x!r} as a dtype") from None
    if name not in DTYPES:
        raise TypeError(f"dtype: numpy dtype {name} is not supported; "
                        f"use one of {sorted(DTYPES)} (cast float64 to float32)")
    return DTYPES[name]


def result_dtype(a: DType, b: DType) -> DType:
    """Return the dtype of a binary op on a and b (numpy-like promotion within our 5 types)."""
    if a == b:
        return a
    order = [bool_, uint32, int32, float16, float32]
    if {a, b} == {uint32, int32}:
        return int32
    return max(a, b, key=order.index)
