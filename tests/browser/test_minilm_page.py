"""web/minilm.html: downloads the weights with progress, embeds on WebGPU in Pyodide, and shows
sensible similarities and search hits."""
from __future__ import annotations

from typing import Any


def test_minilm_page_embeds_and_searches(chromium: Any, web_server: str) -> None:
    page = chromium.new_page()
    try:
        page.goto(web_server + "minilm.html")
        done = "['Ready', 'failed'].some(s => document.getElementById('status')" \
               ".textContent.startsWith(s))"
        page.wait_for_function(done, timeout=300_000)
        status = page.inner_text("#status")
        rows = page.eval_on_selector_all(
            "#matrix tr", "rows => rows.slice(1).map(r => [...r.querySelectorAll('td')]"
                          ".map(td => Number(td.textContent)))")
        hits = page.eval_on_selector_all("#results li", "items => items.map(i => i.textContent)")
    finally:
        page.close()
    assert status.startswith("Ready on") and "navigator.gpu" in status, status
    assert len(rows) == 4 and all(abs(rows[i][i] - 1) < 1e-2 for i in range(4))
    assert rows[0][1] > rows[0][2] > rows[0][3] - 0.2      # food ~ bread, more than horse
    assert hits and ("guitar" in hits[0] or "violinist" in hits[0]), hits
