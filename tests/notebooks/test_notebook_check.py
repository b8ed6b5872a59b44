"""problems() finds every way an executed notebook can have failed."""
from __future__ import annotations

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from notebook_check import problems


def test_problems_reports_errors_and_cells_not_run() -> None:
    error = new_output("error", ename="AssertionError", evalue="wrong", traceback=["tb"])
    nb = new_notebook(cells=[
        new_markdown_cell("prose"),
        new_code_cell("x = 1", execution_count=1),
        new_code_cell("assert x == 2", execution_count=2, outputs=[error]),
        new_code_cell("y = 3"),
    ])
    assert problems(nb) == ["cell 2 ('assert x == 2') raised AssertionError: wrong\ntb",
                            "cell 3 ('y = 3') was not executed"]


def test_problems_accepts_a_clean_run() -> None:
    stream = new_output("stream", name="stdout", text="ok\n")
    nb = new_notebook(cells=[new_code_cell("print('ok')", execution_count=1, outputs=[stream])])
    assert problems(nb) == []
