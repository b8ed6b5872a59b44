"""The protobuf wire format, read by hand: varints, fixed-width words and length-delimited
fields of one message, each with the byte offset it starts at (for error messages)."""
from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class OnnxFormatError(ValueError):
    """A malformed or truncated ONNX file; the message names the file and the byte offset."""


class Buffer:
    """The bytes of one file, named for error messages."""

    def __init__(self, data: bytes | bytearray | memoryview, source: str) -> None:
        self.data = memoryview(data).cast("B")
        self.source = source

    def fail(self, offset: int, what: str) -> OnnxFormatError:
        """Return the error for a malformed field at offset."""
        return OnnxFormatError(f"{self.source}: byte {offset}: {what} (malformed or truncated "
                               f"ONNX file, {len(self.data)} bytes)")

    def varint(self, pos: int, end: int) -> tuple[int, int]:
        """Decode the varint at pos -> (value as uint64, next position)."""
        data, shift, value, start = self.data, 0, 0, pos
        while True:
            if pos >= end:
                raise self.fail(start, "varint runs past the end of its message")
            b = data[pos]
            value |= (b & 0x7F) << shift
            pos += 1
            if b < 0x80:
                return value, pos
            shift += 7
            if shift > 63:
                raise self.fail(start, "varint longer than 10 bytes")

    def fields(self, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
        """Yield (field number, wire type, value, stop, offset) for a message in [start, end).

        value is the integer for VARINT/FIXED32/FIXED64 (raw bits) and the payload's start
        for LENGTH fields, whose payload ends at stop; offset is where the field begins.
        """
        pos = start
        while pos < end:
            offset = pos
            key, pos = self.varint(pos, end)
            field, wire = key >> 3, key & 7
            if field == 0:
                raise self.fail(offset, "field number 0")
            if wire == VARINT:
                value, pos = self.varint(pos, end)
            elif wire == LENGTH:
                n, pos = self.varint(pos, end)
                if pos + n > end:
                    raise self.fail(offset, f"field {field} of {n} bytes runs past the end")
                value = pos
                pos += n
            elif wire in (FIXED32, FIXED64):
                size = 4 if wire == FIXED32 else 8
                if pos + size > end:
                    raise self.fail(offset, f"field {field} runs past the end")
                value = int.from_bytes(self.data[pos:pos + size], "little")
                pos += size
            else:
                raise self.fail(offset, f"field {field} has unknown wire type {wire}")
            yield field, wire, value, pos, offset

    def text(self, start: int, stop: int) -> str:
        """Bytes [start, stop) as UTF-8 text."""
        return bytes(self.data[start:stop]).decode("utf-8", "replace")

    def raw(self, start: int, stop: int) -> bytes:
        """Bytes [start, stop) as a copy."""
        return bytes(self.data[start:stop])

    def packed_varints(self, start: int, end: int) -> list[int]:
        """Decode a packed run of varints in [start, end) (uint64 values)."""
        out, pos = [], start
        while pos < end:
            v, pos = self.varint(pos, end)
            out.append(v)
        return out

    def packed_fixed(self, start: int, end: int, np_dtype: str, offset: int) -> np.ndarray:
        """A packed run of little-endian fixed-width values in [start, end) as an array copy."""
        size = np.dtype(np_dtype).itemsize
        if (end - start) % size:
            raise self.fail(offset, f"packed field of {end - start} bytes is not a multiple of "
                                    f"{size}")
        return np.frombuffer(self.data[start:end], np_dtype).copy()


def signed64(v: int) -> int:
    """Reinterpret a uint64 varint as int64 (protobuf's int64 encoding)."""
    return v - (1 << 64) if v >= 1 << 63 else v


def float32_bits(v: int) -> float:
    """The float of a FIXED32 field's raw bits."""
    return float(struct.unpack("<f", v.to_bytes(4, "little"))[0])
