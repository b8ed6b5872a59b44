"""Browser test fixtures: one headless Chromium, one static server and one booted webrlx
Pyodide per mode ("main" thread, Web "worker") for the whole session; the backend suite runs
inside each (browser_suite). Assets are built on first use (cached; see webrlx.cli.web_assets).
"""
from __future__ import annotations

import collections
import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import browser_harness
import pytest

from webrlx.cli.serve import page_config
from webrlx.cli.web_assets import WebAssets, build

ROOT = Path(__file__).resolve().parents[2]
MODES = ("main", "worker")
# What the in-browser pytest session runs: the backend suite and the browser-only checks.
SUITE_PATHS = ("tests/backend", "tests/browser/in_pyodide")
# Backend tests left out of the in-browser session: SmolLM2's 98 MB model through SwiftShader
# and numpy-in-wasm takes longer than the whole default suite may (WEBRLX_BROWSER_LLM=1 runs it
# in the browser too, with the chat page's test); the GGUF family fixtures and the engine's
# references are made by transformers + torch + gguf, which Pyodide lacks (always native;
# test_chat_families.py checks each family's greedy tokens in the browser, through chat.html).
# test_llm_float_weights.py writes its F16 / BF16 files with the gguf package (not in Pyodide);
# the f16 / bf16 kernels run in the browser through test_quant_formats.py.
# test_llm_llamacpp.py reads the 6.6 MB of tests/fixtures/llamacpp/ (not sent to the browser).
# test_gemma3_real.py runs a real 253 MB file (minutes natively on lavapipe already).
# test_llm_limits.py loads the family fixtures (made natively, as above); the page's check it
# tests runs in the browser through test_chat_families.py.
NATIVE_ONLY = ("tests/backend/test_llm_families.py", "tests/backend/test_engine.py",
               "tests/backend/test_llm_float_weights.py", "tests/backend/test_llm_llamacpp.py",
               "tests/backend/test_llm_head_dim.py", "tests/backend/test_gemma3_real.py",
               "tests/backend/test_llm_limits.py")
BROWSER_EXCLUDE = NATIVE_ONLY if os.environ.get("WEBRLX_BROWSER_LLM") == "1" else \
    ("tests/backend/test_smollm2.py", *NATIVE_ONLY)
IGNORE_ARGS = [f"--ignore={p}" for p in BROWSER_EXCLUDE]
# The two sessions split the backend suite between them, so that each backend test runs in the
# browser once: the Worker (the same kernels and runtime; what differs is how Pyodide boots and
# waits there) takes the runtime, device tensors and loss, debug tools, the models, matmul,
# subgroup matrices, sampling, decoder ops, the float formats and layouts; the main thread
# takes every other backend file. Both run the browser-only checks (in_pyodide/).
# WEBRLX_BROWSER_FULL=1 runs the whole backend suite in both (about 12 more minutes on the
# 2-core box; WEBRLX_BROWSER_WORKER_FULL=1, its older name, still works).
WORKER_SLICE = ("tests/browser/in_pyodide", *(f"tests/backend/test_{name}.py" for name in (
    "runtime", "device_tensor", "device_loss", "debug_tools", "minilm", "models", "matmul",
    "smat", "sample", "decoder_ops", "quant_formats", "layout")))
MAIN_SLICE = ("tests/browser/in_pyodide", *(
    str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests" / "backend").glob("test_*.py"))
    if str(p.relative_to(ROOT)) not in (*WORKER_SLICE, *BROWSER_EXCLUDE)))
FULL = "1" in (os.environ.get("WEBRLX_BROWSER_FULL"), os.environ.get("WEBRLX_BROWSER_WORKER_FULL"))
MODE_PATHS = {"main": SUITE_PATHS if FULL else MAIN_SLICE,
              "worker": SUITE_PATHS if FULL else WORKER_SLICE}
# WEBRLX_BROWSER_ONLY=path,path runs just those test files or folders in both (while working
# on them; the default suite runs the above)
if os.environ.get("WEBRLX_BROWSER_ONLY"):
    MODE_PATHS = dict.fromkeys(MODES, tuple(os.environ["WEBRLX_BROWSER_ONLY"].split(",")))


# in_pyodide/ imports `js`: it runs only inside the browser, through the runner.
collect_ignore = ["in_pyodide"]
# The chat page loads SmolLM2 in SwiftShader (minutes): a long model run, opt-in as above.
if os.environ.get("WEBRLX_BROWSER_LLM") != "1":
    collect_ignore.append("test_chat_page.py")
collect_ignore += [] if os.environ.get("WEBRLX_BENCH_BROWSER") else ["test_bench_browser.py"]


def suite_files() -> list[str]:
    """Return the files the in-browser pytest session needs, as paths from the root."""
    tests = ROOT / "tests"
    paths = [ROOT / "pyproject.toml", tests / "__init__.py", tests / "conftest.py",
             *sorted((tests / "fixtures").glob("*"))]
    for folder in SUITE_PATHS:
        paths += sorted((ROOT / folder).rglob("*.py"))
    return [str(p.relative_to(ROOT)) for p in paths if p.is_file()]


def model_dirs() -> dict[str, tuple[str, Path, tuple[str, ...]]]:
    """Model folders the backend tests find through an env var: var -> (URL, folder, files)."""
    from webrlx.models.assets import MINILM_FILES, minilm_dir, smollm2_gguf

    dirs: dict[str, tuple[str, Path, tuple[str, ...]]] = {}
    # A model that is missing is left out: the native run fails the same tests, with the hint.
    try:
        dirs["WEBRLX_MINILM_DIR"] = ("/models/minilm/", minilm_dir(), MINILM_FILES)
    except FileNotFoundError:
        pass
    try:
        gguf = smollm2_gguf()
        dirs["WEBRLX_SMOLLM2_DIR"] = ("/models/smollm2/", gguf.parent, (gguf.name,))
    except FileNotFoundError:
        pass
    return dirs


