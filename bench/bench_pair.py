"""`python -m webrlx bench` natively (torch CUDA beside) and under the Dawn runner (--no-ref),
set side by side case by case: each engine's webrlx time, torch's (from the native run, the same
machine session), and the ratios. Prints JSON.

    python -m webrlx bench --only f16 > native.json
    python -m webrlx dawn -- bench --no-ref --only f16 > dawn.json
    python bench/bench_pair.py native.json dawn.json [more native dawn pairs ...]

Each row: native_ms, dawn_ms, torch_ms (the native run's reference), dawn_over_native (> 1:
Dawn is slower), torch_over_dawn and torch_over_native (> 1: webrlx is faster than torch).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _read(path: str) -> dict[str, Any]:
    """A bench JSON, whole or after lines logged before it (from its last line "{" on: files
    written before the Dawn runner kept Dawn's own log off stdout)."""
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        lines = text.splitlines()
        start = max(i for i, line in enumerate(lines) if line.startswith("{"))
        return json.loads("\n".join(lines[start:]))


def pair(native: dict[str, Any], dawn: dict[str, Any]) -> list[dict[str, Any]]:
    by_key = {(c["case"], c.get("dtype")): c for c in dawn["cases"] if "webrlx_ms" in c}
    rows = []
    for c in native["cases"]:
        d = by_key.get((c["case"], c.get("dtype")))
        if d is None or "webrlx_ms" not in c:
            continue
        row: dict[str, Any] = {"case": c["case"], "dtype": c.get("dtype"),
                               "native_ms": c["webrlx_ms"], "dawn_ms": d["webrlx_ms"],
                               "torch_ms": c.get("ref_ms"), "reference": c.get("reference"),
                               "dawn_over_native": d["webrlx_ms"] / c["webrlx_ms"]}
        if c.get("ref_ms"):
            row["torch_over_dawn"] = c["ref_ms"] / d["webrlx_ms"]
            row["torch_over_native"] = c["ref_ms"] / c["webrlx_ms"]
        rows.append(row)
    return rows


def main() -> None:
    paths = sys.argv[1:]
    if not paths or len(paths) % 2:
        raise SystemExit(__doc__)
    out: dict[str, Any] = {"method": __doc__.split("\n\n")[0], "rows": []}
    for n, d in zip(paths[::2], paths[1::2]):
        native, dawn = _read(n), _read(d)
        out.setdefault("native_adapter", native.get("adapter"))
        out.setdefault("dawn_adapter", dawn.get("adapter"))
        out["rows"] += pair(native, dawn)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
