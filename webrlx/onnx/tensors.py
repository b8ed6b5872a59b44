"""TensorProto: ONNX element types, and the decoding of a tensor's data (raw_data or the typed
fields, inline or external) into a numpy array; raw_data is viewed without a copy when aligned."""
from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .wire import FIXED32, FIXED64, LENGTH, Buffer, signed64

# ONNX TensorProto.DataType -> (name, numpy dtype of the decoded array)
ELEM_TYPES: dict[int, tuple[str, Any]] = {
    1: ("float", np.float32), 2: ("uint8", np.uint8), 3: ("int8", np.int8),
    4: ("uint16", np.uint16), 5: ("int16", np.int16), 6: ("int32", np.int32),
    7: ("int64", np.int64), 8: ("string", None), 9: ("bool", np.bool_),
    10: ("float16", np.float16), 11: ("double", np.float64), 12: ("uint32", np.uint32),
    13: ("uint64", np.uint64), 14: ("complex64", None), 15: ("complex128", None),
    16: ("bfloat16", np.float32),          # decoded to float32 (numpy has no bfloat16)
    # 8/4/2-bit types decode to arrays of their values: float32 (floats), int8/uint8 (ints)
    17: ("float8e4m3fn", np.float32), 18: ("float8e4m3fnuz", np.float32),
    19: ("float8e5m2", np.float32), 20: ("float8e5m2fnuz", np.float32),
    21: ("uint4", np.uint8), 22: ("int4", np.int8), 23: ("float4e2m1", np.float32),
    24: ("float8e8m0", np.float32), 25: ("uint2", np.uint8), 26: ("int2", np.int8),
}
# (exponent bits, mantissa bits, bias, special codes) of the small float types
SMALL_FLOATS: dict[int, tuple[int, int, int, str]] = {
    17: (4, 3, 7, "fn"), 18: (4, 3, 8, "fnuz"), 19: (5, 2, 15, "ieee"),
    20: (5, 2, 16, "fnuz"), 23: (2, 1, 1, "none"), 24: (8, 0, 127, "e8m0"),
}
_BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}          # sub-byte types, packed low bits first
NP_TO_ELEM = {np.dtype(v): k for k, (_, v) in ELEM_TYPES.items()
              if v is not None and k not in (16, 21, 22) and k <= 16}
# element types whose typed values live in int32_data (16-bit ones as raw bits)
_INT32_FIELD = {2, 3, 4, 5, 6, 9, 10, 16, *range(17, 27)}
_BITS16 = {4, 5, 10, 16}


class OnnxDtypeError(TypeError):
    """A tensor has an element type webrlx cannot decode (string, complex, float8, ...)."""


def elem_name(elem_type: int) -> str:
    """ONNX's name of an element type ('float', 'int64', ...)."""
    return ELEM_TYPES.get(elem_type, (f"type{elem_type}", None))[0]


@dataclass
class TensorData:
    """A TensorProto: name, element type, dims and where its data is; `numpy()` decodes it."""

    name: str
    elem_type: int
    dims: tuple[int, ...]
    buf: Buffer | None = field(default=None, repr=False)
    raw: tuple[int, int] | None = field(default=None, repr=False)      # raw_data span
    typed: list[tuple[int, int, int, int, int]] = field(default_factory=list, repr=False)
    external: dict[str, str] = field(default_factory=dict)
    base: Any = field(default=None, repr=False)     # directory or name -> bytes mapping
    has_segment: bool = False

    def numpy(self) -> np.ndarray:
        """Decode the data into an array of dims (raw_data aligned: a read-only view)."""
        name = self.name or "<unnamed>"
        if self.elem_type not in ELEM_TYPES or ELEM_TYPES[self.elem_type][1] is None:
            raise OnnxDtypeError(f"tensor {name!r}: element type {elem_name(self.elem_type)} "
                                 f"is not supported by webrlx.onnx")
        n = math.prod(self.dims)
        if self.external:
            return _finish(self, _load_external(self), n)
        if self.raw is not None:
            assert self.buf is not None
            a, b = self.raw
            return _finish(self, self.buf.data[a:b], n)
        return _from_typed(self, n).reshape(self.dims)


