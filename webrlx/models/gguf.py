"""Read GGUF model files (llama.cpp's format) with numpy; a path is memory-mapped natively
(tensors are paged in as they are uploaded and released after: host memory stays bounded),
bytes (the browser's fetch) are read as they are.

Why not llama.cpp's own reader (the `gguf` package): it maps a path with np.memmap, while the
browser has bytes from a fetch (read here as they arrive, with progress); nor does Pyodide
ship it.

Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata
key/value pairs, the tensor infos, padding to `general.alignment`, then the tensor data.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import quant
from .safetensors import Progress, read_file

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # v1 used 32-bit counts and lengths; v2 and v3 read alike (v3 allows BE)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS: llama.cpp refuses tensors with more dimensions
MAX_NESTING = 16  # arrays of arrays: a bound that keeps crafted files from exhausting the stack

# Metadata value type code -> (name, struct format of a scalar); 8 = string, 9 = array.
_SCALARS: dict[int, tuple[str, str]] = {
    0: ("uint8", "<B"), 1: ("int8", "<b"), 2: ("uint16", "<H"), 3: ("int16", "<h"),
    4: ("uint32", "<I"), 5: ("int32", "<i"), 6: ("float32", "<f"), 7: ("bool", "<B"),
    10: ("uint64", "<Q"), 11: ("int64", "<q"), 12: ("float64", "<d"),
}
_STRING, _ARRAY = 8, 9
_STRUCTS = {code: struct.Struct(fmt) for code, (_, fmt) in _SCALARS.items()}
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_VALUE_TYPE_NAMES = {**{c: n for c, (n, _) in _SCALARS.items()}, _STRING: "string", _ARRAY: "array"}

# ggml type code -> (name, elements per block, bytes per block), as in ggml.h / gguf-py.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66), 39: ("MXFP4", 32, 17),
}
_BLOCKS = {name: (elems, size) for name, elems, size in GGML_TYPES.values()}


class GGUFError(ValueError):
    """A file that is not GGUF, is truncated, or holds corrupt values."""


class GGUFNeedMore(GGUFError):
    """read_header: the header runs past the bytes given; `needed` is how many it needs."""

    def __init__(self, message: str, needed: int) -> None:
        super().__init__(message)
        self.needed = needed


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file.

    `shape` is in numpy (row-major) order: GGUF stores dims fastest-varying first, so a
    weight that GGUF lists as [k, n] (k = row length) has shape (n, k). Quantized blocks run
    along the last axis of `shape`.
    """

    name: str
    shape: tuple[int, ...]
    type: str     # ggml type name: "F32", "F16", "Q4_0", "Q4_1", "Q8_0", ...
    offset: int   # absolute byte offset of the data in the file
    nbytes: int

    @property
    def n_elements(self) -> int:
        """Number of values the tensor holds."""
        return int(np.prod(self.shape, dtype=np.int64))


