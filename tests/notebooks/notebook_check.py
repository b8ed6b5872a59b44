"""Where the notebooks are, and how an executed notebook is judged (in every mode)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb"))


def problems(notebook: dict[str, Any]) -> list[str]:
    """Return what went wrong in an executed notebook: error outputs, code cells not run."""
    found = []
    for i, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        first_line = "".join(cell["source"]).strip().splitlines()[0]
        for out in cell.get("outputs", []):
            if out["output_type"] == "error":
                trace = "\n".join(out.get("traceback", []))
                found.append(f"cell {i} ({first_line!r}) raised {out['ename']}: {out['evalue']}"
                             f"\n{trace}")
        if cell.get("execution_count") is None:
            found.append(f"cell {i} ({first_line!r}) was not executed")
    return found
