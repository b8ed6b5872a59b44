"""The numpy GGUF reader against the `gguf` package (GGUFReader, GGUFWriter, gguf.quants) on the
SmolLM2 file and on small files written here byte by byte, valid and broken.
"""

import struct
from collections.abc import Sequence
from pathlib import Path

import gguf  # the reference: a missing package fails the module rather than skipping it
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

from webrlx.models.assets import smollm2_gguf
from webrlx.models.gguf import GGUFError, GGUFFile, TensorInfo, dequantize, load

RNG = np.random.default_rng(0)

# ---------------------------------------------------------------------------------------------
# A tiny independent GGUF writer, straight from the format spec.

FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
       11: "<q", 12: "<d"}


def enc_str(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def enc_value(vtype: int, value) -> bytes:
    """A value without its type code; an array value is (item type, items)."""
    if vtype == 8:
        return enc_str(value)
    if vtype == 9:
        item, items = value
        return struct.pack("<IQ", item, len(items)) + b"".join(enc_value(item, v) for v in items)
    return struct.pack(FMT[vtype], value)


def kv(key: str | bytes, vtype: int, value) -> bytes:
    return enc_str(key) + struct.pack("<I", vtype) + enc_value(vtype, value)


def tinfo(name: str, dims: Sequence[int], code: int, offset: int) -> bytes:
    """A tensor info; dims in GGUF order (fastest first)."""
    return (enc_str(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
            + struct.pack("<IQ", code, offset))


def build(kvs: list[bytes], infos: list[bytes], data: bytes = b"", alignment: int = 32,
          n_tensors: int | None = None) -> bytes:
    n = len(infos) if n_tensors is None else n_tensors
    head = b"GGUF" + struct.pack("<IQQ", 3, n, len(kvs)) + b"".join(kvs) + b"".join(infos)
    return head + b"\0" * (-len(head) % alignment) + data


def plain(vtype: int, value):
    """What the reader should return for an enc_value input."""
    return [plain(value[0], v) for v in value[1]] if vtype == 9 else value


F32 = RNG.standard_normal((2, 3)).astype(np.float32)
Q8 = gguf.quants.quantize(RNG.standard_normal((2, 32)).astype(np.float32), QT.Q8_0)
Q41 = gguf.quants.quantize(RNG.standard_normal((3, 64)).astype(np.float32), QT.Q4_1)
SAMPLE_META = {
    "general.architecture": (8, "toy"), "toy.u8": (0, 255), "toy.i8": (1, -128),
    "toy.u16": (2, 65535), "toy.i16": (3, -32768), "toy.u32": (4, 2**32 - 1),
    "toy.i32": (5, -(2**31)), "toy.f32": (6, 0.5), "toy.bool": (7, True),
    "toy.u64": (10, 2**64 - 1), "toy.i64": (11, -(2**63)), "toy.f64": (12, 0.1),
    "toy.text": (8, "héllo ✓"), "toy.empty": (8, ""),
    "toy.floats": (9, (6, [1.5, -2.0])), "toy.flags": (9, (7, [True, False])),
    "toy.words": (9, (8, ["a", "", "Ġé"])), "toy.nested": (9, (9, [(5, [1, 2]), (5, [3])])),
}
SAMPLE_VALUES = {k: plain(t, v) for k, (t, v) in SAMPLE_META.items()}


def sample(alignment: int = 32) -> bytes:
    """A valid file: every value type, an F32, a Q8_0 and a Q4_1 tensor, aligned data."""
    kvs = [kv(k, t, v) for k, (t, v) in SAMPLE_META.items()]
    if alignment != 32:
        kvs.append(kv("general.alignment", 4, alignment))
    offsets, data = [], b""
    for blob in (F32.tobytes(), Q8.tobytes(), Q41.tobytes()):
        data += b"\0" * (-len(data) % alignment)
        offsets.append(len(data))
        data += blob
    infos = [tinfo("f", [3, 2], 0, offsets[0]), tinfo("q8", [32, 2], 8, offsets[1]),
             tinfo("q41", [64, 3], 3, offsets[2])]
    return build(kvs, infos, data, alignment=alignment)


def one_tensor(dims: Sequence[int] = (32, 1), code: int = 0, offset: int = 0,
               data: bytes | None = None, extra: Sequence[bytes] = ()) -> bytes:
    kvs = [kv("general.architecture", 8, "toy"), *extra]
    return build(kvs, [tinfo("w", dims, code, offset)], b"\0" * 128 if data is None else data)


def raises(source, *fragments: str) -> str:
    with pytest.raises(GGUFError) as e:
        load(source)
    message = str(e.value)
    assert message.startswith("gguf: "), message
    for fragment in fragments:
        assert fragment in message, message
    return message


# ---------------------------------------------------------------------------------------------
# Hand-written files.


def test_sample_file_reads_back() -> None:
    f = load(sample())
    assert isinstance(f, GGUFFile) and f.path == "<bytes>" and f.version == 3
    assert f.metadata == SAMPLE_VALUES
    assert list(f.metadata) == list(SAMPLE_META)
    assert type(f.metadata["toy.bool"]) is bool and type(f.metadata["toy.flags"][0]) is bool
    assert f.metadata_types["toy.nested"] == "array[array[int32]]"
    assert f.metadata_types["toy.words"] == "array[string]"
    assert f.metadata_types["toy.u64"] == "uint64"
    assert f.arch == "toy" and f.arch_get("u8") == 255 and f.get("missing", 7) == 7
    assert list(f.tensors) == ["f", "q8", "q41"]
    assert [(t.shape, t.type, t.nbytes) for t in f.tensors.values()] == [
        ((2, 3), "F32", 24), ((2, 32), "Q8_0", 68), ((3, 64), "Q4_1", 120)]
    assert all(t.offset % 32 == 0 and t.offset >= f.data_offset for t in f.tensors.values())
    assert f.tensors["q41"].n_elements == 192
    np.testing.assert_array_equal(f.tensor_f32("f"), F32)
    assert f.tensor_bytes("q8").tobytes() == Q8.tobytes()
    np.testing.assert_array_equal(f.tensor_f32("q8"), gguf.quants.dequantize(Q8, QT.Q8_0))
    np.testing.assert_array_equal(f.tensor_f32("q41"), gguf.quants.dequantize(Q41, QT.Q4_1))
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        f.tensor_bytes("nope")


def test_version_2_and_custom_alignment() -> None:
    v2 = bytearray(sample())
    v2[4:8] = struct.pack("<I", 2)
    assert load(bytes(v2)).version == 2
    f = load(sample(alignment=64))
    assert f.alignment == 64 and f.data_offset % 64 == 0
    assert all(t.offset % 64 == 0 for t in f.tensors.values())
    np.testing.assert_array_equal(f.tensor_f32("q8"), gguf.quants.dequantize(Q8, QT.Q8_0))


def test_reads_what_gguf_writer_writes(tmp_path: Path) -> None:
    path = tmp_path / "w.gguf"
    w = gguf.GGUFWriter(path, "toy")
    w.add_uint8("a.u8", 7)
    w.add_int16("a.i16", -3)
    w.add_float64("a.f64", 0.25)
    w.add_bool("a.b", False)
    w.add_string("a.s", "ünïcode")
    w.add_array("a.strs", ["x", "yz"])
    w.add_array("a.ints", [1, -2, 3])
    w.add_key_value("a.nested", [["p", "q"], ["r"]], VT.ARRAY)
    q4 = gguf.quants.quantize(RNG.standard_normal((5, 64)).astype(np.float32), QT.Q4_0)
    w.add_tensor("q4", q4, raw_shape=q4.shape, raw_dtype=QT.Q4_0)
    h = RNG.standard_normal((3, 7)).astype(np.float16)
    w.add_tensor("h", h)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    f = load(path)
    assert f.path == str(path)
    assert f.metadata == {"general.architecture": "toy", "a.u8": 7, "a.i16": -3, "a.f64": 0.25,
                          "a.b": False, "a.s": "ünïcode", "a.strs": ["x", "yz"],
                          "a.ints": [1, -2, 3], "a.nested": [["p", "q"], ["r"]]}
    assert f.tensors["q4"].shape == (5, 64) and f.tensors["q4"].type == "Q4_0"
    assert f.tensors["h"].shape == (3, 7) and f.tensors["h"].type == "F16"
    np.testing.assert_array_equal(f.tensor_f32("q4"), gguf.quants.dequantize(q4, QT.Q4_0))
    np.testing.assert_array_equal(f.tensor_f32("h"), h.astype(np.float32))


# ---------------------------------------------------------------------------------------------
# Dequantization: block layouts by hand, then against gguf.quants.


def f16_bytes(x: float) -> bytes:
    return np.float16(x).tobytes()


def test_block_layouts_by_hand() -> None:
    nib = bytes(j | (15 - j) << 4 for j in range(16))  # low nibble j, high nibble 15 - j
    q41 = np.frombuffer(f16_bytes(0.5) + f16_bytes(-1.0) + nib, np.uint8)
    want = [0.5 * j - 1 for j in range(16)] + [0.5 * (15 - j) - 1 for j in range(16)]
    np.testing.assert_array_equal(dequantize(q41, "Q4_1", (1, 32)), [want])
    q40 = np.frombuffer(f16_bytes(2.0) + nib, np.uint8)
    want = [2.0 * (j - 8) for j in range(16)] + [2.0 * (7 - j) for j in range(16)]
    np.testing.assert_array_equal(dequantize(q40, "Q4_0", (32,)), want)
    q8 = np.frombuffer(f16_bytes(-0.25) + np.arange(-16, 16, dtype=np.int8).tobytes(), np.uint8)
    np.testing.assert_array_equal(dequantize(q8, "Q8_0", (32,)), -0.25 * np.arange(-16, 16))
    bf16 = np.frombuffer(np.array([1.5, -3.0], np.float32).tobytes(), np.uint8)
    bf16 = bf16.reshape(2, 4)[:, 2:].copy().reshape(-1)  # the high halves
    np.testing.assert_array_equal(dequantize(bf16, "BF16", (2,)), [1.5, -3.0])


@pytest.mark.parametrize("qtype", [QT.Q4_0, QT.Q4_1, QT.Q5_0, QT.Q5_1, QT.Q8_0, QT.F16,
                                   QT.BF16])
def test_dequantize_matches_gguf_quants(qtype: QT) -> None:
    x = (RNG.standard_normal((6, 96)) * RNG.uniform(0.01, 10, (6, 1))).astype(np.float32)
    raw = gguf.quants.quantize(x, qtype)
    ours = dequantize(raw.view(np.uint8), qtype.name, (6, 96))
    assert ours.dtype == np.float32 and ours.shape == (6, 96)
    np.testing.assert_array_equal(ours, gguf.quants.dequantize(raw, qtype).astype(np.float32))


@pytest.mark.parametrize("qtype", [QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K, QT.IQ4_XS])
def test_dequantize_k_quants_matches_gguf_quants(qtype: QT) -> None:
    from webrlx import quant
    raw = quant.random_blocks(qtype.name.lower(), 3, 512, seed=qtype.value)   # finite scales
    ours = dequantize(raw, qtype.name, (3, 2, 256))
    np.testing.assert_array_equal(ours.reshape(3, 512),
                                  gguf.quants.dequantize(raw.reshape(3, -1), qtype))


def test_dequantize_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ValueError, match="no numpy dequantizer for IQ2_XXS"):
        dequantize(np.zeros(66, np.uint8), "IQ2_XXS", (256,))
    with pytest.raises(ValueError, match=r"Q8_0\[64\] needs 68 bytes, got 34"):
        dequantize(np.zeros(34, np.uint8), "Q8_0", (64,))
    with pytest.raises(ValueError, match="unknown ggml type 'Q9'"):
        dequantize(np.zeros(4, np.uint8), "Q9", (1,))
    f = load(one_tensor([256, 1], code=16, data=bytes(256)))  # IQ2_XXS parses, no dequantizer
    assert f.tensors["w"].type == "IQ2_XXS" and f.tensor_bytes("w").nbytes == 66
    with pytest.raises(GGUFError, match="<bytes>: tensor 'w': dequantize: no numpy"):
        f.tensor_f32("w")


# ---------------------------------------------------------------------------------------------
# Bad files.


def test_not_gguf_and_versions() -> None:
    raises(b"", "<bytes>", "not a GGUF file: it starts with b''")
    raises(b"\x89PNG\r\n\x1a\n" + bytes(40), "not a GGUF file", "b'\\x89PNG'")
    raises(b'{"__metadata__"', "not a GGUF file")
    good = sample()
    for version, hint in [(1, "v1 predates"), (4, "unknown version"), (0, "unknown version"),
                          (3 << 24, "big-endian")]:
        bad = good[:4] + struct.pack("<I", version) + good[8:]
        raises(bad, f"unsupported GGUF version {version}", hint, "supported: 2, 3")


def test_every_truncation_is_reported() -> None:
    good = sample()
    assert load(good).metadata == SAMPLE_VALUES
    for cut in range(len(good)):
        message = raises(good[:cut], "<bytes>")
        assert ("not a GGUF file" if cut < 4 else "truncated") in message, (cut, message)


def test_truncation_messages_name_the_file_and_the_part(tmp_path: Path) -> None:
    good = sample()
    f = load(good)
    q41 = f.tensors["q41"]
    infos_start = good.index(b"\x01\x00\x00\x00\x00\x00\x00\x00f")  # "f" name length + name
    key_start = 24 + 8  # header, then the first key's length
    for cut, fragments in [
        (6, ["truncated: header version needs bytes [4, 8), file has 6"]),
        (12, ["truncated: tensor count needs bytes [8, 16), file has 12"]),
        (20, ["truncated: metadata count needs bytes [16, 24), file has 20"]),
        (key_start + 5, ["truncated: metadata key #0 of 18 needs bytes [32, 52)"]),
        (infos_start + 4, ["truncated: length of name of tensor #0 of 3 needs bytes"]),
        (infos_start + 20, ["truncated: dimensions of tensor 'f'"]),
        (q41.offset + 7, [f"truncated: tensor 'q41' needs bytes [{q41.offset}, "
                          f"{q41.offset + 120}), file has {q41.offset + 7}"]),
    ]:
        path = tmp_path / f"cut{cut}.gguf"
        path.write_bytes(good[:cut])
        raises(path, f"gguf: {path}: ", *fragments)
        raises(good[:cut], "gguf: <bytes>: ", *fragments)
    words = good.index(enc_str("toy.words"))
    start = words + 17 + 4 + 12 + 9 + 8 + 8  # key, type, item type and count, "a", "", length
    raises(good[: start + 2], f"truncated: metadata 'toy.words'[2] needs bytes [{start}, "
           f"{start + 4}), file has {start + 2}")  # mid-string, mid-character


def test_corrupt_values() -> None:
    name = [kv("general.architecture", 8, "toy")]
    raises(build([*name, enc_str("k") + struct.pack("<I", 13) + bytes(8)], []),
           "metadata 'k' has unknown value type 13")
    raises(build([*name, enc_str("k") + struct.pack("<IIQ", 9, 99, 1) + bytes(8)], []),
           "metadata 'k' (array item) has unknown value type 99")
    raises(one_tensor(code=4), "tensor 'w' has unknown ggml type 4")
    raises(one_tensor(code=1000), "unknown ggml type 1000")
    raises(build([struct.pack("<Q", 2**60) + b"key"], []),
           "metadata key #0 of 1 claims a length of 1152921504606846976 bytes")
    raises(build([*name, enc_str("s") + struct.pack("<IQ", 8, 2**40) + b"abc"], []),
           "metadata 's' claims a length of 1099511627776 bytes")
    raises(build([*name, enc_str("arr") + struct.pack("<IIQ", 9, 4, 2**61)], []),
           "item count of metadata 'arr' is 2305843009213693952")
    raises(build([*name, enc_str("strs") + struct.pack("<IIQ", 9, 8, 2**40)], []),
           "item count of metadata 'strs' is")
    raises(build([*name, enc_str("strs") + struct.pack("<IIQQ", 9, 8, 1, 2**50) + b"x"], []),
           "metadata 'strs'[0] claims a length of")
    raises(build(name, [], n_tensors=2**62),
           "truncated:", "tensor #", " of 4611686018427387904 needs bytes")
    raises(b"GGUF" + struct.pack("<IQQ", 3, 0, 2**62) + name[0],
           "truncated: length of metadata key #1 of 4611686018427387904 needs bytes")
    raises(build([*name, kv(b"k\xff", 4, 1)], []), "metadata key #1 of 2 is not valid UTF-8")
    raises(build([*name, kv("w", 9, (8, ["ok", b"\xc3("]))], []),
           "metadata 'w'[1] is not valid UTF-8")
    raises(build([*name, kv("general.architecture", 8, "again")], []),
           "duplicate metadata key 'general.architecture'")
    deep = struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 40 + struct.pack("<IQ", 5, 0)
    raises(build([*name, enc_str("deep") + deep], []), "metadata 'deep'", "deeper than 16")


def test_random_corruption_raises_only_gguf_errors() -> None:
    """Flipped bytes anywhere in the header and infos: a GGUFError or a clean read, never an
    IndexError, struct.error, UnicodeDecodeError, OverflowError or RecursionError."""
    good = sample()
    end = load(good).data_offset
    rng = np.random.default_rng(1)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(1500):
        bad = bytearray(good)
        for pos in rng.integers(4, end, size=rng.integers(1, 4)):
            bad[pos] = rng.choice([0, 0xFF, int(rng.integers(256))])
        try:
            load(bytes(bad))
            outcomes["ok"] += 1
        except GGUFError as e:
            assert str(e).startswith("gguf: <bytes>: "), e
            outcomes["error"] += 1
    assert outcomes["error"] > 500, outcomes


def test_corrupt_tensor_infos() -> None:
    raises(one_tensor(offset=16), "tensor 'w' data offset 16 is not a multiple of the alignment 32")
    raises(one_tensor(offset=2**40), "truncated: tensor 'w' needs bytes [")
    raises(one_tensor(dims=[2**40, 2**20]), "tensor 'w' F32[1048576, 1099511627776] needs")
    raises(one_tensor(dims=[2, 2, 2, 2, 2]), "tensor 'w' has 5 dimensions, at most 4")
    raises(one_tensor(dims=[30, 1], code=8), "tensor 'w' is Q8_0 (blocks of 32)", "hold 30")
    raises(one_tensor(extra=[kv("general.alignment", 4, 24)]),
           "general.alignment must be a power of two, got 24")
    raises(one_tensor(extra=[kv("general.alignment", 4, 0)]), "power of two, got 0")
    raises(one_tensor(extra=[kv("general.alignment", 8, "32")]), "power of two, got '32'")
    twice = build([kv("general.architecture", 8, "toy")],
                  [tinfo("w", [4], 0, 0), tinfo("w", [4], 0, 32)], bytes(64))
    raises(twice, "duplicate tensor name 'w'")
    with pytest.raises(TypeError, match="path or bytes-like"):
        load(12345)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Bytes input, zero-copy views, progress.


def test_bytes_like_inputs_and_zero_copy_views() -> None:
    good = sample()
    base = load(good)
    ba = bytearray(b"pre" + good)  # a view that starts 3 bytes into its buffer
    for source in (good, bytearray(good), memoryview(good), memoryview(ba)[3:]):
        f = load(source)
        assert f.metadata == base.metadata and f.tensors == base.tensors
        for name in f.tensors:
            raw = f.tensor_bytes(name)
            assert raw.dtype == np.uint8 and raw.shape == (f.tensors[name].nbytes,)
            assert np.shares_memory(raw, np.frombuffer(f.buffer, np.uint8))
    view = load(memoryview(ba)[3:]).tensor_bytes("f")
    before = view[0]
    ba[3 + base.tensors["f"].offset] ^= 0xFF  # the file bytes change, the view sees it
    assert view[0] == before ^ 0xFF
    assert not load(good).tensor_bytes("f").flags.writeable  # bytes stay read-only


def test_path_is_mapped_and_release_keeps_views(tmp_path: Path) -> None:
    """A path is memory-mapped copy-on-write: views are writable without touching the file,
    and release() (dropping a tensor's host pages) leaves them reading the file's bytes."""
    big = np.arange(3 * 4096, dtype=np.float32)        # spans whole pages
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
    w.add_tensor("big", big)
    w.add_tensor("small", np.ones(3, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    f = load(tmp_path / "m.gguf")
    assert f.mapped and not load((tmp_path / "m.gguf").read_bytes()).mapped
    view = f.tensor_bytes("big").view(np.float32)
    np.testing.assert_array_equal(view, big)
    f.release("big")
    f.release("small")
    np.testing.assert_array_equal(view, big)
    view[0] = 7.0                                      # a private copy: the file keeps 0
    assert load(tmp_path / "m.gguf").tensor_bytes("big").view(np.float32)[0] == 0.0


def test_progress_reports_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import webrlx.models.safetensors as mod  # the chunked reader both loaders use

    monkeypatch.setattr(mod, "CHUNK_BYTES", 100)
    good = sample()
    path = tmp_path / "s.gguf"
    path.write_bytes(good)
    calls: list[tuple[int, int]] = []
    f = load(path, progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, len(good)) and calls[-1] == (len(good), len(good))
    assert len(calls) == 2 + (len(good) - 1) // 100
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert f.tensor_bytes("q8").flags.writeable  # a path is read into a bytearray
    calls.clear()
    load(good, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(len(good), len(good))]


# ---------------------------------------------------------------------------------------------
# The SmolLM2 file against gguf.GGUFReader.


@pytest.fixture(scope="module")
def path() -> Path:
    return smollm2_gguf()


@pytest.fixture(scope="module")
def ours(path: Path) -> GGUFFile:
    return load(path)


@pytest.fixture(scope="module")
def reader(path: Path) -> gguf.GGUFReader:
    return gguf.GGUFReader(path)


def ref_value(field) -> tuple[object, str]:
    """A GGUFReader field's value from its parts/data, and its type name as webrlx spells it."""
    types = [VT(t) for t in field.types]
    name = types[0].name.lower() if len(types) == 1 else f"array[{types[1].name.lower()}]"
    if VT.ARRAY in types[1:]:
        raise AssertionError(f"{field.name}: nested arrays are not decoded here")

    def item(part_index: int, vtype: VT) -> object:
        part = field.parts[part_index]
        if vtype == VT.STRING:
            return bytes(part).decode("utf-8")
        value = part.tolist()[0]
        return bool(value) if vtype == VT.BOOL else value

    if types[0] == VT.ARRAY:
        return [item(i, types[1]) for i in field.data], name
    return item(field.data[0], types[0]), name


def test_metadata_equals_gguf_reader(ours: GGUFFile, reader: gguf.GGUFReader) -> None:
    ref = {k: ref_value(f) for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    assert list(ours.metadata) == list(ref)
    assert len(ours.metadata) == reader.fields["GGUF.kv_count"].parts[-1][0] == 33
    assert ours.version == reader.fields["GGUF.version"].parts[-1][0] == 3
    for key, (value, type_name) in ref.items():
        assert ours.metadata_types[key] == type_name, key
        assert ours.metadata[key] == value, key
        assert type(ours.metadata[key]) is type(value), key
    assert len(ours.metadata["tokenizer.ggml.tokens"]) == 49152
    assert len(ours.metadata["tokenizer.ggml.merges"]) == 48900
    assert ours.metadata["tokenizer.ggml.pre"] == "smollm"
    assert ours.get("tokenizer.chat_template", "").startswith("{% for message in messages %}")
    assert ours.arch == "llama" and ours.arch_get("block_count") == 30
    assert ours.alignment == reader.alignment and ours.data_offset == reader.data_offset


def test_tensors_equal_gguf_reader(ours: GGUFFile, reader: gguf.GGUFReader) -> None:
    assert list(ours.tensors) == [t.name for t in reader.tensors]
    counts: dict[str, int] = {}
    for t in reader.tensors:
        info = ours.tensors[t.name]
        assert isinstance(info, TensorInfo)
        assert info.shape == tuple(int(d) for d in reversed(t.shape)), t.name  # numpy order
        assert info.type == t.tensor_type.name and info.offset == t.data_offset, t.name
        assert info.nbytes == t.n_bytes and info.n_elements == t.n_elements, t.name
        ref = np.asarray(t.data).reshape(-1).view(np.uint8)
        assert np.array_equal(ours.tensor_bytes(t.name), ref), t.name
        counts[info.type] = counts.get(info.type, 0) + 1
    assert counts == {"Q4_1": 210, "Q8_0": 1, "F32": 61}
    assert ours.tensors["token_embd.weight"].shape == (49152, 576)
    assert ours.tensors["blk.0.ffn_down.weight"].shape == (576, 1536)


@pytest.mark.parametrize("name", ["token_embd.weight", "blk.0.attn_q.weight",
                                  "blk.0.attn_k.weight", "blk.0.ffn_down.weight",
                                  "blk.29.ffn_gate.weight", "blk.29.attn_norm.weight",
                                  "output_norm.weight"])
def test_dequantized_equals_gguf_quants(ours: GGUFFile, reader: gguf.GGUFReader,
                                        name: str) -> None:
    t = next(t for t in reader.tensors if t.name == name)
    got = ours.tensor_f32(name)
    assert got.dtype == np.float32 and got.shape == ours.tensors[name].shape
    rows = np.arange(len(got))
    if len(rows) > 4096:  # the reference is slow on the embedding: a spread of its rows
        rows = np.unique(np.r_[rows[:64], rows[-64:], RNG.choice(rows, 2048, replace=False)])
    want = gguf.quants.dequantize(np.asarray(t.data)[rows], t.tensor_type)
    np.testing.assert_array_equal(got[rows], want)


def test_path_and_bytes_load_alike(path: Path, ours: GGUFFile) -> None:
    data = path.read_bytes()
    f = load(data)
    assert f.path == "<bytes>" and ours.path == str(path)
    assert f.metadata == ours.metadata and f.tensors == ours.tensors
    raw = f.tensor_bytes("blk.3.attn_v.weight")
    info = f.tensors["blk.3.attn_v.weight"]
    assert np.shares_memory(raw, np.frombuffer(data, np.uint8))
    assert raw.tobytes() == data[info.offset : info.offset + info.nbytes]
    assert np.array_equal(raw, ours.tensor_bytes("blk.3.attn_v.weight"))


def test_language_model_uploads_tensor_by_tensor(path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """llm.load of a path sets each weight, then drops that tensor's host pages; the params
    still hold the file's bytes after (read back from the reference device)."""
    from webrlx.models import llm
    from webrlx.models.llama import weight_words
    from webrlx.runtime.executable import Executable
    events: list[tuple[str, str]] = []
    set_params, release = Executable.set_params, GGUFFile.release
    monkeypatch.setattr(Executable, "set_params", lambda self, params: (
        events.extend(("set", n) for n in params), set_params(self, params))[-1])
    monkeypatch.setattr(GGUFFile, "release", lambda self, name: (
        events.append(("release", name)), release(self, name))[-1])
    lm = llm.load(path, device="reference", max_context=64)
    names = list(lm.graph.params)
    assert events == [e for n in names for e in (("set", n), ("release", n))]
    whole = load(path.read_bytes())
    for name in ("blk.0.attn_q.weight", "token_embd.weight"):
        np.testing.assert_array_equal(lm.executable.read_param(name),
                                      weight_words(whole.tensor_bytes(name)))
