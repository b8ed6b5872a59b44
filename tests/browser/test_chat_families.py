"""web/chat.html on a small GGUF of every family, in its Web Worker (headless Chromium,
SwiftShader), and the files it must refuse before reading them.

One page (Pyodide booted once) opens, in turn: a GGUF of an unknown architecture (the loader's
error is shown), a llama GGUF whose ffn_up header claims 2.3 GB (refused with the adapter's
limits before the download: the file on disk is sparse, the server would stream all of it),
then each family's Q8_0 fixture of tests/backend/test_llm_families.py (the first through the
file input, the rest by URL; the gpt2-vocabulary headers run past the worker's first 32 KiB,
so its header loop reads twice). For each family the model's header is shown before it loads,
then in completion mode the prompt ids and the greedy tokens equal transformers' (the native
family test's references, up to the first end-of-sequence token, where the page stops).
The page is opened with ?int8=prefill: each model loads with llm.load(int8="prefill") and
says so; these prompts are far under the int8 prefill's work bound (and SwiftShader is a
software adapter), so the tokens stay f32's.

All 4 prompts x 32 tokens, as natively: in SwiftShader a family opens in 0-20 s and completes
them in 3-6 s; the transformers references (about 2 minutes for the 7) are the cached ones of
the native family test (the same module, imported by its basename).
"""
from __future__ import annotations

import struct
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "backend"))     # where pytest imports it from
from test_llm_families import CACHE, FAMILIES, PROMPTS, STEPS, _reference, write_mamba_gguf  # noqa: E402

HERE = ROOT / "build" / "chat_page_test"     # served under /repo/ with the fixtures
IDLE = "['ready', 'failed'].includes(document.body.dataset.state)"
# Installed before the page's script: every phase label the status bar shows, in order.
RECORDER = """window.phases = [];
document.addEventListener("DOMContentLoaded", () => {
  const phase = document.getElementById("phase");
  new MutationObserver(() => window.phases.push(phase.textContent))
    .observe(phase, { subtree: true, childList: true, characterData: true });
});"""
OPEN_TIMEOUT_MS = 900_000
REPLY_TIMEOUT_MS = 600_000
LAST_REPLY = """() => { const r = document.querySelectorAll('#log .msg.assistant');
  const m = r[r.length - 1]; return {text: m.querySelector('.text').textContent,
  error: m.classList.contains('error'), promptIds: JSON.parse(m.dataset.promptIds ?? 'null'),
  ids: JSON.parse(m.dataset.ids ?? 'null')}; }"""


def url_of(path: Path) -> str:
    return "/repo/" + path.relative_to(ROOT).as_posix()


def mamba_gguf() -> Path:
    """A GGUF of an architecture webrlx does not run, written by the gguf package."""
    return write_mamba_gguf(HERE / "mamba.gguf")


def huge_gguf(rows: int, tensor: str = "blk.0.ffn_up.weight") -> Path:
    """The llama fixture's header with a layer weight's row count set to `rows`, in a sparse
    file long enough for its data (no disk used for the zeros). (Not the vocabulary: the
    loader cuts a big token_embd into row pieces, so the page lets it through.)"""
    data = bytearray((CACHE / "llama-q8_0.gguf").read_bytes())
    name = tensor.encode()
    at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
    n_dims, ne0, ne1 = struct.unpack_from("<IQQ", data, at)
    assert n_dims == 2 and ne0 == 64, (n_dims, ne0, ne1)
    struct.pack_into("<Q", data, at + 12, rows)
    path = HERE / "huge-llama.gguf"
    with open(path, "wb") as f:
        f.write(data)
        f.truncate(len(data) + rows * ne0 // 32 * 34)     # Q8_0: 34 bytes per 32 values
    return path


def open_model(page: Any, path: Path, file_input: bool = False) -> float:
    """Open a GGUF through the page's Model form; return the seconds until the page is idle."""
    t0 = time.perf_counter()
    page.wait_for_function(IDLE, timeout=OPEN_TIMEOUT_MS)
    if file_input:
        page.set_input_files("#model-file", str(path))
    else:
        page.fill("#model-url", url_of(path))
        page.click("#open-url")
    page.wait_for_function("document.body.dataset.state === 'loading'", timeout=10_000)
    page.wait_for_function(IDLE, timeout=OPEN_TIMEOUT_MS)
    return time.perf_counter() - t0


def complete(page: Any, prompt: str) -> dict[str, Any]:
    page.fill("#prompt", prompt)
    page.click("#send")
    page.wait_for_function("document.body.dataset.state === 'generating'", timeout=10_000)
    page.wait_for_function(IDLE, timeout=REPLY_TIMEOUT_MS)
    return page.evaluate(LAST_REPLY)


def arch_and_stop_ids(path: Path) -> tuple[str, set[int]]:
    """general.architecture (mistral's is llama) and the end-of-sequence ids the file names
    (eos, eot, eom), read by the gguf package."""
    reader = pytest.importorskip("gguf").GGUFReader(str(path))
    return reader.fields["general.architecture"].contents(), {
        int(reader.fields[k].contents()) for k in
        ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
         "tokenizer.ggml.eom_token_id") if k in reader.fields}


