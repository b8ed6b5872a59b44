"""Per-dispatch and per-readback host cost of webrlx natively (wgpu-py) and in the browser
(Pyodide + navigator.gpu in headless Chromium, main thread and Web Worker). Prints JSON.

    python bench/probes/ffi_overhead.py [--repeats 50] [--out results.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench" / "probes"), str(ROOT / "tests" / "browser")]

import browser_harness  # noqa: E402 - from the paths set above
import ffi_workload  # noqa: E402

from webrlx.cli.serve import page_config  # noqa: E402
from webrlx.cli.web_assets import build  # noqa: E402


def in_browser(repeats: int) -> dict[str, dict]:
    """Run ffi_workload.measure inside Pyodide in headless Chromium, in each mode."""
    assets = build(ROOT, tests=False)
    source = (ROOT / "bench" / "probes" / "ffi_workload.py").read_text()
    call = f"import json\njson.dumps(await measure(repeats={repeats}))"
    results = {}
    with browser_harness.web_server(assets) as url, browser_harness.chromium() as context:
        for mode in ("main", "worker"):
            python = browser_harness.BrowserPython(context, url, mode, page_config(assets))
            results[f"browser-{mode}"] = json.loads(python.run(source + "\n" + call))
            python.page.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    results = {"native": asyncio.run(ffi_workload.measure("gpu", args.repeats)),
               **in_browser(args.repeats)}
    text = json.dumps(results, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