def _finish(t: TensorData, data: Any, n: int) -> np.ndarray:
    """Raw little-endian bytes -> array (sub-byte types unpacked, small floats and bfloat16
    widened)."""
    if t.elem_type in _BITS or t.elem_type in SMALL_FLOATS:
        return _small(t.elem_type, np.frombuffer(data, np.uint8), n).reshape(t.dims)
    if t.elem_type == 16:
        bits = np.frombuffer(bytes(data), np.uint16)
        return (bits.astype(np.uint32) << 16).view(np.float32).reshape(t.dims)
    dtype = np.dtype(ELEM_TYPES[t.elem_type][1]).newbyteorder("<")
    if len(data) != n * dtype.itemsize:
        raise ValueError(f"tensor {t.name!r}: {len(data)} bytes of data for dims {t.dims} "
                         f"({n} x {dtype.itemsize} bytes expected)")
    if isinstance(data, memoryview) and _address(data) % dtype.itemsize:
        data = bytes(data)        # unaligned: copy
    return np.frombuffer(data, dtype).reshape(t.dims)


def _address(view: memoryview) -> int:
    return np.frombuffer(view, np.uint8).ctypes.data if len(view) else 0


def _small(elem_type: int, packed: np.ndarray, n: int) -> np.ndarray:
    """Bytes of a sub-byte or small-float type -> its values (ints, or float32 via a table)."""
    bits = _BITS.get(elem_type, 8)
    per = 8 // bits
    codes = np.empty(packed.size * per, np.uint8)
    for k in range(per):
        codes[k::per] = (packed >> (k * bits)) & ((1 << bits) - 1)
    codes = codes[:n]
    if elem_type in SMALL_FLOATS:
        return small_float_table(elem_type)[codes]
    if elem_type in (22, 26):           # signed: sign-extend from `bits`
        return ((codes.astype(np.int8) << (8 - bits)) >> (8 - bits)).astype(np.int8)
    return codes


def small_float_table(elem_type: int) -> np.ndarray:
    """The float32 value of every code of a small float type (float8*, float4e2m1)."""
    ebits, mbits, bias, special = SMALL_FLOATS[elem_type]
    if special == "e8m0":                     # 2**(code - 127), no sign, no zero; 255: NaN
        return np.append(2.0 ** np.arange(-127.0, 128.0), np.nan).astype(np.float32)
    codes = np.arange(1 << (1 + ebits + mbits), dtype=np.int64)
    sign = np.where(codes >> (ebits + mbits) & 1, -1.0, 1.0)
    e = codes >> mbits & ((1 << ebits) - 1)
    m = codes & ((1 << mbits) - 1)
    frac = m / float(1 << mbits)
    mag = np.where(e == 0, frac * 2.0 ** (1 - bias), (1 + frac) * 2.0 ** (e - bias))
    vals = sign * mag
    top = (1 << (ebits + mbits)) - 1            # all exponent and mantissa bits set
    low = codes & top
    if special == "fn":
        vals[low == top] = np.nan
    elif special == "fnuz":
        vals[codes == 1 << (ebits + mbits)] = np.nan
    elif special == "ieee":
        inf = (e == (1 << ebits) - 1)
        vals[inf] = np.where(m[inf] == 0, sign[inf] * np.inf, np.nan)
    return vals.astype(np.float32)


