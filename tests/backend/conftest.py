"""Backend tests run on every available device: the GPU adapter ("gpu": lavapipe natively,
navigator.gpu inside Pyodide) and the numpy reference. The same files run in the browser."""
from __future__ import annotations

import pytest

import webrlx as wr

BACKENDS = ["gpu", "reference"]


@pytest.fixture(params=BACKENDS, scope="session")
def backend(request: pytest.FixtureRequest):  # noqa: ANN201
    return wr.device(request.param)
