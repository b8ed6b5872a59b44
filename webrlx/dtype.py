"""DType: the five element types of webrlx, their numpy twins, WGSL names and storage sizes;
how values of each are laid out on the device (storage_np) and in uniform words (word)."""
from __future__ import annotations

import struct
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
        name = np.dtype(x).name  # type: ignore[call-overload]  # any object: numpy decides
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


def storage_np(d: DType, f16: bool) -> np.dtype:
    """numpy dtype of d's bytes on the device (bool as u32; f16 as f32 without shader-f16)."""
    if d == bool_:
        return np.dtype(np.uint32)
    if d == float16 and not f16:
        return np.dtype(np.float32)
    return d.np_dtype


def f32_bits(x: float) -> int:
    """The u32 bit pattern of x as an f32."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def word(value: float | int | bool, wgsl_type: str) -> int:
    """The u32 uniform word of a scalar declared as f32, i32, u32 or bool in WGSL.

    Raises ValueError when the value does not fit the declared type.
    """
    if wgsl_type == "f32":
        return f32_bits(float(value))
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{value!r} is not an integer, but the field is {wgsl_type}")
    v = int(value)
    if wgsl_type == "u32" or wgsl_type == "bool":
        if not 0 <= v < 1 << 32:
            raise ValueError(f"{v} does not fit a u32")
        return v
    if wgsl_type == "i32":
        if not -(1 << 31) <= v < 1 << 31:
            raise ValueError(f"{v} does not fit an i32")
        return v & 0xFFFFFFFF
    raise ValueError(f"uniform fields must be f32, i32 or u32, not {wgsl_type}")
