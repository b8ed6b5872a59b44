"""Backend tests run on every available device: the GPU adapter ("gpu": lavapipe natively,
navigator.gpu inside Pyodide) and the numpy reference. The same files run in the browser."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from helpers import for_browser

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


# The numpy reference device is the same Python code in the browser as natively, so inside
# Pyodide (and when collecting the node ids the browser must reproduce) it runs only for the
# files where wasm32 (32-bit indices, its own numpy build) could change its results: bit-level
# block decoding, integer elementwise ops, the sampler's u32 hashing, NaN/inf handling and the
# runtime. That took about 1,000 items off each in-browser session (~4 minutes of a default
# run that then took 41); WEBRLX_BROWSER_REFERENCE=1 runs every reference test there too.
BROWSER_REFERENCE_FILES = ("test_quant_formats.py", "test_elementwise.py", "test_sample.py",
                           "test_nan_inf.py", "test_runtime.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not for_browser() or os.environ.get("WEBRLX_BROWSER_REFERENCE") == "1":
        return
    keep, drop = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        on_reference = spec is not None and spec.params.get("backend") == "reference"
        listed = Path(str(item.fspath)).name in BROWSER_REFERENCE_FILES
        (drop if on_reference and not listed else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
