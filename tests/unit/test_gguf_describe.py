"""What web/chat.html reads from a GGUF before loading it: gguf.read_header on a prefix of the
file, gguf_info.describe (family, parameters, weight types, context, the adapter limits its
weights need) and gguf_info.over_limits, against the `gguf` package's own reader."""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest

from webrlx.cli import gguf_info
from webrlx.models import gguf

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "build" / "llm_fixtures"


def fixture(name: str) -> Path:
    """build/llm_fixtures/<family>-<type>.gguf, made on first use as
    tests/backend/test_llm_families.py makes it (tools/make_llm_fixtures.py, a few seconds)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import make_llm_fixtures
    family, qtype = name.removesuffix(".gguf").rsplit("-", 1)
    return make_llm_fixtures.fixture(family, qtype, FIXTURES)


def header(path: Path) -> gguf.GGUFFile:
    """read_header from a prefix that grows as GGUFNeedMore asks, as the page does: to at
    least `needed`, and at least double (web/chat-worker.js; growing by `needed` alone parses
    a big vocabulary's header thousands of times)."""
    data = path.read_bytes()
    have = 64
    while True:
        try:
            return gguf.read_header(data[:have], len(data), path.name)
        except gguf.GGUFNeedMore as e:
            assert e.needed > have
            have = max(e.needed, 2 * have)


@pytest.mark.parametrize("name", ["llama-q8_0.gguf", "gemma2-f16.gguf", "phi3-f32.gguf"])
def test_header_and_description_match_the_gguf_package(name):
    reader_mod = pytest.importorskip("gguf")
    path = fixture(name)
    ref = reader_mod.GGUFReader(str(path))
    file = header(path)
    assert [t.name for t in ref.tensors] == list(file.tensors)
    for t in ref.tensors:
        ours = file.tensors[t.name]
        assert (ours.type, ours.nbytes, ours.offset) == (t.tensor_type.name, int(t.n_bytes),
                                                          int(t.data_offset))
    d = gguf_info.describe(file)
    arch = ref.fields["general.architecture"].contents()
    assert d["family"] == arch and d["runs"], d
    assert d["context"] == ref.fields[f"{arch}.context_length"].contents()
    assert d["parameters"] == sum(int(t.n_elements) for t in ref.tensors)
    by_type: dict[str, int] = {}
    for t in ref.tensors:
        by_type[t.tensor_type.name] = by_type.get(t.tensor_type.name, 0) + int(t.n_bytes)
    assert d["types"][0] == max(by_type, key=by_type.__getitem__)
    # on the device blocks stay as stored (2-D F16 / BF16 rows of k % 32 == 0 too: GGUF's
    # shape lists k first), the other floats are float32
    def as_blocks(t) -> bool:
        if t.tensor_type.name in ("F16", "BF16"):
            return len(t.shape) == 2 and int(t.shape[0]) % 32 == 0
        return t.tensor_type.name != "F32"
    dev = {t.name: int(t.n_bytes) if as_blocks(t) else int(t.n_elements) * 4
           for t in ref.tensors}
    big = max(dev.values())
    assert d["largest"]["bytes"] == big and dev[d["largest"]["name"]] == big
    # the least limits: the vocabulary's blocks are cut into row pieces (one row at the
    # least), other blocks are bound whole, float tables are bound by windows (a row of
    # their longer dim) but held in one buffer
    def least(t) -> tuple[int, int]:
        if as_blocks(t) and t.name in ("token_embd.weight", "output.weight"):
            return (int(t.n_bytes) // int(t.shape[1]),) * 2
        if as_blocks(t) or len(t.shape) < 2:
            return dev[t.name], dev[t.name]
        return dev[t.name], max(int(x) for x in t.shape) * 4
    want = {"max-buffer-size": max(least(t)[0] for t in ref.tensors),
            "max-storage-buffer-binding-size": max(least(t)[1] for t in ref.tensors)}
    assert d["needs"] == want, (d["needs"], want)
    for limit, by in d["needed_by"].items():
        assert by["bytes"] == want[limit], (limit, by)


def test_over_limits_names_the_weight_the_sizes_and_the_adapter():
    d = gguf_info.describe(header(fixture("llama-q8_0.gguf")))
    need = d["needs"]["max-storage-buffer-binding-size"]
    by = d["needed_by"]["max-storage-buffer-binding-size"]
    fits = dict(d["needs"])
    assert gguf_info.over_limits(d, fits, "SwiftShader") == ""
    small = dict(fits, **{"max-storage-buffer-binding-size": need - 1})
    msg = gguf_info.over_limits(d, small, "SwiftShader")
    assert by["name"] in msg and f"{need:,} bytes" in msg
    assert f"max-storage-buffer-binding-size {need - 1:,}" in msg and "SwiftShader" in msg
    assert "max-buffer-size" not in msg


def grown_header(name: str, tensor: str, rows: int) -> gguf.GGUFFile:
    """The fixture's header with `tensor`'s row count (GGUF's second dim) set to rows, read
    as the header of a file long enough for the grown data (nothing is written)."""
    data = bytearray(fixture(name).read_bytes())
    key = tensor.encode()
    at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
    n_dims, ne0, ne1 = struct.unpack_from("<IQQ", data, at)
    assert n_dims == 2, (tensor, n_dims)
    struct.pack_into("<Q", data, at + 12, rows)
    return gguf.read_header(bytes(data), len(data) + rows * ne0 * 4)


BROWSER_LIMITS = {"max-buffer-size": 256 << 20, "max-storage-buffer-binding-size": 128 << 20}


def test_a_vocabulary_over_the_binding_limit_fits_as_row_pieces():
    # 2^22 rows of Q8_0 (285 MB: over 128 MiB, as Gemma 3's 262144 x 640 Q8_0 is over a
    # browser's default binding): the loader cuts it, so the page must not refuse it
    file = grown_header("llama-q8_0.gguf", "token_embd.weight", 1 << 22)
    d = gguf_info.describe(file)
    t = file.tensors["token_embd.weight"]
    assert d["largest"]["name"] == "token_embd.weight" and d["largest"]["bytes"] == t.nbytes
    assert t.nbytes > BROWSER_LIMITS["max-buffer-size"]
    assert d["needs"]["max-storage-buffer-binding-size"] < 1 << 20, d["needs"]
    assert gguf_info.over_limits(d, BROWSER_LIMITS, "Chrome") == ""


def test_gguf_info_prints_the_limits_a_file_needs():
    import io
    path = fixture("llama-q8_0.gguf")
    d = gguf_info.describe(header(path))
    out = io.StringIO()
    assert gguf_info.info(str(path), out) == 0
    line = next(t for t in out.getvalue().splitlines() if t.startswith("device limits"))
    for name, need in d["needs"].items():
        assert f"{name} {need:,} bytes ({d['needed_by'][name]['name']})" in line, line


def test_a_layer_weight_over_the_binding_limit_is_refused():
    file = grown_header("llama-q8_0.gguf", "blk.0.ffn_up.weight", 1 << 22)
    d = gguf_info.describe(file)
    t = file.tensors["blk.0.ffn_up.weight"]
    assert d["needs"] == {"max-buffer-size": t.nbytes,
                          "max-storage-buffer-binding-size": t.nbytes}
    msg = gguf_info.over_limits(d, BROWSER_LIMITS, "Chrome")
    assert "'blk.0.ffn_up.weight'" in msg and f"{t.nbytes:,} bytes" in msg, msg
    assert f"max-storage-buffer-binding-size {128 << 20:,}" in msg, msg
    assert f"max-buffer-size {256 << 20:,}" in msg, msg


def test_read_header_of_a_truncated_or_foreign_file(tmp_path):
    data = fixture("qwen2-q8_0.gguf").read_bytes()
    file = gguf.read_header(data, len(data))
    last = max(file.tensors.values(), key=lambda t: t.offset)
    with pytest.raises(gguf.GGUFError, match="truncated") as err:   # the file ends early
        gguf.read_header(data[:file.data_offset], last.offset + last.nbytes - 1)
    assert not isinstance(err.value, gguf.GGUFNeedMore)
    with pytest.raises(gguf.GGUFError, match="not a GGUF file"):
        gguf.read_header(b"PK\x03\x04" + bytes(60), 1 << 20)
    with pytest.raises(gguf.GGUFNeedMore) as more:
        gguf.read_header(data[:100], len(data))
    assert 100 < more.value.needed <= file.data_offset


def test_describe_an_unknown_architecture(tmp_path):
    sys.path.insert(0, str(ROOT / "tests" / "backend"))     # where pytest imports it from
    from test_llm_families import write_mamba_gguf
    path = write_mamba_gguf(tmp_path / "mamba.gguf")
    d = gguf_info.describe(header(path))
    assert not d["runs"] and "'mamba'" in d["why"] and "llama" in d["why"], d
    assert d["parameters"] == 128 and d["largest"]["bytes"] == 512
