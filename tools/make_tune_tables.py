"""Regenerate webrlx/data/tune_tables.json, the autotuner's shipped table per adapter family:
tune MiniLM's shapes (batches and lengths a page commonly runs) natively on SwiftShader (the
ICD Debian's chromium ships: Chromium's own software WebGPU) and on llvmpipe, with an empty
tune cache, and store what the tuner picked. The browser does not time variants on a page's
critical path; it reads this table for adapters of these families (webrlx/runtime/autotune.py).

    python tools/make_tune_tables.py            # a few minutes on a 2-core machine
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "webrlx" / "data" / "tune_tables.json"
ICDS = {"swiftshader": "/usr/lib/chromium/vk_swiftshader_icd.json", "llvmpipe": None}
SHAPES = [(1, 16), (1, 32), (1, 128), (2, 48), (3, 16), (4, 32), (8, 128)]   # (batch, length)

TUNE = f"""
import json, numpy as np
from webrlx.models import minilm
from webrlx.runtime import autotune
enc = minilm.load()
rng = np.random.default_rng(0)
for b, s in {SHAPES!r}:
    rows = [[101] + list(rng.integers(1000, 29000, s - 2)) + [102] for _ in range(b)]
    enc.executable.run(enc.feeds(rows))
(table,) = autotune.table().values()
print(json.dumps(dict(adapter=enc.device.info.name, table=table)))
"""


def main() -> None:
    tables = {}
    for family, icd in ICDS.items():
        with tempfile.TemporaryDirectory() as home:
            env = {**os.environ, "HOME": home, "WEBRLX_AUTOTUNE": "1", "PYTHONPATH": str(ROOT)}
            if icd:
                env["VK_DRIVER_FILES"] = icd
            out = subprocess.run([sys.executable, "-c", TUNE], env=env, check=True,
                                 capture_output=True, text=True).stdout
        got = json.loads(out.strip().splitlines()[-1])
        assert family in got["adapter"].lower(), (family, got["adapter"])
        tables[family] = dict(sorted(got["table"].items()))
        print(f"{family}: {got['adapter']}: {len(got['table'])} shapes", file=sys.stderr)
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps(tables, indent=1) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