def _from_typed(t: TensorData, n: int) -> np.ndarray:
    """Decode float_data / int32_data / int64_data / double_data / uint64_data."""
    assert t.buf is not None
    buf, et = t.buf, t.elem_type
    want = {1: 4, 7: 7, 11: 10, 12: 11, 13: 11}.get(et, 5 if et in _INT32_FIELD else -1)
    parts: list[np.ndarray] = []
    for fnum, wire, value, stop, offset in t.typed:
        if fnum != want:
            continue
        if fnum == 4:
            parts.append(buf.packed_fixed(value, stop, "<f4", offset) if wire == LENGTH
                         else np.array([value], np.uint32).view(np.float32))
        elif fnum == 10:
            parts.append(buf.packed_fixed(value, stop, "<f8", offset) if wire == LENGTH
                         else np.array([value], np.uint64).view(np.float64))
        elif wire in (FIXED32, FIXED64):
            raise buf.fail(offset, f"tensor {t.name!r}: field {fnum} must be a varint")
        else:
            vals = buf.packed_varints(value, stop) if wire == LENGTH else [value]
            if fnum == 11:
                parts.append(np.array(vals, np.uint64))
            else:
                parts.append(np.array([signed64(v) for v in vals], np.int64))
    arr = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    np_dtype = ELEM_TYPES[et][1]
    if et in _BITS16:
        bits = arr.astype(np.int64).astype(np.uint16)
        if et == 16:
            return (bits.astype(np.uint32) << 16).view(np.float32)
        return bits.view(np_dtype)
    if et in _BITS or et in SMALL_FLOATS:
        return _small(et, arr.astype(np.int64).astype(np.uint8), n)
    if et == 9:
        return arr.astype(np.int64).astype(np.uint8).astype(np.bool_)
    if arr.size != n:
        raise ValueError(f"tensor {t.name!r}: {arr.size} values for dims {t.dims}")
    return arr.astype(np_dtype)


def external_missing(t: TensorData) -> FileNotFoundError | None:
    """The error naming t's external data file when it is not there (None when it is, or when
    t is stored inline)."""
    if not t.external:
        return None
    loc = t.external.get("location", "")
    if isinstance(t.base, Mapping):
        if loc not in t.base:
            return FileNotFoundError(f"tensor {t.name!r}: external data file {loc!r} is not "
                                     f"among the files given ({sorted(t.base)})")
        return None
    path = os.path.join(t.base or ".", loc)
    if not os.path.isfile(path):
        return FileNotFoundError(f"tensor {t.name!r}: external data file {path!r} is missing")
    return None


def _load_external(t: TensorData) -> Any:
    """Read an external tensor's bytes from the base directory or the name -> bytes dict."""
    missing = external_missing(t)
    if missing is not None:
        raise missing
    loc = t.external.get("location", "")
    offset = int(t.external.get("offset", "0") or 0)
    length = t.external.get("length")
    if isinstance(t.base, Mapping):
        blob = memoryview(t.base[loc]).cast("B")
        end = len(blob) if length is None else offset + int(length)
        return blob[offset:end]
    path = os.path.join(t.base or ".", loc)
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read() if length is None else f.read(int(length))


def read_tensor(buf: Buffer, start: int, stop: int, base: Any = None) -> TensorData:
    """Parse a TensorProto message in buf[start:stop]."""
    t = TensorData("", 0, ())
    t.buf, t.base = buf, base
    dims: list[int] = []
    external = False
    for fnum, wire, value, end, off in buf.fields(start, stop):
        if fnum == 1:
            dims.extend(signed64(v) for v in (buf.packed_varints(value, end)
                                              if wire == LENGTH else [value]))
        elif fnum == 2:
            t.elem_type = value
        elif fnum == 3:
            t.has_segment = True
        elif fnum == 8:
            t.name = buf.text(value, end)
        elif fnum == 9:
            t.raw = (value, end)
        elif fnum in (4, 5, 7, 10, 11):
            t.typed.append((fnum, wire, value, end, off))
        elif fnum == 13:
            key = val = ""
            for f2, _, v2, e2, _ in buf.fields(value, end):
                if f2 == 1:
                    key = buf.text(v2, e2)
                elif f2 == 2:
                    val = buf.text(v2, e2)
            t.external[key] = val
        elif fnum == 14:
            external = value == 1
    if not external:
        t.external.clear()
    t.dims = tuple(dims)
    return t
