"""Runs INSIDE Pyodide: install pytest, write the test files, run them, report each as JSON.

The native harness (conftest.py) sends this file's source plus a call to `run_suite`.
"""
import json
import os

import micropip

ROOT = "/home/pyodide/webrlx-tests"


class Recorder:
    """pytest plugin: nodeid -> {"outcome": passed|failed|error|skipped, "longrepr": text}."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, str]] = {}

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.results[report.nodeid or "<collection>"] = {
                "outcome": "error", "longrepr": str(report.longrepr)}

    def pytest_runtest_logreport(self, report) -> None:
        result = self.results.setdefault(report.nodeid, {"outcome": "passed", "longrepr": ""})
        if report.failed:
            outcome = "failed" if report.when == "call" else "error"
            result.update(outcome=outcome, longrepr=f"[{report.when}] {report.longrepr}")
        elif report.skipped and result["outcome"] == "passed":
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
            result.update(outcome="skipped", longrepr=str(reason))


async def run_suite(files: dict[str, str], paths: list[str], wheels: list[str]) -> str:
    """Install the wheels, write files under ROOT, run pytest on paths; return JSON results."""
    for url in wheels:
        await micropip.install(url, deps=False)
    for rel, text in files.items():
        path = os.path.join(ROOT, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    os.chdir(ROOT)
    import pytest

    recorder = Recorder()
    exit_code = pytest.main([*paths, "--rootdir", ROOT, "-o", "addopts=", "-q", "--tb=short",
                             "-p", "no:cacheprovider"], plugins=[recorder])
    return json.dumps({"exit": int(exit_code), "results": recorder.results})
