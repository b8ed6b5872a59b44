"""Notebook test fixtures: one item per notebook under notebooks/ and per mode (native kernel,
JupyterLite in headless Chromium), and the JupyterLite site (built from the checkout, cached in
build/lite/) served on 127.0.0.1."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterator

import lite_driver
import pytest
from notebook_check import NOTEBOOKS, ROOT

from webrlx.cli.lite import build_site


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `notebook` over the notebook file names."""
    if "notebook" in metafunc.fixturenames:
        metafunc.parametrize("notebook", NOTEBOOKS)


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
