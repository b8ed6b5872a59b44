"""The same Python, natively (wgpu-py) and in the browser: equal outputs, equal errors."""
from __future__ import annotations

import json
import textwrap
from typing import Any

import numpy as np
import pytest

# Runs unchanged natively and inside Pyodide; `exe` is the compiled graph.
GRAPH = """
import json
import numpy as np
import webrlx as wr

g = wr.Graph()
x = g.input("x", ("batch", 16))
w = g.param("w", (16, 8))
h = ((x @ w) * 2).exp()
y = (h.softmax(axis=-1) + x.sum(axis=-1, keepdims=True).tanh()).sqrt()
exe = wr.compile(g, outputs=[y, (x * 2).exp()], device=DEVICE)
rng = np.random.default_rng(0)
exe.set_params({"w": rng.standard_normal((16, 8)).astype(np.float32) / 4})
feeds = {"x": rng.standard_normal((3, 16)).astype(np.float32)}
"""

# Bad feeds: each must raise the same exception type and message in both places.
BAD_FEEDS = """
BAD_FEEDS = {
    "wrong shape": {"x": np.ones((3, 15), np.float32)},
    "wrong dtype": {"x": np.ones((3, 16), np.complex64)},
    "missing input": {},
    "unknown input": {"x": np.ones((3, 16), np.float32), "z": np.ones(2, np.float32)},
    "not a dict": [np.ones((3, 16), np.float32)],
}

def errors(run):
    found = {}
    for case, bad in BAD_FEEDS.items():
        try:
            run(bad)
        except Exception as err:
            found[case] = [type(err).__module__ + "." + type(err).__qualname__, str(err)]
        else:
            found[case] = None
    return found
"""


def native(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"DEVICE": "gpu"}
    exec(textwrap.dedent(code), namespace)
    return namespace


def in_browser(browser_python: Any, mode: str, code: str, result: str) -> Any:
    return json.loads(browser_python(mode).run(f"DEVICE = None\n{code}\n{result}"))


def test_outputs_equal_native(mode: str, browser_python: Any) -> None:
    ns = native(GRAPH)
    want = ns["exe"].run(ns["feeds"])
    got_sync, got_async = in_browser(
        browser_python, mode, GRAPH + "outs = [exe.run(feeds), await exe.run_async(feeds)]",
        "json.dumps([[o.tolist() for o in run] for run in outs])")
    for got in (got_sync, got_async):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g, np.float32), w, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("form", ["run", "run_async"])
def test_bad_input_raises_as_natively(mode: str, form: str, browser_python: Any) -> None:
    ns = native(GRAPH + BAD_FEEDS)
    want = ns["errors"](ns["exe"].run)
    assert all(want.values()), f"every bad feed must raise natively: {want}"
    run = "exe.run" if form == "run" else "lambda f: run_sync(exe.run_async(f))"
    got = in_browser(browser_python, mode,
                     GRAPH + BAD_FEEDS + "from pyodide.ffi import run_sync",
                     f"json.dumps(errors({run}))")
    assert got == want