class _Parser:
    """Sequential reader over the file bytes that turns every overrun into a GGUFError."""

    def __init__(self, buf: Any, size: int, where: str, have: int | None = None) -> None:
        self.buf, self.size, self.where, self.pos = buf, size, where, 0
        self.have = size if have is None else have    # bytes of the file in buf (a prefix)

    def error(self, message: str) -> GGUFError:
        return GGUFError(f"gguf: {self.where}: {message}")

    def take(self, n: int, what: str) -> int:
        """Advance over n bytes; return where they start."""
        start, end = self.pos, self.pos + n
        if self.have < end <= self.size:
            raise GGUFNeedMore(f"gguf: {self.where}: {what} needs bytes [{start}, {end}), "
                               f"{self.have} given", end)
        if end > self.size:
            raise self.error(f"truncated: {what} needs bytes [{start}, {end}), "
                             f"file has {self.size}")
        self.pos = end
        return start

    def scalar(self, code: int, what: str) -> Any:
        st = _STRUCTS[code]
        (value,) = st.unpack_from(self.buf, self.take(st.size, what))
        return bool(value) if code == 7 else value

    def count(self, what: str, min_item_bytes: int) -> int:
        """Read a u64 count of items, each at least min_item_bytes long, and sanity-check it."""
        n = self.scalar(10, what)
        if n * min_item_bytes > self.size:
            raise self.error(f"corrupt or truncated: {what} is {n}, more than the file's "
                             f"{self.size} bytes can hold")
        return n

    def string(self, what: str) -> str:
        n = self.scalar(10, f"length of {what}")
        if n > self.size:
            raise self.error(f"corrupt or truncated: {what} claims a length of {n} bytes, "
                             f"more than the whole file ({self.size})")
        start = self.take(n, what)
        try:
            return str(self.buf[start : start + n], "utf-8")
        except UnicodeDecodeError as e:
            raise self.error(f"corrupt: {what} is not valid UTF-8 ({e.reason} at byte "
                             f"{start + e.start})") from None

    def value_type(self, what: str) -> int:
        code = self.scalar(4, f"value type of {what}")
        if code not in _VALUE_TYPE_NAMES:
            raise self.error(f"corrupt: {what} has unknown value type {code} (at byte "
                             f"{self.pos - 4}); known: 0-12")
        return code

    def value(self, code: int, what: str, depth: int = 0) -> tuple[Any, str]:
        """Read a value of type `code`; return it and its type name (e.g. "array[string]")."""
        if code == _STRING:
            return self.string(what), "string"
        if code != _ARRAY:
            return self.scalar(code, what), _VALUE_TYPE_NAMES[code]
        item = self.value_type(f"{what} (array item)")
        if item == _STRING:
            n = self.count(f"item count of {what}", 8)
            return self.strings(n, what), "array[string]"
        if item == _ARRAY:
            if depth >= MAX_NESTING:
                raise self.error(f"corrupt: {what} nests arrays deeper than {MAX_NESTING}")
            n = self.count(f"item count of {what}", 12)
            items = [self.value(_ARRAY, f"{what}[{i}]", depth + 1) for i in range(n)]
            inner = items[0][1] if items else "array"
            return [v for v, _ in items], f"array[{inner}]"
        size = _STRUCTS[item].size
        n = self.count(f"item count of {what}", size)
        start = self.take(n * size, f"{n} items of {what}")
        dtype = np.dtype(np.uint8 if item == 7 else _SCALARS[item][1])
        arr = np.frombuffer(self.buf, dtype, count=n, offset=start)
        return (arr != 0 if item == 7 else arr).tolist(), f"array[{_VALUE_TYPE_NAMES[item]}]"

    def strings(self, n: int, what: str) -> list[str]:
        """Read n strings. Tokenizer vocabularies hold ~50k: one tight loop, checks after."""
        buf, pos, unpack = self.buf, self.pos, _U64.unpack_from
        out: list[str] = []
        append = out.append
        try:
            for _ in range(n):
                (length,) = unpack(buf, pos)
                pos += 8
                end = pos + length
                append(str(buf[pos:end], "utf-8"))
                pos = end
        except (struct.error, UnicodeDecodeError):
            pos = self.size + 1
        if pos > self.have:  # an overrun or a bad item: read again, checking each
            return [self.string(f"{what}[{i}]") for i in range(n)]
        self.pos = pos
        return out


