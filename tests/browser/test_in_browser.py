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
