"""Every notebook runs top to bottom in a native IPython kernel (wgpu-py: lavapipe here)."""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient
from notebook_check import NOTEBOOK_DIR, problems

CELL_TIMEOUT_S = 600


def test_notebook_runs_natively(notebook: str, tmp_path: Path) -> None:
    nb = nbformat.read(NOTEBOOK_DIR / notebook, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT_S,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()     # raises CellExecutionError, with the traceback, at the first failure
    found = problems(nb)
    assert not found, "\n".join(found)