@functools.cache
def native_test_ids(paths: tuple[str, ...] = SUITE_PATHS) -> tuple[str, ...]:
    """Collect (natively, in a subprocess) the node ids the browser session must reproduce."""
    ids: list[str] = []
    backend = tuple(p for p in paths if p.startswith("tests/backend"))
    pyodide = tuple(p for p in paths if p.startswith("tests/browser/in_pyodide"))
    for folders, extra in ((backend, []), (pyodide, ["--noconftest"])):
        folders = tuple(f for f in folders if (ROOT / f).exists() and (
            (ROOT / f).is_file() or any((ROOT / f).rglob("test_*.py"))))
        if not folders:
            continue
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-o", "addopts=",
             "-p", "no:cacheprovider", *extra, *IGNORE_ARGS, *folders],
            cwd=ROOT, capture_output=True, text=True, check=False,
            env={**os.environ, "WEBRLX_COLLECT_FOR_BROWSER": "1"})   # tests/backend/conftest
        if proc.returncode != 0:
            raise RuntimeError(f"collecting {folders} natively failed:\n{proc.stdout}"
                               f"{proc.stderr}")
        ids += [line for line in proc.stdout.splitlines() if "::" in line]
    return tuple(ids)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `mode` over MODES and `case` over (mode, natively collected node id)."""
    if "case" in metafunc.fixturenames:
        cases = [(mode, nodeid) for mode in MODES for nodeid in native_test_ids(MODE_PATHS[mode])]
        metafunc.parametrize("case", cases, ids=[f"{m}::{n}" for m, n in cases])
    if "mode" in metafunc.fixturenames:
        metafunc.parametrize("mode", MODES)


@pytest.fixture(scope="session")
def native_ids() -> Any:
    """native_ids(mode) -> the node ids that mode's in-browser session must reproduce."""
    return lambda mode: native_test_ids(MODE_PATHS[mode])


@pytest.fixture(scope="session")
def web_assets() -> WebAssets:
    return build(ROOT)


@pytest.fixture(scope="session")
def web_server(web_assets: WebAssets) -> Iterator[str]:
    """The static server, plus /repo/ (this checkout) and the model folders for the runner."""
    routes = {"/repo/": ROOT, **{url: folder for url, folder, _ in model_dirs().values()}}
    with browser_harness.web_server(web_assets, routes) as url:
        yield url


@pytest.fixture(scope="session")
def chromium(web_server: str) -> Iterator[Any]:
    """The session's headless Chromium (a Playwright browser context)."""
    try:
        with browser_harness.chromium() as context:
            yield context
    except FileNotFoundError as err:
        pytest.fail(str(err))


@pytest.fixture(scope="session")
def browser_python(chromium: Any, web_server: str, web_assets: WebAssets) -> Any:
    """browser_python(mode) -> the session's BrowserPython for that mode, booted on first use."""
    config = page_config(web_assets)
    return functools.cache(
        lambda mode: browser_harness.BrowserPython(chromium, web_server, mode, config))


@pytest.fixture(scope="session")
def browser_suite(browser_python: Any, web_server: str, web_assets: WebAssets) -> Any:
    """browser_suite(mode) -> {"exit", "results": {nodeid: {outcome, longrepr}}, "console"},
    run once per mode."""
    wheels = [f"{web_server}wheels/{p.name}" for p in web_assets.test_wheels]
    runner = (browser_harness.HERE / "pyodide_runner.py").read_text()

    @functools.cache
    def run(mode: str) -> dict[str, Any]:
        files = {path: f"{web_server}repo/{path}" for path in suite_files()}
        env_dirs = {var: {name: web_server + url.lstrip("/") + name for name in names}
                    for var, (url, _, names) in model_dirs().items()}
        paths = [p for p in MODE_PATHS[mode]
                 if any(f == p or f.startswith(p + "/") for f in files)]
        paths += IGNORE_ARGS
        env = {k: v for k, v in os.environ.items() if k == "WEBRLX_BROWSER_REFERENCE"}
        call = f"await run_suite({wheels!r}, {files!r}, {env_dirs!r}, {paths!r}, {env!r})"
        python = browser_python(mode)
        try:
            suite = json.loads(python.run(runner + "\n" + call))
        except Exception as err:
            raise RuntimeError(f"the in-browser pytest session ({mode}) crashed: {err}\n"
                               f"console:\n{python.console_tail()}") from err
        suite["console"] = python.console_tail()
        # the slowest in-browser tests, for whoever trims the suite's time
        slow = sorted(suite["results"].items(), key=lambda kv: -kv[1].get("seconds", 0))[:40]
        out = ROOT / "build" / f"browser-{mode}-slowest.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(f"{r.get('seconds', 0):9.2f} s  {nodeid}\n" for nodeid, r in slow))
        per_file: collections.Counter[str] = collections.Counter()
        for nodeid, r in suite["results"].items():
            per_file[nodeid.split("::")[0]] += r.get("seconds", 0)
        (ROOT / "build" / f"browser-{mode}-files.txt").write_text("".join(
            f"{s:9.2f} s  {f}\n" for f, s in per_file.most_common()))
        return suite

    return run
