"""tools/cdp_pipe.py (the standard-library DevTools client bench/device_chromium.sh uses on
the GPU machine, which has no playwright) against this box's Chromium: a page's awaited
expression comes back, WebGPU included, and a page that throws makes it exit 1 naming why."""
from __future__ import annotations

import http.server
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/lib/chromium/chromium"


@pytest.fixture(scope="module")
def page_url():
    with tempfile.TemporaryDirectory() as www:
        Path(www, "index.html").write_text("<!doctype html><title>cdp</title>")
        handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=www)  # noqa: E731
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}/"
        finally:
            server.shutdown()
            server.server_close()


def _cdp(url: str, expression: str) -> subprocess.CompletedProcess:
    if not os.path.exists(CHROMIUM):
        raise FileNotFoundError(f"{CHROMIUM} is missing: `apt-get install -y chromium`")
    xdg = Path(tempfile.gettempdir()) / f"webrlx-xdg-{os.getuid()}"
    xdg.mkdir(mode=0o700, exist_ok=True)
    return subprocess.run([sys.executable, str(ROOT / "tools" / "cdp_pipe.py"), "--chromium",
                           CHROMIUM, "--url", url, "--eval", expression, "--timeout", "60",
                           "--", "--enable-unsafe-webgpu", "--enable-unsafe-swiftshader"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "XDG_RUNTIME_DIR": str(xdg)})


def test_an_awaited_expression_comes_back_with_webgpu(page_url):
    got = _cdp(page_url, "(async () => { const a = await navigator.gpu.requestAdapter(); "
                         "return document.title + ' ' + a.info.architecture + ' ' + (6 * 7); })()")
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip() == "cdp swiftshader 42"


def test_a_page_that_throws_exits_1_naming_it(page_url):
    got = _cdp(page_url, "(async () => { throw new Error('no such model'); })()")
    assert got.returncode == 1 and "no such model" in got.stderr, got.stderr[-2000:]
