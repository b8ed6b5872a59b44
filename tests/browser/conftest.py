"""Browser harness: headless Chromium (Playwright) with WebGPU, a local static server, and a
booted webrlx Pyodide per mode ("main" thread and Web "worker"), shared by the whole session.

Needs: apt `chromium`, pip `playwright` (never `playwright install`), npm, and the assets that
`python -m webrlx.web_assets` builds (built here on first use; cached).
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from webrlx.serve import default_routes, make_server, page_config
from webrlx.web_assets import WebAssets, build

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
MODES = ("main", "worker")
# What the in-browser pytest session runs: the backend suite and the browser-only checks.
SUITE_PATHS = ("tests/backend", "tests/browser/in_pyodide")
FLAGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--enable-unsafe-swiftshader",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--disable-quic", "--disable-domain-reliability", "--disable-breakpad",
         "--no-default-browser-check"]
BOOT_TIMEOUT_MS = 120_000

# in_pyodide/ imports `js`: it runs only inside the browser, through the runner.
collect_ignore = ["in_pyodide"]


class BrowserPython:
    """One booted webrlx Pyodide: on a page's main thread, or in a Worker of that page."""

    def __init__(self, context: Any, base_url: str, mode: str, config: dict[str, str]) -> None:
        self.mode = mode
        self.console: list[str] = []
        self.page = context.new_page()
        self.page.on("console", lambda msg: self.console.append(msg.text))
        self.page.on("pageerror", lambda err: self.console.append(f"pageerror: {err}"))
        self.page.goto(base_url + "harness/harness.html")
        self.page.wait_for_function("window.webrlxHarness !== undefined")
        self.page.set_default_timeout(BOOT_TIMEOUT_MS)
        try:
            self.page.evaluate("([mode, config]) => webrlxHarness.boot(mode, config)",
                               [mode, config])
        except Exception as err:
            raise RuntimeError(f"booting webrlx in the browser ({mode}) failed: {err}\n"
                               f"console:\n{self.console_tail()}") from err

    def run(self, code: str) -> Any:
        """Run Python code (top-level await allowed); return its last expression as JSON data."""
        return self.page.evaluate("code => webrlxHarness.run(code)", code)

    def console_tail(self, lines: int = 40) -> str:
        return "\n".join(self.console[-lines:])


def suite_files() -> dict[str, str]:
    """Return the files the in-browser pytest session needs, keyed by path from the root."""
    paths = [ROOT / "pyproject.toml", *(ROOT / p for p in ("tests/__init__.py",
                                                           "tests/conftest.py"))]
    for folder in SUITE_PATHS:
        paths += sorted((ROOT / folder).rglob("*.py"))
    return {str(p.relative_to(ROOT)): p.read_text() for p in paths if p.is_file()}


@functools.cache
def native_test_ids() -> tuple[str, ...]:
    """Collect (natively, in a subprocess) the node ids the browser session must reproduce."""
    ids: list[str] = []
    for folder, extra in (("tests/backend", []), ("tests/browser/in_pyodide", ["--noconftest"])):
        if not any((ROOT / folder).rglob("test_*.py")):
            continue
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=",
             "-p", "no:cacheprovider", *extra, folder],
            cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"collecting {folder} natively failed:\n{proc.stdout}{proc.stderr}")
        ids += [line for line in proc.stdout.splitlines() if "::" in line]
    return tuple(ids)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `mode` over MODES and `case` over (mode, natively collected node id)."""
    if "case" in metafunc.fixturenames:
        cases = [(mode, nodeid) for mode in MODES for nodeid in native_test_ids()]
        metafunc.parametrize("case", cases, ids=[f"{m}::{n}" for m, n in cases])
    if "mode" in metafunc.fixturenames:
        metafunc.parametrize("mode", MODES)


@pytest.fixture(scope="session")
def native_ids() -> tuple[str, ...]:
    return native_test_ids()


@pytest.fixture(scope="session")
def web_assets() -> WebAssets:
    return build(ROOT)


@pytest.fixture(scope="session")
def web_server(web_assets: WebAssets) -> Iterator[str]:
    routes = {**default_routes(web_assets), "/harness/": HERE}
    server = make_server(routes, page_config(web_assets), port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def chromium(web_server: str) -> Iterator[Any]:
    """A headless Chromium with WebGPU (SwiftShader) and a fresh profile."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: `apt-get install -y chromium`")
    from playwright.sync_api import sync_playwright

    xdg = Path(tempfile.gettempdir()) / f"webrlx-xdg-{os.getuid()}"
    xdg.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(xdg))
    with tempfile.TemporaryDirectory(prefix="webrlx-chromium-") as profile, \
            sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True,
            ignore_default_args=["--headless"], args=FLAGS)
        yield context
        context.close()


@pytest.fixture(scope="session")
def browser_python(chromium: Any, web_server: str, web_assets: WebAssets) -> Any:
    """browser_python(mode) -> the session's BrowserPython for that mode, booted on first use."""
    config = page_config(web_assets)
    return functools.cache(lambda mode: BrowserPython(chromium, web_server, mode, config))


@pytest.fixture(scope="session")
def browser_suite(browser_python: Any, web_server: str, web_assets: WebAssets) -> Any:
    """browser_suite(mode) -> {"exit", "results": {nodeid: {outcome, longrepr}}, "console"},
    run once per mode."""
    wheels = [f"{web_server}wheels/{p.name}" for p in web_assets.test_wheels]
    runner = (HERE / "pyodide_runner.py").read_text()

    @functools.cache
    def run(mode: str) -> dict[str, Any]:
        files = suite_files()
        paths = [p for p in SUITE_PATHS if any(f.startswith(p + "/") for f in files)]
        call = (f"await run_suite(json.loads({json.dumps(json.dumps(files))}), "
                f"{paths!r}, {wheels!r})")
        python = browser_python(mode)
        try:
            suite = json.loads(python.run(runner + "\n" + call))
        except Exception as err:
            raise RuntimeError(f"the in-browser pytest session ({mode}) crashed: {err}\n"
                               f"console:\n{python.console_tail()}") from err
        suite["console"] = python.console_tail()
        return suite

    return run
