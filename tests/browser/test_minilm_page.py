"""web/minilm.html: downloads the weights with progress, embeds on WebGPU in Pyodide, and shows
sensible similarities and search hits; while it works it shows a phase, ticking seconds and a
spinner; search runs from its button as from Enter; the table is labelled with the sentences;
the status names the dtype the page chose (?dtype=, default auto: float16 only where the adapter
offers subgroup matrices)."""
from __future__ import annotations

import time
from typing import Any

READY = "['Ready', 'failed'].some(s => document.getElementById('status').textContent" \
        ".startsWith(s))"


def test_minilm_page_embeds_and_searches(chromium: Any, web_server: str) -> None:
    page = chromium.new_page()
    try:
        page.goto(web_server + "minilm.html")
        page.wait_for_function("document.getElementById('elapsed').textContent !== ''")
        seen = []                      # (phase, elapsed) while it works toward ready
        spins = []                     # the spinner's visibility at each phase seen
        for _ in range(3):
            # the spinner first, then the phase: a page that turns ready in between reads
            # Ready, and that sample does not count (a page ready within the samples must not
            # read as "not spinning")
            spins.append(page.is_visible(".spin"))
            seen.append((page.inner_text("#status"), page.inner_text("#elapsed")))
            time.sleep(1.2)
        spinning = any(v for (p, _), v in zip(seen, spins) if not p.startswith("Ready"))
        page.wait_for_function(READY, timeout=300_000)
        status = page.inner_text("#status")
        spin_after = page.is_visible(".spin")
        rows = page.eval_on_selector_all(
            "#matrix tr", "rows => rows.slice(1).map(r => [...r.querySelectorAll('td')]"
                          ".map(td => Number(td.textContent)))")
        labels = page.eval_on_selector_all("#matrix tr th:first-child",
                                           "cells => cells.slice(1).map(c => c.textContent)")
        hits = page.eval_on_selector_all("#results li", "items => items.map(i => i.textContent)")
        page.fill("#query", "a person is cooking dinner")
        page.click("#search")
        page.wait_for_function("!document.getElementById('search').disabled && "
                               "document.querySelector('#results li') && !document.querySelector"
                               "('#results li').textContent.includes('guitar')",
                               timeout=120_000)
        new_hits = page.eval_on_selector_all("#results li",
                                             "items => items.map(i => i.textContent)")
    finally:
        page.close()
    assert status.startswith("Ready on") and "navigator.gpu" in status, status
    assert "float32)" in status, status    # dtype auto: no subgroup matrices on SwiftShader
    phases = [p for p, _ in seen if not p.startswith("Ready")]
    assert phases and all(p.strip() for p in phases), seen
    ticks = [int(e.rstrip(" s")) for _, e in seen if e]
    assert spinning and not spin_after, "the spinner runs until ready, then stops"
    assert len(set(ticks)) >= 2 and ticks == sorted(ticks), f"elapsed must tick: {seen}"
    assert len(rows) == 4 and all(abs(rows[i][i] - 1) < 1e-2 for i in range(4))
    assert rows[0][1] > rows[0][2] > rows[0][3] - 0.2      # food ~ bread, more than horse
    assert labels[0].startswith("1: A man is eating"), labels
    assert hits and ("guitar" in hits[0] or "violinist" in hits[0]), hits
    assert "chef" in new_hits[0] or "onion" in new_hits[0], new_hits
