"""Run a notebook in JupyterLite through the JupyterLab app, in headless Chromium.

The app is driven the way a user would: open the notebook with the Pyodide kernel, wait for
the kernel to answer, Run All, then read the notebook model back as nbformat JSON. Tests call
`run_isolated`, which does this in a child process (`python lite_driver.py URL PATH --out F`):
Playwright's sync API allows one instance per thread, and the browser suite holds one open for
the whole pytest session.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from webrlx.cli.serve import make_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "browser"))
import browser_harness  # noqa: E402 - tests/browser's Chromium path and WebGPU flags

# Nothing may leave the machine: any host but 127.0.0.1 fails to resolve.
FLAGS = [*browser_harness.FLAGS, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]
KERNEL_TIMEOUT_S = 240
# smollm2_generate's Run All took 578 s on a loaded 2-core box (SwiftShader: two 32-row
# prefills of about 150 s each, and compiling them); the others take well under a minute.
RUN_TIMEOUT_S = 1500

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


def run_notebook(base_url: str, path: str, content: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """Execute one notebook in a fresh Chromium; return its JSON, timings and stray requests.

    `path` is a notebook of the site's files, or where `content` (nbformat JSON) is saved first.
    """
    console: list[str] = []
    outside: list[str] = []      # requests to anything but the local server
    with chromium() as context:
        page = context.new_page()
        page.on("console", lambda msg: console.append(msg.text))
        page.on("pageerror", lambda err: console.append(f"pageerror: {err}"))
        page.on("request", lambda req: None if req.url.startswith((base_url, "data:", "blob:"))
                else outside.append(req.url))
        start = time.perf_counter()
        page.goto(base_url + "lab/index.html")
        page.wait_for_function("window.jupyterapp !== undefined", timeout=60_000)
        page.evaluate(_OPEN, [path, content])
        page.wait_for_function(_KERNEL_READY, timeout=KERNEL_TIMEOUT_S * 1000, polling=500)
        kernel_s = time.perf_counter() - start
        start = time.perf_counter()
        page.evaluate(_RUN_ALL)
        try:
            page.wait_for_function("window.webrlxRun.done", timeout=RUN_TIMEOUT_S * 1000,
                                   polling=500)
        except Exception as err:
            done, total = page.evaluate(_PROGRESS)
            tail = "\n".join(console[-30:])
            raise TimeoutError(f"{path}: Run All did not finish in {RUN_TIMEOUT_S} s "
                               f"({done}/{total} code cells ran)\n{tail}") from err
        return {"notebook": page.evaluate("window.webrlxPanel.content.model.toJSON()"),
                "result": page.evaluate("window.webrlxRun"), "kernel_s": kernel_s,
                "run_s": time.perf_counter() - start, "outside": outside,
                "console": console}


def run_isolated(base_url: str, path: str, content: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """run_notebook in a child process (see the module docstring); raise if it failed."""
    with tempfile.TemporaryDirectory(prefix="webrlx-lite-run-") as tmp:
        out = Path(tmp) / "run.json"
        args = [sys.executable, __file__, base_url, path, "--out", str(out)]
        if content is not None:
            (Path(tmp) / "content.json").write_text(json.dumps(content))
            args += ["--content", str(Path(tmp) / "content.json")]
        proc = subprocess.run(args, capture_output=True, text=True, check=False,
                              timeout=KERNEL_TIMEOUT_S + RUN_TIMEOUT_S + 120)
        if proc.returncode != 0:
            raise RuntimeError(f"running {path} in JupyterLite failed:\n{proc.stdout}"
                               f"{proc.stderr}")
        return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=run_notebook.__doc__)
    parser.add_argument("base_url", help="the served site, e.g. http://127.0.0.1:8001/")
    parser.add_argument("path", help="the notebook's path in the site's files")
    parser.add_argument("--content", type=Path, help="nbformat JSON to save at path first")
    parser.add_argument("--out", type=Path, required=True, help="where to write the result")
    args = parser.parse_args()
    content = json.loads(args.content.read_text()) if args.content else None
    args.out.write_text(json.dumps(run_notebook(args.base_url, args.path, content)))


if __name__ == "__main__":
    main()
