"""The JupyterLite site's SmolLM2 GGUF: served beside Pyodide, mounted at kernel start where
`smollm2.load()` looks, with a start wheel whose bytes change only with its files (so the site
is rebuilt only when an input changes)."""
from __future__ import annotations

import hashlib
import json
import sys
import time
import types
import zipfile
from pathlib import Path, PurePosixPath

import pytest
from notebook_check import ROOT

from webrlx.cli import lite
from webrlx.models.assets import smollm2_gguf

KERNEL = "@jupyterlite/pyodide-kernel-extension:kernel"
INDEX_URL = "http://127.0.0.1:8001/static/pyodide/"


class FakeFS:
    """Records the Emscripten FS calls of the kernel start script."""

    def __init__(self) -> None:
        self.folders: list[str] = []
        self.lazy_files: list[tuple[str, str, str, bool, bool]] = []

    def mkdirTree(self, folder: str) -> None:  # noqa: N802 - Emscripten's name
        self.folders.append(folder)

    def createLazyFile(self, folder: str, name: str, url: str, can_read: bool,  # noqa: N802
                       can_write: bool) -> None:
        self.lazy_files.append((folder, name, url, can_read, can_write))


def run_kernel_start(source: str, monkeypatch: pytest.MonkeyPatch) -> tuple[FakeFS, dict]:
    """Execute the start script as IPython does (in the user's namespace), with Pyodide faked."""
    fs = FakeFS()
    api = types.ModuleType("pyodide_js._api")
    api.config = types.SimpleNamespace(indexURL=INDEX_URL)  # type: ignore[attr-defined]
    pyodide_js = types.ModuleType("pyodide_js")
    pyodide_js.FS = fs  # type: ignore[attr-defined]
    pyodide_js._api = api  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyodide_js", pyodide_js)
    monkeypatch.setitem(sys.modules, "pyodide_js._api", api)
    namespace: dict = {}
    exec(compile(source, lite.KERNEL_START + ".py", "exec"), namespace)  # noqa: S102
    return fs, namespace


def test_lite_kernel_start_mounts_the_sites_smollm2_gguf(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    site = lite.build_site(ROOT)
    pyodide = site / "static" / "pyodide"
    settings = json.loads((site / "jupyter-lite.json").read_text())
    options = settings["jupyter-config-data"]["litePluginSettings"][KERNEL]["loadPyodideOptions"]
    lock = json.loads((pyodide / "pyodide-lock.json").read_text())["packages"]
    (package,) = options["packages"]
    wheel = pyodide / lock[package]["file_name"]
    assert hashlib.sha256(wheel.read_bytes()).hexdigest() == lock[package]["sha256"]

    startup = PurePosixPath(options["env"]["PYTHONSTARTUP"])
    assert startup.parent.name == "site-packages"
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read(startup.name).decode()
    fs, namespace = run_kernel_start(source, monkeypatch)
    assert set(namespace) == {"__builtins__"}, "the start script left names in the notebook"

    gguf = smollm2_gguf()
    folder = options["env"]["WEBRLX_SMOLLM2_DIR"]
    assert fs.folders == [folder]
    ((where, name, url, can_read, can_write),) = fs.lazy_files
    assert (where, name, can_read, can_write) == (folder, gguf.name, True, False)
    assert url.startswith(INDEX_URL)
    served = pyodide / url[len(INDEX_URL):]
    assert served.stat().st_size == gguf.stat().st_size


def test_lite_kernel_start_wheel_for_smollm2_is_reproducible(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {lite.SMOLLM2_DIR: {"model.gguf": "model.gguf"}}
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    before = lite.kernel_start_wheel(first, files).read_bytes()
    monkeypatch.setattr(time, "time", lambda: 2e9)    # a later day: zip timestamps would differ
    assert lite.kernel_start_wheel(second, files).read_bytes() == before
    other = {lite.SMOLLM2_DIR: {"other.gguf": "other.gguf"}}
    assert lite.kernel_start_wheel(second, other).read_bytes() != before
