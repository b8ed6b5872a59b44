"""The Dawn runner's choice of checkout files (webrlx/cli/dawn.py): what a pytest run inside
Pyodide needs, nested fixtures included (tests/backend/test_llm_llamacpp.py reads
tests/fixtures/llamacpp/reference.json at import)."""
from __future__ import annotations

from pathlib import Path

from webrlx.cli.dawn import ROOT, checkout_files

REPO = Path(__file__).resolve().parents[2]


def test_checkout_files_take_the_nested_fixtures_and_the_test_folder() -> None:
    files = checkout_files(REPO, ["tests/backend/test_llm_llamacpp.py"])
    inside = set(files)
    assert f"{ROOT}/tests/fixtures/llamacpp/reference.json" in inside
    assert f"{ROOT}/tests/fixtures/llamacpp/llama-q4_k.gguf" in inside
    assert f"{ROOT}/tests/backend/conftest.py" in inside
    assert f"{ROOT}/tests/conftest.py" in inside
    assert all(Path(host).is_file() for host in files.values())       # no folders


def test_checkout_files_of_a_folder_take_its_python_files_only() -> None:
    files = checkout_files(REPO, ["tests/unit"])
    own = [p for p in files if p.startswith(f"{ROOT}/tests/unit/")]
    assert own and all(p.endswith(".py") for p in own)
