"""Runs INSIDE Pyodide: install pytest, fetch the test files, run them, report each as JSON.

The native harness (conftest.py) sends this file's source plus a call to `run_suite`.
"""
import json
import os

import micropip
from pyodide.http import pyfetch

ROOT = "/home/pyodide/webrlx-tests"


class Recorder:
    """pytest plugin: nodeid -> {"outcome": passed|failed|error|skipped, "longrepr": text,
    "seconds": setup + call + teardown time}."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, str]] = {}

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.results[report.nodeid or "<collection>"] = {
                "outcome": "error", "longrepr": str(report.longrepr)}

    def pytest_runtest_logreport(self, report) -> None:
        result = self.results.setdefault(report.nodeid, {"outcome": "passed", "longrepr": "",
                                                         "seconds": 0.0})
        result["seconds"] += report.duration
        if report.failed:
            outcome = "failed" if report.when == "call" else "error"
            result.update(outcome=outcome, longrepr=f"[{report.when}] {report.longrepr}")
        elif report.skipped and result["outcome"] == "passed":
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
            result.update(outcome="skipped", longrepr=str(reason))


async def fetch_to(url: str, path: str) -> None:
    response = await pyfetch(url)
    if not response.ok:
        raise FileNotFoundError(f"runner: GET {url} gave HTTP {response.status}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(await response.bytes())


async def run_suite(wheels: list[str], files: dict[str, str], env_dirs: dict[str, dict[str, str]],
                    paths: list[str], env: dict[str, str] | None = None) -> str:
    """Install the wheels; fetch files (relative path -> URL) under ROOT and each env_dirs
    folder (env var -> {name: URL}) under /home/pyodide/<env var>, setting the variable; set
    the variables of env; run pytest on paths; return the JSON results."""
    os.environ.update(env or {})
    for url in wheels:
        await micropip.install(url, deps=False)
    for rel, url in files.items():
        await fetch_to(url, os.path.join(ROOT, rel))
    for var, named in env_dirs.items():
        folder = os.path.join("/home/pyodide", var)
        for name, url in named.items():
            await fetch_to(url, os.path.join(folder, name))
        os.environ[var] = folder
    os.chdir(ROOT)
    import pytest

    recorder = Recorder()
    exit_code = pytest.main([*paths, "--rootdir", ROOT, "-o", "addopts=", "-q", "--tb=short",
                             "-p", "no:cacheprovider"], plugins=[recorder])
    return json.dumps({"exit": int(exit_code), "results": recorder.results})
