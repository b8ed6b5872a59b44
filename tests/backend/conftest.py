"""Backend tests run on every available device: the GPU adapter ("gpu": lavapipe natively,
navigator.gpu inside Pyodide) and the numpy reference. The same files run in the browser."""
from __future__ import annotations

import sys

import pytest

import webrlx as wr
from webrlx.runtime import autotune

if sys.platform == "emscripten":
    # SwiftShader: timing every kernel variant of every new shape cost ~12 minutes of the
    # in-browser session; the defaults run here, each variant through its PREFER test, and
    # tests/browser/in_pyodide checks that the autotuner times variants in the browser
    autotune.TIME_VARIANTS = False

BACKENDS = ["gpu", "reference"]


@pytest.fixture(params=BACKENDS, scope="session")
def backend(request: pytest.FixtureRequest):  # noqa: ANN201
    return wr.device(request.param)
