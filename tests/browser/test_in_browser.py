"""The backend suite and the browser-only checks, run inside Pyodide in headless Chromium.

Each in-browser test is reported as its own item, `test_browser[MODE::NODEID]`, with the node
ids collected natively (conftest.pytest_generate_tests): a test that passes natively must also
pass in the browser.
"""
from __future__ import annotations

from typing import Any

import pytest


def test_browser(case: tuple[str, str], browser_suite: Any) -> None:
    mode, nodeid = case
    result = browser_suite(mode)["results"].get(nodeid)
    if result is None:
        suite = browser_suite(mode)
        pytest.fail(f"{nodeid} was not collected inside the browser ({mode}); pytest exited "
                    f"with {suite['exit']}; its output:\n{suite['console']}", pytrace=False)
    if result["outcome"] != "passed":      # a skip in the browser counts as a failure too
        pytest.fail(f"{nodeid} {result['outcome']} in the browser ({mode}):\n"
                    f"{result['longrepr']}", pytrace=False)


def test_browser_collects_what_native_collects(mode: str, browser_suite: Any,
                                               native_ids: Any) -> None:
    results = browser_suite(mode)["results"]
    want = set(native_ids(mode))
    missing = sorted(want - set(results))
    extra = {k: results[k]["longrepr"][:2000] for k in sorted(set(results) - want)}
    assert not missing and not extra, f"in the browser ({mode}): not collected {missing}; " \
                                      f"collected only there (or errors) {extra}"


def test_the_worker_slice_names_backend_files_that_run_in_the_browser() -> None:
    """The main thread runs every backend file the Worker's slice does not name (MAIN_SLICE is
    derived so), so a name in that slice that is gone or native-only would drop its file from
    the browser without a failure anywhere else."""
    from tests.browser import conftest as c

    backend = {str(p.relative_to(c.ROOT)) for p in (c.ROOT / "tests" / "backend").glob("test_*.py")}
    worker = set(c.WORKER_SLICE) - {"tests/browser/in_pyodide"}
    assert worker <= backend, f"the Worker's slice names files that are gone: {worker - backend}"
    assert not worker & set(c.BROWSER_EXCLUDE), \
        f"the Worker's slice names native-only files: {worker & set(c.BROWSER_EXCLUDE)}"
    assert all("tests/browser/in_pyodide" in s for s in (c.MAIN_SLICE, c.WORKER_SLICE))
