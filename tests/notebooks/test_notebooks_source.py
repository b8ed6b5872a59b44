"""The committed notebooks: no stored outputs, prose before every code cell, the same cells for
every platform, and checks of their own results."""
from __future__ import annotations

import re

import nbformat
from notebook_check import NOTEBOOK_DIR

# A cell that names one of these would be choosing a code path per platform (or installing).
PLATFORM_SPECIFIC = re.compile(r"sys\.platform|emscripten|pyodide|\bjs\b|piplite|micropip|%pip")


def _notebook(name: str) -> nbformat.NotebookNode:
    nb = nbformat.read(NOTEBOOK_DIR / name, as_version=4)
    nbformat.validate(nb)
    return nb


def test_notebook_is_committed_without_outputs(notebook: str) -> None:
    for i, cell in enumerate(_notebook(notebook).cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, \
                f"cell {i} has stored outputs: clear them before committing"


def test_every_code_cell_follows_prose(notebook: str) -> None:
    cells = _notebook(notebook).cells
    assert cells[0].cell_type == "markdown"
    for i, cell in enumerate(cells):
        if cell.cell_type == "code":
            assert cells[i - 1].cell_type == "markdown", f"cell {i} has no prose before it"


def test_cells_are_the_same_on_every_platform(notebook: str) -> None:
    for i, cell in enumerate(_notebook(notebook).cells):
        if cell.cell_type == "code":
            assert not PLATFORM_SPECIFIC.search(cell.source), f"cell {i}:\n{cell.source}"


def test_notebook_asserts_its_results(notebook: str) -> None:
    code = "\n".join(c.source for c in _notebook(notebook).cells if c.cell_type == "code")
    assert re.search(r"^\s*assert ", code, re.MULTILINE)
