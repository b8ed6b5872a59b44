"""Run a notebook in JupyterLite through the JupyterLab app, in headless Chromium.

The app is driven the way a user would: open the notebook with the Pyodide kernel, wait for
the kernel to answer, Run All, then read the notebook model back as nbformat JSON.
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from webrlx.serve import make_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "browser"))
import browser_harness  # noqa: E402 - tests/browser's Chromium path and WebGPU flags

# Nothing may leave the machine: any host but 127.0.0.1 fails to resolve.
FLAGS = [*browser_harness.FLAGS, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
KERNEL_TIMEOUT_S = 240
RUN_TIMEOUT_S = 900

_OPEN = """async ([path, content]) => {
  const app = window.jupyterapp;
  await app.restored;
  if (content !== null) {
    await app.serviceManager.contents.save(path, {type: "notebook", format: "json", content});
  }
  const panel = await app.commands.execute("docmanager:open",
      {path, factory: "Notebook", kernel: {name: "python"}});
  await panel.context.ready;
  await panel.sessionContext.ready;
  window.webrlxPanel = panel;
}"""
_KERNEL_READY = """async () => {
  const kernel = window.webrlxPanel.sessionContext.session?.kernel;
  if (!kernel || kernel.connectionStatus !== "connected") return false;
  try { await kernel.requestKernelInfo(); return true; } catch (e) { return false; }
}"""
_RUN_ALL = """() => {
  const app = window.jupyterapp, panel = window.webrlxPanel;
  app.shell.activateById(panel.id);
  window.webrlxRun = {done: false};
  app.commands.execute("notebook:run-all-cells").then(
      ok => { window.webrlxRun = {done: true, ok}; },
      err => { window.webrlxRun = {done: true, ok: false, error: String(err)}; });
}"""
_PROGRESS = """() => {
  const cells = window.webrlxPanel.content.model.toJSON().cells
      .filter(c => c.cell_type === "code");
  return [cells.filter(c => c.execution_count !== null).length, cells.length];
}"""


@contextlib.contextmanager
def site_server(site: Path) -> Iterator[str]:
    """Serve the built JupyterLite site on 127.0.0.1 (a free port); yield its base URL."""
    server = make_server({"/": site}, {}, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium with WebGPU (SwiftShader), a fresh profile and no outside network."""
    if not os.path.exists(browser_harness.CHROMIUM):
        raise FileNotFoundError(f"{browser_harness.CHROMIUM} is missing: "
                                "`apt-get install -y chromium`")
    from playwright.sync_api import sync_playwright

    xdg = Path(tempfile.gettempdir()) / f"webrlx-xdg-{os.getuid()}"
    xdg.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(xdg))
    with tempfile.TemporaryDirectory(prefix="webrlx-lite-chromium-") as profile, \
            sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile, executable_path=browser_harness.CHROMIUM, headless=True,
            ignore_default_args=["--headless"], args=FLAGS)
        try:
            yield context
        finally:
            context.close()


class LiteRun:
    """One notebook executed in a fresh JupyterLab page: its JSON, timings and what leaked."""

    def __init__(self, context: Any, base_url: str, path: str,
                 content: dict[str, Any] | None = None) -> None:
        """Open `path` from the site's files, or save `content` (nbformat JSON) there first."""
        self.console: list[str] = []
        self.outside: list[str] = []      # requests to anything but the local server
        page = context.new_page()
        page.on("console", lambda msg: self.console.append(msg.text))
        page.on("pageerror", lambda err: self.console.append(f"pageerror: {err}"))
        page.on("request", lambda req: None if req.url.startswith((base_url, "data:", "blob:"))
                else self.outside.append(req.url))
        try:
            start = time.perf_counter()
            page.goto(base_url + "lab/index.html")
            page.wait_for_function("window.jupyterapp !== undefined", timeout=60_000)
            page.evaluate(_OPEN, [path, content])
            page.wait_for_function(_KERNEL_READY, timeout=KERNEL_TIMEOUT_S * 1000,
                                   polling=500)
            self.kernel_s = time.perf_counter() - start
            start = time.perf_counter()
            page.evaluate(_RUN_ALL)
            try:
                page.wait_for_function("window.webrlxRun.done", timeout=RUN_TIMEOUT_S * 1000,
                                       polling=500)
            except Exception as err:
                done, total = page.evaluate(_PROGRESS)
                raise TimeoutError(f"{path}: Run All did not finish in {RUN_TIMEOUT_S} s "
                                   f"({done}/{total} code cells ran)\n{self.console_tail()}"
                                   ) from err
            self.run_s = time.perf_counter() - start
            self.result = page.evaluate("window.webrlxRun")
            self.notebook = page.evaluate("window.webrlxPanel.content.model.toJSON()")
        finally:
            page.close()

    def console_tail(self, lines: int = 30) -> str:
        return "\n".join(self.console[-lines:])
