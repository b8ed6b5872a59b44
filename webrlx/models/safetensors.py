"""Read .safetensors files with numpy only (no mmap, no `safetensors` package): runs in Pyodide.

Why not the `safetensors` package: its core is Rust, with no Pyodide build.

Layout: 8-byte little-endian header length N, N bytes of JSON header, then the tensor data;
each header entry gives dtype, shape and [begin, end) byte offsets into the data.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

Progress = Callable[[int, int], None]

# safetensors dtype -> numpy dtype of the stored bytes (always little-endian).
DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # numpy has no bfloat16: widened to float32 on load
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
MAX_HEADER_BYTES = 100 << 20  # the limit the reference implementation enforces
CHUNK_BYTES = 8 << 20


def _header_length(prefix: bytes | memoryview, total: int, where: str) -> int:
    """Return N from the first 8 bytes, checked against the file size."""
    if total < 8:
        raise ValueError(
            f"{where}: not a safetensors file: {total} bytes, the 8-byte header length is missing"
        )
    (n,) = struct.unpack("<Q", prefix[:8])
    if n > MAX_HEADER_BYTES:
        raise ValueError(
            f"{where}: header length {n} exceeds {MAX_HEADER_BYTES} bytes: "
            "corrupt file or not safetensors"
        )
    if 8 + n > total:
        raise ValueError(
            f"{where}: truncated file: header needs {8 + n} bytes, file has {total}. "
            "Download it again"
        )
    return n


def _parse_header(raw: bytes | memoryview, where: str) -> dict[str, Any]:
    """Decode and sanity-check the JSON header."""
    try:
        header = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{where}: corrupt header, not valid UTF-8 JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{where}: corrupt header: expected a JSON object, got {type(header)}")
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= info.keys():
            raise ValueError(
                f"{where}: corrupt header: tensor {name!r} must have dtype, shape and "
                f"data_offsets, got {info!r}"
            )
    return header


def _as_bytes_view(source: Any) -> memoryview:
    """Return a flat byte view of a bytes-like source."""
    try:
        view = memoryview(source)
    except TypeError:
        raise TypeError(
            "safetensors: source must be a path or bytes-like (bytes, bytearray, memoryview), "
            f"got {type(source).__name__}"
        ) from None
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def read_header(source: str | os.PathLike[str] | bytes | bytearray | memoryview) -> dict[str, Any]:
    """Return the parsed JSON header (tensor entries plus optional "__metadata__").

    Args:
        source: a file path (only the header bytes are read) or the file's bytes.
    """
    if isinstance(source, (str, os.PathLike)):
        where = f"read_header({os.fspath(source)!r})"
        with open(source, "rb") as f:
            total = os.fstat(f.fileno()).st_size
            n = _header_length(f.read(8), total, where)
            return _parse_header(f.read(n), where)
    view = _as_bytes_view(source)
    where = "read_header(<bytes>)"
    n = _header_length(view, view.nbytes, where)
    return _parse_header(view[8 : 8 + n], where)


def read_file(path: str | os.PathLike[str], progress: Progress | None,
              error: Callable[[str], Exception] = ValueError,
              who: str = "load_safetensors") -> bytearray:
    """Read a whole file into one bytearray in CHUNK_BYTES pieces, reporting progress(done,
    total); a file that shrinks while read raises error("<who>(<path>): file shrank ...")."""
    with open(path, "rb") as f:
        total = os.fstat(f.fileno()).st_size
        buf = bytearray(total)
        view = memoryview(buf)
        done = 0
        if progress is not None:
            progress(0, total)
        while done < total:
            n = f.readinto(view[done : done + CHUNK_BYTES])
            if not n:
                raise error(f"{who}({os.fspath(path)!r}): file shrank while reading: "
                            f"got {done} of {total} bytes")
            done += n
            if progress is not None:
                progress(done, total)
    return buf


def load_safetensors(
    source: str | os.PathLike[str] | bytes | bytearray | memoryview,
    progress: Progress | None = None,
) -> dict[str, np.ndarray]:
    """Return every tensor of a safetensors file as a numpy array.

    Arrays are views into one buffer (zero-copy), except BF16, widened to float32. They are
    writable when the buffer is (a path reads into a bytearray; bytes give read-only views).

    Args:
        source: a file path, or the file's bytes (bytes, bytearray, memoryview: in Pyodide,
            `await (await fetch(url)).arrayBuffer()` then `.to_py()`).
        progress: called as progress(done_bytes, total_bytes) while a path is read.
    """
    if isinstance(source, (str, os.PathLike)):
        where = f"load_safetensors({os.fspath(source)!r})"
        view = memoryview(read_file(source, progress))
    else:
        where = "load_safetensors(<bytes>)"
        view = _as_bytes_view(source)
        if progress is not None:
            progress(view.nbytes, view.nbytes)
    n = _header_length(view, view.nbytes, where)
    header = _parse_header(view[8 : 8 + n], where)
    data = view[8 + n :]
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name != "__metadata__":
            out[name] = _tensor(data, name, info, where)
    return out


def _tensor(data: memoryview, name: str, info: dict[str, Any], where: str) -> np.ndarray:
    """Return the array a header entry describes, viewing `data` (the bytes after the header)."""
    dtype = DTYPES.get(info["dtype"])
    if dtype is None:
        raise ValueError(
            f"{where}: tensor {name!r} has dtype {info['dtype']!r}; supported: {', '.join(DTYPES)}"
        )
    shape = tuple(int(d) for d in info["shape"])
    begin, end = (int(x) for x in info["data_offsets"])
    count = int(np.prod(shape, dtype=np.int64))
    if end - begin != count * dtype.itemsize or begin < 0:
        raise ValueError(
            f"{where}: corrupt header: tensor {name!r} {info['dtype']}{list(shape)} needs "
            f"{count * dtype.itemsize} bytes, data_offsets {[begin, end]} span {end - begin}"
        )
    if end > data.nbytes:
        raise ValueError(
            f"{where}: truncated file: tensor {name!r} ends at data byte {end}, only "
            f"{data.nbytes} present. Download it again"
        )
    arr = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape)
    if info["dtype"] == "BF16":
        arr = (arr.astype(np.uint32) << 16).view(np.float32)
    return arr


def tqdm_like_progress(label: str, width: int = 30) -> Progress:
    """Return a progress(done, total) callback that draws a text bar on stderr.

    Args:
        label: printed before the bar, e.g. "model.safetensors".
        width: bar width in characters.
    """
    start = time.perf_counter()
    last_percent = -1

    def progress(done: int, total: int) -> None:
        nonlocal last_percent
        percent = 100 * done // total if total else 100
        if percent == last_percent:
            return
        last_percent = percent
        filled = width * percent // 100
        rate = done / max(time.perf_counter() - start, 1e-9) / 1e6
        sys.stderr.write(
            f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {percent:3d}% "
            f"{done / 1e6:.1f}/{total / 1e6:.1f} MB {rate:.0f} MB/s"
        )
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return progress


_WRITE_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
                 np.dtype(np.int32): "I32", np.dtype(np.uint32): "U32", np.dtype(np.bool_): "BOOL"}


def save_safetensors(tensors: dict[str, np.ndarray]) -> bytes:
    """The bytes of a .safetensors file holding these arrays (names sorted, data 8-aligned
    after the header, as the format's writers do); load_safetensors reads it back."""
    header: dict[str, Any] = {}
    blobs, offset = [], 0
    for name in sorted(tensors):
        arr = np.asarray(tensors[name])
        arr = np.ascontiguousarray(arr) if arr.ndim else arr     # (0-d stays 0-d)
        if arr.dtype not in _WRITE_DTYPES:
            raise ValueError(f"save_safetensors: {name!r} has dtype {arr.dtype}; supported: "
                             f"{sorted(str(d) for d in _WRITE_DTYPES)}")
        data = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _WRITE_DTYPES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)
