"""`python -m webrlx docs`: build the documentation site (docs/ and mkdocs.yml of a source
checkout, with mkdocs-material and mkdocstrings' API reference) into build/site, then serve it
on http://127.0.0.1:8002/ until Ctrl+C.

Needs mkdocs, mkdocs-material and mkdocstrings[python]:
    pip install mkdocs mkdocs-material "mkdocstrings[python]"     (or: pip install -e ".[test]")
`--build-only` builds and exits; CI runs `python -m mkdocs build --strict` (no warnings, no
broken links). Ports: `serve` has 8000, `lite` 8001, `docs` 8002; a port in use is a one-line
error, `--port N` picks another, `--port 0` any free one.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from .serve import PORT_HELP, PortInUseError, base_url, make_server, serve_forever

DOCS_PORT = 8002
NEEDS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
INSTALL = 'pip install mkdocs mkdocs-material "mkdocstrings[python]"'


def missing_packages() -> list[str]:
    """The modules the site build needs that are not installed."""
    missing = []
    for name in NEEDS:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:          # a parent package is missing
            found = False
        if not found:
            missing.append(name)
    return missing


def docs_root() -> Path:
    """Return the source checkout whose mkdocs.yml and docs/ describe this package."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "mkdocs.yml").is_file() or not (root / "docs").is_dir():
        raise FileNotFoundError(f"webrlx docs: {root} is not a webrlx source checkout (no "
                                "mkdocs.yml or docs/); clone the repository to build the docs")
    return root


def build_site(root: Path, strict: bool = False) -> Path:
    """Build the site with mkdocs into root/build/site and return that folder."""
    site = root / "build" / "site"
    cmd = [sys.executable, "-m", "mkdocs", "build", "--config-file",
           str(root / "mkdocs.yml"), "--site-dir", str(site)]
    # --quiet hides the warnings, and --strict then counts none: strict builds show them
    cmd += ["--strict"] if strict else ["--quiet"]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}     # mkdocs-material's banner
    subprocess.run(cmd, check=True, cwd=root, env=env)
    return site


def main_docs(argv: list[str] | None = None) -> int:
    """CLI: `python -m webrlx docs [--port N] [--open] [--build-only] [--strict]`."""
    parser = argparse.ArgumentParser(prog="python -m webrlx docs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=DOCS_PORT,
                        help=f"default {DOCS_PORT}; {PORT_HELP}")
    parser.add_argument("--open", action="store_true", help="open the site in a browser")
    parser.add_argument("--build-only", action="store_true", help="build build/site and exit")
    parser.add_argument("--strict", action="store_true", help="fail on any mkdocs warning")
    args = parser.parse_args(argv)
    missing = missing_packages()
    if missing:
        print(f"webrlx docs: {', '.join(missing)} not installed; install them with\n"
              f"    {INSTALL}", file=sys.stderr)
        return 1
    try:
        root = docs_root()
        server = None if args.build_only else make_server({"/": root / "build" / "site"}, {},
                                                          args.port)
    except (FileNotFoundError, PortInUseError) as e:
        print(e if str(e).startswith("webrlx docs") else f"webrlx docs: {e}", file=sys.stderr)
        return 1
    try:
        site = build_site(root, args.strict)
    except subprocess.CalledProcessError as e:
        if server is not None:
            server.server_close()
        print(f"webrlx docs: mkdocs build failed (exit {e.returncode})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    if server is None:
        print(f"webrlx docs: built {site}")
        return 0
    serve_forever(server, "serving the documentation", [(base_url(server), "webrlx docs")],
                  args.open)
    return 0


if __name__ == "__main__":
    sys.exit(main_docs())
