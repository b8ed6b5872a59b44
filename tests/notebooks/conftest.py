"""Notebook test fixtures: one item per notebook under notebooks/ and per mode (native kernel,
JupyterLite in headless Chromium), and the JupyterLite site (built from the checkout, cached in
build/lite/) served on 127.0.0.1."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import lite_driver
import pytest
from notebook_check import NOTEBOOKS, ROOT

from webrlx.cli.lite import build_site

# Notebooks whose JupyterLite run is a long model run: SmolLM2 through SwiftShader (about 10
# minutes on a 2-core box), opt-in with WEBRLX_BROWSER_LLM=1 as the browser suite's SmolLM2
# tests; the digits CNN's 20 epochs (70 s; training in a browser Worker is
# tests/browser/test_train_page.py's, 20 s), opt-in with WEBRLX_LITE_ALL=1, which runs every
# notebook there. They always run in the native kernel.
LITE_ALL = os.environ.get("WEBRLX_LITE_ALL") == "1"
LONG_IN_LITE = tuple(name for name, asked in (
    ("train_digits.ipynb", LITE_ALL),
    ("smollm2_generate.ipynb", LITE_ALL or os.environ.get("WEBRLX_BROWSER_LLM") == "1"))
    if not asked)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `notebook` over the notebook file names (less the long ones in JupyterLite
    by default)."""
    if "notebook" in metafunc.fixturenames:
        lite = metafunc.function.__name__ == "test_notebook_runs_in_jupyterlite"
        metafunc.parametrize("notebook", [n for n in NOTEBOOKS
                                          if not (lite and n in LONG_IN_LITE)])


@pytest.fixture(scope="session", autouse=True)
def xdg_runtime_dir() -> None:
    """A private XDG_RUNTIME_DIR silences the Vulkan loader's warning in native kernels."""
    xdg = Path(tempfile.gettempdir()) / f"webrlx-xdg-{os.getuid()}"
    xdg.mkdir(mode=0o700, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(xdg))


@pytest.fixture(scope="session")
def lite_url() -> Iterator[str]:
    """The JupyterLite site (built from the checkout when an input changed), served locally."""
    with lite_driver.site_server(build_site(ROOT)) as url:
        yield url
