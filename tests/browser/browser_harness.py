"""Drive webrlx in headless Chromium: the static server, the browser, and a booted Pyodide.

Shared by tests/browser/conftest.py and bench/probes/ffi_overhead.py. Needs apt `chromium` and pip
`playwright` (never `playwright install`: Debian's /usr/bin/chromium is used).
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from webrlx.cli.serve import default_routes, make_server, page_config
from webrlx.cli.web_assets import WebAssets

HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--enable-unsafe-swiftshader",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", "--disable-quic", "--disable-domain-reliability", "--disable-breakpad",
         "--no-default-browser-check"]
BOOT_TIMEOUT_MS = 120_000


@contextlib.contextmanager
def web_server(assets: WebAssets, extra: dict[str, Path] | None = None) -> Iterator[str]:
    """Serve the pages, Pyodide, the wheels, this folder (/harness/) and extra routes."""
    routes = {**default_routes(assets), "/harness/": HERE, **(extra or {})}
    server = make_server(routes, page_config(assets), port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium with WebGPU (SwiftShader) and a fresh profile: a browser context."""
    if not os.path.exists(CHROMIUM):
        raise FileNotFoundError(f"{CHROMIUM} is missing: `apt-get install -y chromium`")
    from playwright.sync_api import sync_playwright

    xdg = Path(tempfile.gettempdir()) / f"webrlx-xdg-{os.getuid()}"
    xdg.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(xdg))
    with tempfile.TemporaryDirectory(prefix="webrlx-chromium-") as profile, \
            sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True,
            ignore_default_args=["--headless"], args=FLAGS)
        try:
            yield context
        finally:
            context.close()


class BrowserPython:
    """One booted webrlx Pyodide: on a page's main thread ("main"), or in a Worker ("worker")."""

    def __init__(self, context: Any, base_url: str, mode: str, config: dict[str, str]) -> None:
        self.mode = mode
        self.console: list[str] = []
        self.page = context.new_page()
        self.page.on("console", lambda msg: self.console.append(msg.text))
        self.page.on("pageerror", lambda err: self.console.append(f"pageerror: {err}"))
        self.page.goto(base_url + "harness/harness.html")
        self.page.wait_for_function("window.webrlxHarness !== undefined")
        try:
            self.page.evaluate("(args) => webrlxHarness.boot(...args)",
                               [mode, config, BOOT_TIMEOUT_MS])
        except Exception as err:
            raise RuntimeError(f"booting webrlx in the browser ({mode}) failed: {err}\n"
                               f"console:\n{self.console_tail()}") from err

    def run(self, code: str) -> Any:
        """Run Python code (top-level await allowed); return its last expression as JSON data."""
        return self.page.evaluate("code => webrlxHarness.run(code)", code)

    def console_tail(self, lines: int = 40) -> str:
        return "\n".join(self.console[-lines:])
