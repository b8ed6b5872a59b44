"""The demo page web/index.html boots and runs its graph, on the main thread and in a Worker."""
from __future__ import annotations

import json
from typing import Any

import numpy as np


def test_demo_page_runs_on_webgpu(mode: str, chromium: Any, web_server: str) -> None:
    page = chromium.new_page()
    try:
        page.goto(web_server + ("?worker=1" if mode == "worker" else ""))
        done = "['Ran', 'failed'].some(s => document.getElementById('status')" \
               ".textContent.startsWith(s))"
        page.wait_for_function(done, timeout=120_000)
        status = page.inner_text("#status")
        result = json.loads(page.inner_text("#output"))
        links = page.eval_on_selector_all("a", "as => as.map(a => a.getAttribute('href'))")
    finally:
        page.close()
    where = "in a Web Worker" if mode == "worker" else "on the main thread"
    assert status.startswith("Ran on") and where in status, result
    assert result["backend"] == "navigator.gpu"
    # the landing page leads a newcomer to every demo page
    assert {"minilm.html", "chat.html", "train.html"} <= set(links), links
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    logits = np.ones((2, 4)) @ w
    want = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    shown = result["softmax(x @ w)"].replace("[", " ").replace("]", " ").split()
    np.testing.assert_allclose(np.array(shown, float).reshape(2, 3), want, atol=1e-4)
