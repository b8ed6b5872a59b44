"""The API reference (docs/api/*.md, rendered by mkdocstrings) covers every public name:
`webrlx.__all__`, the public names of each `webrlx.models` module and of `webrlx.optim`. A name
is covered by its own `::: path.name` directive, or by a `::: module` directive whose options do
not narrow its members (mkdocs.yml renders members without docstrings too). And
`python -m webrlx docs` builds and serves the site, or says what to install."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import re
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import webrlx
import webrlx.models
from webrlx.cli import docs

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "docs" / "api"
DIRECTIVE = re.compile(r"^::: ([\w.]+)[ \t]*\n((?:[ \t]+.*\n|[ \t]*\n)*)", re.M)


def directives() -> dict[str, str]:
    """`::: identifier` -> its indented options block, over every API reference page."""
    found: dict[str, str] = {}
    for page in sorted(API.glob("*.md")):
        for m in DIRECTIVE.finditer(page.read_text() + "\n"):
            found[m.group(1)] = m.group(2)
    return found


def module_names(module: str) -> set[str]:
    """Public names a module defines at top level (as griffe sees them: defs, classes,
    assignments), and the webrlx names its `__all__` re-exports (a name re-exported from
    another package, e.g. jinja2's TemplateError, is documented there)."""
    mod = importlib.import_module(module)
    exported = {n for n in getattr(mod, "__all__", ())
                if getattr(getattr(mod, n), "__module__", module).startswith("webrlx")}
    tree = ast.parse(Path(mod.__file__).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names | exported if not n.startswith("_")}


def covered(module: str, name: str, found: dict[str, str]) -> bool:
    """Whether `module.name` renders: its own directive, or its module's, members unnarrowed."""
    if f"{module}.{name}" in found:
        return True
    options = found.get(module)
    if options is None:
        return False
    members = re.search(r"^\s*members:\s*(.*)$", options, re.M)
    return members is None or members.group(1).strip() in ("true", "yes")


def models_modules() -> list[str]:
    return [f"webrlx.models.{m.name}" for m in pkgutil.iter_modules(webrlx.models.__path__)
            if not m.name.startswith("_")]


def test_every_public_name_is_in_the_api_reference() -> None:
    found = directives()
    wanted = [("webrlx", n) for n in webrlx.__all__]
    for module in [*models_modules(), "webrlx.optim"]:
        wanted += [(module, n) for n in sorted(module_names(module))]
    missing = [f"{m}.{n}" for m, n in wanted if not covered(m, n, found)]
    assert not missing, (f"docs/api/*.md: no `::: name` directive renders {missing}; add one "
                         f"(or a module-level `::: module`)")


def test_directives_name_real_objects() -> None:
    for ident in directives():
        module, _, attr = ident.rpartition(".")
        try:
            importlib.import_module(ident)
            continue
        except ImportError:
            pass
        assert hasattr(importlib.import_module(module), attr), f"docs/api: {ident} does not exist"


def test_paths_the_pages_cite_exist() -> None:
    """A file renamed or deleted (a bench result, a probe, a test) must not leave a page citing
    it: every repository path in backticks on a page (README.md too) exists."""
    cited = set()
    for page in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]:
        cited |= {(page.name, p) for p in re.findall(
            r"`((?:bench|tools|tests|webrlx|shaders|web|notebooks)/[\w./-]+)", page.read_text())}
    shipped = {"webrlx/shaders"}          # where shaders/ lands inside the wheel
    missing = sorted((page, p) for page, p in cited
                     if p not in shipped and not (ROOT / p.rstrip("/.")).exists())
    assert cited and not missing, missing


def test_every_chart_is_on_the_performance_page() -> None:
    charts = sorted(p.name for p in (ROOT / "docs" / "performance").glob("*.svg"))
    page = (ROOT / "docs" / "performance.md").read_text()
    assert charts and not [c for c in charts if f"(performance/{c})" not in page], charts


def test_members_without_docstrings_render() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"show_if_no_docstring:\s*true", config), (
        "mkdocs.yml: show_if_no_docstring must be true, or a public name without a docstring "
        "silently drops out of a module-level directive")


# -- python -m webrlx docs -------------------------------------------------------------------
def test_docs_command_names_what_to_install_when_mkdocs_is_missing(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "material" else real(name, *a))
    assert docs.main_docs(["--build-only"]) == 1
    err = capsys.readouterr().err
    assert "material not installed" in err and docs.INSTALL in err, err


def test_docs_command_on_a_busy_port_fails_in_one_line(capsys):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert docs.main_docs(["--port", str(s.getsockname()[1])]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "already in use" in err, err


def test_docs_command_builds_and_serves_the_api_reference():
    # --strict, as CI builds it: a warning (e.g. `[n][k]` in prose read as a cross-reference)
    # fails here too, not only in CI's separate mkdocs step
    proc = subprocess.Popen([sys.executable, "-m", "webrlx", "docs", "--port", "0", "--strict"],
                            cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        seen, url = [], None                     # mkdocs' log, then the link once served
        for line in proc.stdout:
            seen.append(line)
            url = re.search(r"http://127\.0\.0\.1:\d+/", line)
            if url:
                break
        assert url, "".join(seen)
        page = urllib.request.urlopen(url.group(0) + "api/webrlx/", timeout=30).read().decode()
        assert 'id="webrlx.compile"' in page and 'id="webrlx.Graph"' in page
    finally:
        proc.terminate()
        proc.wait(timeout=30)
