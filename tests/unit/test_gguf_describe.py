"""What web/chat.html reads from a GGUF before loading it: gguf.read_header on a prefix of the
file, gguf_info.describe (family, parameters, weight types, context, the limits its largest
weight needs) and gguf_info.over_limits, against the `gguf` package's own reader."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from webrlx.cli import gguf_info
from webrlx.models import gguf

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "build" / "llm_fixtures"


def fixture(name: str) -> Path:
    path = FIXTURES / name
    if not path.exists():
        pytest.skip(f"{path} is made by tests/backend/test_llm_families.py "
                    "(python tools/make_llm_fixtures.py)")
    return path


def header(path: Path) -> gguf.GGUFFile:
    """read_header from a prefix that grows as GGUFNeedMore asks, as the page does."""
    data = path.read_bytes()
    have = 64
    while True:
        try:
            return gguf.read_header(data[:have], len(data), path.name)
        except gguf.GGUFNeedMore as e:
            assert e.needed > have
            have = e.needed


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
    assert d["needs"] == {"max-buffer-size": big, "max-storage-buffer-binding-size": big}


def test_over_limits_names_the_weight_the_sizes_and_the_adapter():
    d = gguf_info.describe(header(fixture("llama-q8_0.gguf")))
    need = d["largest"]["bytes"]
    fits = {"max-buffer-size": need, "max-storage-buffer-binding-size": need}
    assert gguf_info.over_limits(d, fits, "SwiftShader") == ""
    small = dict(fits, **{"max-storage-buffer-binding-size": need - 1})
    msg = gguf_info.over_limits(d, small, "SwiftShader")
    assert d["largest"]["name"] in msg and f"{need:,} bytes" in msg
    assert f"max-storage-buffer-binding-size {need - 1:,}" in msg and "SwiftShader" in msg
    assert "max-buffer-size" not in msg


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