def _parse(buf: Any, size: int, where: str, have: int | None = None) -> GGUFFile:
    p = _Parser(buf, size, where, have)
    if p.have < 4 or bytes(buf[:4]) != MAGIC:
        found = bytes(buf[: min(p.have, 4)])
        raise p.error(f"not a GGUF file: it starts with {found!r}, not {MAGIC!r}")
    p.pos = 4
    version = p.scalar(4, "header version")
    if version not in VERSIONS:
        hint = ("a big-endian file; webrlx reads little-endian GGUF" if version >= 1 << 16
                else "GGUF v1 predates 64-bit counts; convert the model again"
                if version == 1 else "unknown version")
        raise p.error(f"unsupported GGUF version {version} ({hint}); supported: "
                      f"{', '.join(map(str, VERSIONS))}")
    # No sanity bound on these two: a truncated file would trip it before the precise
    # message; an absurd count fails at the first missing item, named "#i of N".
    n_tensors = p.scalar(10, "tensor count")
    n_kv = p.scalar(10, "metadata count")

    metadata: dict[str, Any] = {}
    types: dict[str, str] = {}
    for i in range(n_kv):
        key = p.string(f"metadata key #{i} of {n_kv}")
        if key in metadata:
            raise p.error(f"corrupt: duplicate metadata key {key!r}")
        metadata[key], types[key] = p.value(p.value_type(f"metadata {key!r}"),
                                            f"metadata {key!r}")

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if (not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0
            or alignment & (alignment - 1)):
        raise p.error(f"corrupt: general.alignment must be a power of two, got {alignment!r}")

    raw_infos: list[tuple[str, tuple[int, ...], str, int, int]] = []
    seen: set[str] = set()
    for i in range(n_tensors):
        name = p.string(f"name of tensor #{i} of {n_tensors}")
        if name in seen:
            raise p.error(f"corrupt: duplicate tensor name {name!r}")
        seen.add(name)
        n_dims = p.scalar(4, f"dimension count of tensor {name!r}")
        if n_dims > MAX_DIMS:
            raise p.error(f"corrupt: tensor {name!r} has {n_dims} dimensions, at most "
                          f"{MAX_DIMS} allowed")
        dims = [p.scalar(10, f"dimensions of tensor {name!r}") for _ in range(n_dims)]
        code = p.scalar(4, f"type of tensor {name!r}")
        if code not in GGML_TYPES:
            raise p.error(f"corrupt: tensor {name!r} has unknown ggml type {code}")
        type_name, block_elems, block_bytes = GGML_TYPES[code]
        if dims and dims[0] % block_elems:
            raise p.error(f"corrupt: tensor {name!r} is {type_name} (blocks of {block_elems}) "
                          f"but its rows hold {dims[0]} values")
        offset = p.scalar(10, f"data offset of tensor {name!r}")
        if offset % alignment:
            raise p.error(f"corrupt: tensor {name!r} data offset {offset} is not a multiple "
                          f"of the alignment {alignment}")
        nbytes = int(np.prod(dims, dtype=object)) // block_elems * block_bytes
        raw_infos.append((name, tuple(int(d) for d in reversed(dims)), type_name, offset,
                          nbytes))

    data_offset = -(-p.pos // alignment) * alignment
    tensors: dict[str, TensorInfo] = {}
    for name, shape, type_name, offset, nbytes in raw_infos:
        begin = data_offset + offset
        if nbytes > size:
            raise p.error(f"corrupt or truncated: tensor {name!r} {type_name}{list(shape)} "
                          f"needs {nbytes} bytes, more than the whole file ({size})")
        if begin + nbytes > size:
            raise p.error(f"truncated: tensor {name!r} needs bytes [{begin}, {begin + nbytes}), "
                          f"file has {size}")
        tensors[name] = TensorInfo(name, shape, type_name, begin, nbytes)
    return GGUFFile(buf, where, version, alignment, data_offset, metadata, types, tensors)


class GGUFFile:
    """A parsed GGUF file: metadata, tensor infos, and the file bytes the tensors view.

    Build it with `load(path_or_bytes)`. Attributes: path (the file, or "<bytes>"), version,
    alignment, data_offset (where the data section starts), metadata (key -> Python value:
    int, float, bool, str, or list for arrays), metadata_types (key -> type name such as
    "uint32" or "array[string]"), tensors (name -> TensorInfo, in file order).
    """

    def __init__(self, buffer: Any, path: str, version: int, alignment: int, data_offset: int,
                 metadata: dict[str, Any], metadata_types: dict[str, str],
                 tensors: dict[str, TensorInfo]) -> None:
        self.buffer = buffer
        self.path = path
        self.version = version
        self.alignment = alignment
        self.data_offset = data_offset
        self.metadata = metadata
        self.metadata_types = metadata_types
        self.tensors = tensors

    def __repr__(self) -> str:
        return (f"GGUFFile({self.path!r}, v{self.version}, arch={self.arch!r}, "
                f"{len(self.metadata)} metadata keys, {len(self.tensors)} tensors)")

    def get(self, key: str, default: Any = None) -> Any:
        """Return the metadata value of `key`, or `default` when the file lacks it."""
        return self.metadata.get(key, default)

    @property
    def arch(self) -> str | None:
        """general.architecture, e.g. "llama" (architecture-specific keys start with it)."""
        return self.metadata.get("general.architecture")

    def arch_get(self, key: str, default: Any = None) -> Any:
        """Return the metadata value of f"{arch}.{key}", e.g. arch_get("block_count")."""
        return self.metadata.get(f"{self.arch}.{key}", default)

    def _info(self, name: str) -> TensorInfo:
        info = self.tensors.get(name)
        if info is None:
            raise KeyError(f"gguf: {self.path}: no tensor named {name!r}")
        return info

    def tensor_bytes(self, name: str) -> np.ndarray:
        """Return the raw bytes of a tensor as a flat uint8 array viewing the file buffer.

        No copy: quantized blocks stay as stored. Writable only if the buffer is (a path is
        mapped copy-on-write or read into a bytearray; bytes input gives read-only views).
        """
        info = self._info(name)
        return np.frombuffer(self.buffer, np.uint8, count=info.nbytes, offset=info.offset)

    @property
    def mapped(self) -> bool:
        """Whether the tensors view a memory-mapped file (release() then frees host memory)."""
        return isinstance(self.buffer, mmap.mmap)

    def release(self, name: str) -> None:
        """Let the OS drop the host pages of a tensor's bytes (a mapped file, once uploaded);
        its views stay valid and page the bytes in from the file again if read."""
        if not self.mapped:
            return
        info = self._info(name)
        start = -(-info.offset // mmap.PAGESIZE) * mmap.PAGESIZE
        end = (info.offset + info.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
        if end > start:
            self.buffer.madvise(mmap.MADV_DONTNEED, start, end - start)

    def tensor_f32(self, name: str) -> np.ndarray:
        """Return a tensor as a new float32 array of its (numpy-order) shape, dequantized."""
        info = self._info(name)
        try:
            return dequantize(self.tensor_bytes(name), info.type, info.shape)
        except ValueError as e:
            raise GGUFError(f"gguf: {self.path}: tensor {name!r}: {e}") from None


def dequantize(raw: np.ndarray, ggml_type: str, shape: tuple[int, ...]) -> np.ndarray:
    """Return the float32 values of `raw` (a tensor's bytes, uint8) of type `ggml_type`.

    Supports F32, F16, BF16 and every block format of webrlx.quant.FORMATS (Q4_0, Q4_1,
    Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS). `shape` is in numpy
    order; blocks run along its last axis.
    """
    if ggml_type not in _BLOCKS:
        raise ValueError(f"dequantize: unknown ggml type {ggml_type!r}")
    elems, size = _BLOCKS[ggml_type]
    shape = tuple(int(d) for d in shape)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.asarray(raw).reshape(-1).view(np.uint8)
    if count % elems or raw.nbytes != count // elems * size:
        raise ValueError(f"dequantize: {ggml_type}{list(shape)} needs "
                         f"{-(-count // elems) * size} bytes, got {raw.nbytes}")
    if ggml_type == "F32":
        return raw.view("<f4").astype(np.float32).reshape(shape)
    if ggml_type == "F16":
        return raw.view("<f2").astype(np.float32).reshape(shape)
    if ggml_type == "BF16":  # the high half of a float32
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
    fmt = ggml_type.lower()
    if fmt not in quant.FORMATS:
        raise ValueError(f"dequantize: no numpy dequantizer for {ggml_type}; supported: F32, "
                         f"F16, BF16, {', '.join(f.upper() for f in quant.FORMATS)}")
    k = shape[-1] if shape else 1
    return quant.dequantize(raw, fmt, (count // k, k)).reshape(shape)


def _as_bytes(source: Any) -> Any:
    """Return a flat byte buffer of a bytes-like source (bytes and bytearray as they are)."""
    if isinstance(source, (bytes, bytearray)):
        return source
    try:
        view = memoryview(source)
    except TypeError:
        raise TypeError("gguf: source must be a path or bytes-like (bytes, bytearray, "
                        f"memoryview), got {type(source).__name__}") from None
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _map_file(path: str | os.PathLike[str]) -> mmap.mmap | None:
    """Map a file copy-on-write (writable views, the file untouched); None where mmap cannot
    (Pyodide, an empty file, no madvise): the caller reads it instead."""
    if not hasattr(mmap, "MADV_DONTNEED"):
        return None
    with open(path, "rb") as f:
        try:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        except (OSError, ValueError):
            return None


def load(source: str | os.PathLike[str] | bytes | bytearray | memoryview,
         progress: Progress | None = None) -> GGUFFile:
    """Read and parse a GGUF file; tensor data stays in one buffer that tensors view.

    Args:
        source: a file path, or the file's bytes (bytes, bytearray, memoryview: in Pyodide,
            `await (await fetch(url)).arrayBuffer()` then `.to_py()`).
        progress: called as progress(done_bytes, total_bytes) while the file is read. A
            path is memory-mapped where it can be (nothing is read up front), unless this
            is given: then it is read into memory in chunks.

    Raises:
        GGUFError: (a ValueError) naming the file and the problem: not GGUF, unsupported
            version, truncated, or corrupt.
    """
    if isinstance(source, (str, os.PathLike)):
        where = os.fspath(source)
        buf: Any = _map_file(source) if progress is None else None
        if buf is None:
            buf = read_file(source, progress, GGUFError, "gguf.load")
    else:
        where = "<bytes>"
        buf = _as_bytes(source)
        if progress is not None:
            progress(len(buf), len(buf))
    return _parse(buf, len(buf), where)


def read_header(prefix: bytes | bytearray | memoryview, file_size: int,
                where: str = "<bytes>") -> GGUFFile:
    """Parse metadata and tensor infos from the first bytes of a file of `file_size` bytes
    (what a page reads before downloading or uploading the rest). Tensor data is not there.

    Raises:
        GGUFNeedMore: the header runs past `prefix`; read at least `.needed` bytes and retry.
        GGUFError: not GGUF, corrupt, or a tensor past `file_size` (truncated).
    """
    buf = _as_bytes(prefix)
    return _parse(buf, file_size, where, min(len(buf), file_size))
