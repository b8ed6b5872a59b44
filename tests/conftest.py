"""Progress for the long default run: with `-q` pytest prints only dots for about 20 minutes, so
a line names each test file as it starts, with the time since the run began, and the in-browser
sessions (one test item each, several minutes long) say what they are doing first."""
from __future__ import annotations

import sys
import time
from typing import Any

_START = time.monotonic()
_state: dict[str, Any] = {"file": None, "reporter": None}

_SLOW = {
    "tests/browser/test_in_browser.py": "the backend suite inside Pyodide in headless Chromium, "
                                        "main thread then Web Worker: several minutes each",
    "tests/notebooks/test_notebooks_lite.py": "the notebooks in JupyterLite in headless Chromium",
}


def pytest_sessionstart(session: Any) -> None:
    config = session.config
    if sys.platform != "emscripten" and config.getoption("verbose", 0) <= 0:
        _state["reporter"] = config.pluginmanager.get_plugin("terminalreporter")


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    tr = _state["reporter"]
    path = nodeid.split("::")[0]
    if tr is None or path == _state["file"]:
        return
    _state["file"] = path
    m, s = divmod(int(time.monotonic() - _START), 60)
    note = f" ({_SLOW[path]})" if path in _SLOW else ""
    if getattr(getattr(tr, "_tw", None), "width_of_current_line", 0):
        tr.write("\n")                       # after a row of dots
    tr.write_line(f"[{m:3d}m{s:02d}s] {path}{note}")