@pytest.fixture(scope="module")
def page(chromium: Any, web_server: str) -> Any:
    """The chat page, booted on the unknown-architecture file (so no default model loads)."""
    pytest.importorskip("transformers")
    HERE.mkdir(parents=True, exist_ok=True)
    first = mamba_gguf()
    page = chromium.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text))
    page.on("pageerror", lambda err: console.append(f"pageerror: {err}"))
    page.add_init_script(RECORDER)
    page.goto(web_server + f"chat.html?model={url_of(first)}&capacity=128"
              f"&max_new_tokens={STEPS}&mode=complete&int8=prefill")
    page.wait_for_function(IDLE, timeout=OPEN_TIMEOUT_MS)
    page.console = console
    yield page
    page.close()


def test_unknown_architecture_shows_the_loaders_error(page: Any) -> None:
    assert page.evaluate("document.body.dataset.state") == "failed", page.console[-20:]
    notice = page.inner_text("#notice")
    assert "mamba.gguf: webrlx cannot run it" in notice and "'mamba'" in notice, notice
    assert "llama" in notice and "qwen3" in notice, notice            # the supported ones
    assert "mamba · 128 parameters" in page.inner_text("#model-info")
    assert not page.evaluate("document.getElementById('model-fields').disabled")


def test_a_file_over_the_adapters_limits_is_refused_before_the_download(page: Any) -> None:
    limits = page.evaluate("""async () => { const a = await navigator.gpu.requestAdapter();
      return [a.limits.maxBufferSize, a.limits.maxStorageBufferBindingSize]; }""")
    rows = 1 << 25                          # rows of 64 values: 2.3 GB of Q8_0 blocks
    need = rows * 68
    assert need > max(limits), limits
    path = huge_gguf(rows)
    page.evaluate("window.phases = []")
    seconds = open_model(page, path)
    notice = page.inner_text("#notice")
    assert page.evaluate("document.body.dataset.state") == "failed", page.console[-20:]
    assert "too big for this GPU" in notice and "'blk.0.ffn_up.weight'" in notice, notice
    assert f"{need:,} bytes" in notice and "max-storage-buffer-binding-size" in notice, notice
    assert f"{limits[1]:,}" in notice, (notice, limits)
    # refused from the header: the status never reached the download step
    phases = page.evaluate("window.phases")
    assert any("Reading the model's header" in p for p in phases), phases
    assert not any("Downloading" in p for p in phases), phases
    assert "llama" in page.inner_text("#model-info")
    print(f"\nrefused a {path.stat().st_size / 1e9:.1f} GB file in {seconds:.1f} s "
          f"(adapter limits {limits})")


@pytest.mark.parametrize("family", FAMILIES)
def test_family_greedy_tokens_equal_transformers(page: Any, family: str) -> None:
    path, want = _reference(family, "Q8_0")
    arch, stops = arch_and_stop_ids(path)
    load_s = open_model(page, path, file_input=family == FAMILIES[0])
    assert page.evaluate("document.body.dataset.state") == "ready", \
        (page.inner_text("#notice"), page.console[-20:])
    info = page.inner_text("#model-info")
    assert page.evaluate("document.getElementById('model-info').dataset.family") == arch
    assert "Q8_0" in info and "parameters" in info and "context" in info, info
    assert "int8 prefill (faster, less exact)" in page.inner_text("#adapter")
    t0 = time.perf_counter()
    for prompt, (ids, _, greedy) in zip(PROMPTS, want):
        expect = greedy[:STEPS]
        end = next((i for i, t in enumerate(expect) if t in stops), None)
        expect = expect if end is None else expect[:end + 1]
        reply = complete(page, prompt)
        assert not reply["error"], reply
        assert reply["promptIds"] == ids, (prompt, reply)
        assert reply["ids"] == expect, (prompt, reply["ids"], expect)
    print(f"\n{family}: opened in {load_s:.0f} s, {len(PROMPTS)} x {STEPS} tokens in "
          f"{time.perf_counter() - t0:.0f} s")


def test_a_bad_int8_setting_is_refused_before_python_starts(chromium: Any,
                                                             web_server: str) -> None:
    """?int8= takes prefill, decode or all (llm.load(int8=)); anything else stops the page
    with a message naming the setting, before Pyodide boots."""
    page = chromium.new_page()
    try:
        page.goto(web_server + "chat.html?int8=fast")
        page.wait_for_function("document.body.dataset.state === 'failed'", timeout=60_000)
        assert "?int8= must be prefill, decode or all, got fast" in page.inner_text("#notice")
        assert "Could not start" in page.inner_text("#adapter")
    finally:
        page.close()
