"""The autotuner's table survives a page reload: tuned once (timing turned on), the next page
(a new Pyodide, the same origin's IndexedDB) runs the same graph with nothing timed and only
the pipelines that run compiled. Main thread and Web Worker."""
from __future__ import annotations

import json
from typing import Any

from browser_harness import BrowserPython

from webrlx.cli.serve import page_config

RUN = """
import json, numpy as np, webrlx as wr
from webrlx.runtime import autotune
dev = await wr.device_async()
timed = []
_time = dev.time_dispatch
dev.time_dispatch = lambda *a, **k: timed.append(1) or _time(*a, **k)
autotune.enable(True)        # timing allowed: only a stored table makes it unnecessary
g = wr.Graph()
a, b = g.input("a", (64, 96)), g.input("b", (96, N))
exe = wr.compile(g, outputs=[(a @ b).relu()], device=dev)
before = dev.stats["pipelines"]
av = np.linspace(-1, 1, 64 * 96, dtype=np.float32).reshape(64, 96)
bv = np.linspace(1, -1, 96 * N, dtype=np.float32).reshape(96, N)
(out,) = exe.run({"a": av, "b": bv})
np.testing.assert_allclose(out, np.maximum(av @ bv, 0), rtol=1e-4, atol=1e-4)
running = len({id(d.pipeline) for d in exe.last_plan.dispatches})
result = dict(made=dev.stats["pipelines"] - before, running=running, timed=len(timed),
              table=autotune.table(dev.info.tune_name))
"""


def _page(chromium: Any, web_server: str, mode: str, config: dict[str, str], n: int,
          first: bool) -> dict[str, Any]:
    python = BrowserPython(chromium, web_server, mode, config)
    try:
        setup = ("from webrlx.runtime import autotune\n"
                 "autotune.CACHE_FILE.unlink(missing_ok=True)\nautotune._memory.clear()\n"
                 if first else "")
        code = f"N = {n}\n{setup}{RUN}\nawait autotune.persist_async()\njson.dumps(result)"
        return json.loads(python.run(code))
    finally:
        python.page.close()


def test_a_stored_table_means_no_tuning_after_reload(chromium: Any, web_server: str,
                                                     web_assets: Any, mode: str) -> None:
    config = page_config(web_assets)
    n = 128 if mode == "main" else 132       # each mode its own shape (one origin's table)
    tuned = _page(chromium, web_server, mode, config, n, first=True)
    assert tuned["timed"] >= 2 and tuned["made"] > tuned["running"], tuned
    assert any(k.startswith("matmul") for k in tuned["table"]), tuned
    again = _page(chromium, web_server, mode, config, n, first=False)
    assert again["table"] == tuned["table"], "the table did not survive the reload"
    assert again["timed"] == 0, again
    assert again["made"] == again["running"], again     # only the pipelines that run
