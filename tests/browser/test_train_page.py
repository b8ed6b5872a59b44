"""web/train.html trains the digits CNN in a Web Worker on the browser's WebGPU: the phases
show with elapsed time, each epoch's loss reaches the page and the plot, the loss falls, and
the held-out accuracy is shown. Bounded: 4 epochs (the full 20 reach >= 97%, as the native
test checks)."""
from __future__ import annotations

import time
from typing import Any

EPOCHS = 4


def test_train_page_trains_in_a_worker_and_plots_the_loss(chromium: Any,
                                                          web_server: str) -> None:
    page = chromium.new_page()
    try:
        t0 = time.perf_counter()
        page.goto(web_server + f"train.html?epochs={EPOCHS}")
        page.wait_for_function("trainTest.result !== null || trainTest.error !== null",
                               timeout=900_000)
        test = page.evaluate("trainTest")
        phase = page.inner_text("#phase")
        shown = {k: page.inner_text(f"#{k}") for k in ("adapter", "epoch", "loss", "accuracy")}
        # the plot is drawn: some canvas pixels are the line's blue
        blue = page.evaluate("""() => {
            const c = document.getElementById('plot');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4) if (d[i + 2] > 200 && d[i] < 100) n++;
            return n; }""")
    finally:
        page.close()
    assert test["error"] is None, test["error"]
    messages = [p["message"] for p in test["progress"]]
    assert "loading Pyodide" in messages and "compiling the training step" in messages
    epochs = [p for p in test["progress"] if "epoch" in p]
    assert [p["epoch"] for p in epochs] == list(range(1, EPOCHS + 1))
    result = test["result"]
    assert result["history"] == [p["loss"] for p in epochs]
    assert result["history"][-1] < 0.5 * result["history"][0]
    assert result["accuracy"] > 0.8, result
    assert shown["epoch"] == f"{EPOCHS} / {EPOCHS}" and shown["adapter"] == result["adapter"]
    assert shown["accuracy"].endswith("of 360 held-out digits")
    assert phase.startswith(f"trained {result['steps']} steps in"), phase
    assert blue > 50
    print(f"\ntrain page on {result['adapter']}: {EPOCHS} epochs ({result['steps']} steps) in "
          f"{result['seconds']:.0f} s, page total {time.perf_counter() - t0:.0f} s, accuracy "
          f"{result['accuracy']:.1%}, losses {[round(h, 3) for h in result['history']]}")
