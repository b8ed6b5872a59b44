"""Every notebook runs top to bottom in JupyterLite: the Pyodide kernel in a Web Worker of
headless Chromium, WebGPU through SwiftShader, everything served from 127.0.0.1."""
from __future__ import annotations

from lite_driver import run_isolated
from nbformat.v4 import new_code_cell, new_notebook
from notebook_check import problems


def test_notebook_runs_in_jupyterlite(notebook: str, lite_url: str) -> None:
    run = run_isolated(lite_url, notebook)
    found = problems(run["notebook"])
    console = "\n".join(run["console"][-30:])
    assert not found, "\n".join(found) + f"\nconsole:\n{console}"
    assert run["result"] == {"done": True, "ok": True}, run["result"]
    assert not run["outside"], f"requests left the machine: {run['outside']}"


def test_a_failing_cell_fails_the_jupyterlite_run(lite_url: str) -> None:
    cells = [new_code_cell("x = 1"), new_code_cell("assert x == 2, 'a wrong number'")]
    run = run_isolated(lite_url, "failing.ipynb", new_notebook(cells=cells))
    (found,) = problems(run["notebook"])
    assert found.startswith("cell 1 ") and "AssertionError" in found and \
        "a wrong number" in found, found
