"""The command-line tools (webrlx/cli): busy ports fail in one line, `serve` lists its pages,
the shared serve-forever block prints where and how to stop, and `python -m webrlx --help`
names every subcommand. Fast: no browser, no asset build, sockets on 127.0.0.1 only."""
from __future__ import annotations

import contextlib
import io
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from webrlx.cli import lite, serve
from webrlx.cli.serve import (
    LITE_PORT,
    SERVE_PORT,
    PortInUseError,
    make_server,
    pages,
    serve_forever,
)

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 held by a listening socket for the duration."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


# -- ports -----------------------------------------------------------------------------------
def test_serve_and_lite_have_different_default_ports():
    assert (SERVE_PORT, LITE_PORT) == (8000, 8001)
    for main, port in ((serve.main_serve, SERVE_PORT), (lite.main_lite, LITE_PORT)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            main(["--help"])
        assert f"default {port}" in " ".join(out.getvalue().split()), main.__name__


def test_make_server_on_a_busy_port_raises_a_one_line_message(tmp_path):
    with busy_port() as port:
        with pytest.raises(PortInUseError) as info:
            make_server({"/": tmp_path}, {}, port)
    message = str(info.value)
    assert f"port {port}" in message and "--port N" in message
    assert "\n" not in message
    assert info.value.port == port
    assert isinstance(info.value, OSError)     # callers that caught OSError still do


def test_make_server_on_a_free_port_binds_it(tmp_path):
    with make_server({"/": tmp_path}, {}, 0) as server:
        assert server.server_address[1] != 0


@pytest.mark.parametrize("command", ["serve", "lite"])
def test_cli_reports_a_busy_port_in_one_line_before_building(command, monkeypatch, capsys):
    def no_build(*args, **kwargs):
        raise AssertionError("built before binding the port")
    monkeypatch.setattr(serve, "build", no_build)
    monkeypatch.setattr(lite, "build_site", no_build)
    main = {"serve": serve.main_serve, "lite": lite.main_lite}[command]
    with busy_port() as port:
        assert main(["--port", str(port)]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"webrlx {command}: port {port} ")
    assert "--port N" in lines[0]
    assert "Traceback" not in captured.err + captured.out


def test_serve_releases_the_port_when_the_build_fails(monkeypatch):
    def failing_build(*args, **kwargs):
        raise RuntimeError("no npm")
    monkeypatch.setattr(serve, "build", failing_build)
    with socket.socket() as s:                 # a port that is free now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RuntimeError, match="no npm") as info:
        serve.serve(port)
    assert _port_is_free(port)      # closed explicitly: `info` keeps serve()'s frame alive
    del info


# -- what the servers print ------------------------------------------------------------------
def test_pages_lists_html_files_with_their_titles(tmp_path):
    (tmp_path / "b.html").write_text("<html><head><title> Demo &amp; more </title></head>")
    (tmp_path / "a.html").write_text("<html>no title</html>")
    (tmp_path / "boot.js").write_text("// not a page")
    assert pages(tmp_path) == [("a.html", ""), ("b.html", "Demo & more")]


def test_pages_of_the_checkout_include_the_demos():
    names = [name for name, _ in pages(ROOT / "web")]
    assert {"index.html", "minilm.html"} <= set(names)
    assert names == sorted(p.name for p in (ROOT / "web").glob("*.html"))


def test_serve_forever_prints_links_serves_and_closes(tmp_path):
    (tmp_path / "index.html").write_text("<title>x</title>hello")
    server = make_server({"/": tmp_path}, {}, 0)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    out = io.StringIO()
    thread = threading.Thread(target=serve_forever, args=(
        server, "serving test", [(url + "index.html", "x")]), kwargs={"out": out})
    thread.start()
    try:
        with urllib.request.urlopen(url + "index.html", timeout=10) as response:
            assert response.read().endswith(b"hello")
    finally:
        server.shutdown()
        thread.join(10)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"webrlx: serving test on {url} (Ctrl+C to stop)"
    assert lines[1].split() == [url + "index.html", "x"]
    assert server.socket.fileno() == -1        # closed once serving ends


def test_serve_forever_stops_quietly_on_ctrl_c(tmp_path, monkeypatch):
    server = make_server({"/": tmp_path}, {}, 0)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(server, "serve_forever", interrupted)
    out = io.StringIO()
    serve_forever(server, "serving test", [], out=out)       # returns, no exception
    assert out.getvalue().rstrip().endswith("webrlx: stopped")
    assert server.socket.fileno() == -1


def test_serve_lists_every_page_of_web(monkeypatch, tmp_path):
    monkeypatch.setattr(serve, "build", lambda *args, **kwargs: None)
    monkeypatch.setattr(serve, "page_config", lambda assets: {})
    seen = {}

    def fake_serve_forever(server, what, links, open_browser=False, out=None):
        seen.update(port=server.server_address[1], what=what, links=links)
        server.server_close()
    monkeypatch.setattr(serve, "serve_forever", fake_serve_forever)
    serve.serve(0)
    base = f"http://127.0.0.1:{seen['port']}/"
    assert [url for url, _ in seen["links"]] == [base + n for n, _ in pages(ROOT / "web")]
    assert base + "minilm.html" in [url for url, _ in seen["links"]]


# -- python -m webrlx ------------------------------------------------------------------------
def test_python_m_webrlx_help_lists_the_subcommands():
    proc = subprocess.run([sys.executable, "-m", "webrlx", "--help"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    commands = proc.stdout.split("positional arguments:")[1]
    for name in ("serve", "lite", "bench", "info", "demo"):
        assert f"\n    {name} " in commands, name


def test_cooperative_matrix_probe_reports_why_it_cannot_be_used():
    """bench/probes/coop_matrix_probe.py (run after each wgpu-py upgrade) prints its JSON verdict on
    any adapter; lavapipe has no cooperative matrices, so it must say so and why."""
    import json
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, str(root / "bench" / "probes" / "coop_matrix_probe.py")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["usable"] is False and "cooperative" in out["why"].lower(), out


def test_bench_gives_f16_rows_their_speedup_over_webrlx_f32():
    from webrlx.cli.bench import f16_speedups
    cases = [{"case": "matmul 4096x4096x4096", "dtype": "float32", "webrlx_ms": 5.5},
             {"case": "matmul 4096x4096x4096", "dtype": "float16", "webrlx_ms": 2.75},
             {"case": "matmul 8x8x8", "dtype": "float16", "webrlx_ms": 1.0}]
    f16_speedups(cases)
    assert cases[1]["speedup_vs_webrlx_float32"] == 2.0
    assert "speedup_vs_webrlx_float32" not in cases[0] | cases[2]


def test_bench_rows_include_rms_norm_with_a_progress_line_per_case(capsys):
    from webrlx.cli.bench import main_bench
    out = main_bench(["--quick", "--only", "rows"])
    names = [c["case"] for c in out["cases"]]
    assert names == [f"{op} {s}" for s in ("512x384", "1024x128")
                     for op in ("softmax", "layer_norm", "rms_norm")]
    assert all(c["webrlx_ms"] > 0 and c["ref_ms"] > 0 and c["reference"] for c in out["cases"])
    err = capsys.readouterr()
    assert err.out == ""                       # stdout stays the JSON's alone
    for name in names:
        assert f"] {name} float32\n" in err.err, err.err


def test_bench_no_ref_times_webrlx_alone(monkeypatch):
    """--no-ref (the Dawn runner's bench): no reference timed, ratios None, webrlx's stand;
    the io case too (it had timed numpy's matmul: minutes at 4096 inside Pyodide)."""
    from webrlx.cli import bench
    monkeypatch.setattr(bench, "_torch", lambda: pytest.fail("the reference was timed"))
    monkeypatch.setattr(bench, "NO_REF", False)
    out = bench.main_bench(["--quick", "--only", "rows,io", "--no-ref"])
    assert any(c["case"].startswith("exe.run numpy in/out") for c in out["cases"])
    assert out["cases"] and all(c["webrlx_ms"] > 0 and c["ref_ms"] is None
                                and c["ratio_vs_ref"] is None for c in out["cases"])


def test_bench_tune_installs_a_runs_picks(monkeypatch, tmp_path):
    """--tune FILE: a make_tune_tables --here run's picks become this adapter's table before
    any case runs (logs before the JSON line are skipped), and the output names the file."""
    from webrlx.cli import bench
    from webrlx.runtime import autotune
    monkeypatch.setattr(bench, "_torch", lambda: None)
    monkeypatch.setattr(autotune, "_memory", {})
    monkeypatch.setattr(autotune, "_loaded", True)
    run = tmp_path / "tune.json"
    run.write_text('tune: log line\n{"adapter": "x", "table": {"some key [a b]": "b"}}\n')
    out = bench.main_bench(["--quick", "--only", "rows", "--tune", str(run)])
    assert out["tune"] == {"file": str(run), "entries": 1}
    import webrlx as wr
    assert autotune.table(wr.device().info.tune_name)["some key [a b]"] == "b"
    assert out["cases"]


def test_hold_clocks_runs_the_work_for_the_seconds_asked():
    """hold_clocks: calls back to back, a sync after each batch, until the time is spent
    (the GPU's clock up before a timing); 0 s: nothing runs."""
    import time

    from webrlx.cli.clocks import hold_clocks
    calls, syncs = [], []
    t = time.perf_counter()
    n = hold_clocks(lambda: calls.append(1), lambda: syncs.append(1), 0.05)
    assert time.perf_counter() - t >= 0.05 and n == len(calls) > 0 and syncs
    assert hold_clocks(lambda: pytest.fail("ran"), lambda: None, 0.0) == 0


def test_bench_llm_rows_decode_prefill_and_batch(monkeypatch, capsys):
    """`bench --quick --only llm` on SmolLM2: its three rows with their token counts, the
    batch against lm.generate, and a llama.cpp peer asked for without its module named as
    such (the webrlx rows still stand)."""
    from webrlx.cli.bench import main_bench
    monkeypatch.delenv("LLAMACPP_SO", raising=False)
    out = main_bench(["--quick", "--only", "llm", "--peer", "llamacpp"])
    decode, prefill, batch = out["cases"]
    assert decode["case"].startswith("llm decode SmolLM2") and decode["new_tokens"] == 8
    assert decode["webrlx_tok_s"] > 0 and "LLAMACPP_SO" in decode["llamacpp"]["error"]
    assert prefill["prefill_tokens"] == 16 and prefill["webrlx_ms"] > 0
    assert [r["sequences"] for r in batch["rows"]] == [1, 2]
    assert [r["decode_tokens"] for r in batch["rows"]] == [3, 6]       # 4 each, 1 at prefill
    assert batch["ratio_vs_generate"] == batch["webrlx_tok_s"] / decode["webrlx_tok_s"] > 0
    err = capsys.readouterr()
    assert err.out == "" and "llm: the Engine at 1 and 2 sequences" in err.err


def test_bench_browser_names_what_ort_lacks_and_still_runs_webrlx(monkeypatch, tmp_path,
                                                                 capsys):
    """Without onnxruntime-web and onnx the ORT runners are skipped with the commands that
    install them; the webrlx runner still runs (faked here: it is MiniLM on SwiftShader)."""
    import numpy as np

    from webrlx.cli import bench_browser
    from webrlx.cli.bench import main_bench
    from webrlx.models import assets
    monkeypatch.setattr(bench_browser, "ORT_DIR", tmp_path / "ortweb")
    monkeypatch.setattr(bench_browser, "ONNX_PATH", tmp_path / "minilm.onnx")
    monkeypatch.setattr(bench_browser, "has_module", lambda name: name != "onnx")
    monkeypatch.setattr(assets, "minilm_dir", lambda path=None: tmp_path)
    ran = []

    def fake_native(ids, repeats, timeout, warm_up=True):
        ran.append(ids)
        emb = np.ones((len(ids["a"]), 384)).tolist()
        return {"adapter": "SwiftShader", "load_s": 0.1,
                "cases": {"a": {"first_ms": 5.0, "warm_ms": 1.0, "embedding": emb}}}
    monkeypatch.setattr(bench_browser, "run_native", fake_native)
    out = main_bench(["--browser", "--cases", "a", "--runners", "ort_webgpu,ort_wasm,native"])
    err = capsys.readouterr().err
    assert "npm install --prefix build/ortweb onnxruntime-web@1.30.0" in err, err
    assert "pip install onnx" in err and "pip install torch" not in err, err
    assert out["runners"] == ["native"] and set(out["skipped"]) == {"ort_webgpu", "ort_wasm"}
    assert ran and out["cases"]["a"]["native"]["warm_ms"] == 1.0
    assert out["cases"]["a"]["ratios"]["native_first_over_warm"] == 5.0


@pytest.mark.parametrize("argv, names", [
    (["generate", "--model", "{missing}", "hi"], ["--model", "No such file"]),
    (["generate", "--model", "{dir}", "hi"], ["--model", "Is a directory"]),
    (["generate", "--model", "{bad}", "hi"], ["--model", "not a GGUF file"]),
    (["chat", "--model", "{bad}"], ["--model", "not a GGUF file"]),
    (["gguf", "info", "{missing}"], ["No such file"]),
    (["onnx", "info", "{bad}"], ["malformed or truncated ONNX file"]),
    (["demo", "--model", "{dir}"], ["must hold config.json"]),
    (["embed", "{missing}.jsonl", "{dir}/out.jsonl"], ["INPUT", "no such file"])])
def test_bad_files_give_one_line_naming_the_argument(argv, names, tmp_path, capsys):
    """A missing, unreadable or wrong-format file is the user's input: `python -m webrlx`
    prints one line naming the command (and the argument) and exits 2, no traceback."""
    from webrlx.__main__ import main
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"hi\n")
    paths = {"missing": str(tmp_path / "nope.gguf"), "dir": str(tmp_path), "bad": str(bad)}
    argv = [a.format(**paths) for a in argv]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.count("\n") <= 2, err
    assert f"webrlx {argv[0]}: error:" in err and all(n in err for n in names), err


def test_other_errors_keep_their_traceback():
    """A fault of webrlx itself is not dressed up as an input error."""
    from webrlx.cli import input_error
    assert not input_error(ValueError("shapes do not match"))
    assert not input_error(RuntimeError("GPU lost"))
    assert input_error(FileNotFoundError(2, "No such file", "x.gguf"))


@pytest.mark.parametrize("flag", [False, True])
@pytest.mark.parametrize("what", ["decode", "prefill"])
def test_serve_llm_int8_flags_reach_the_model_load(flag, what, monkeypatch):
    """`serve-llm --int8-decode` / `--int8-prefill` become the app's int8= kinds, which the
    server's llm.load receives when it loads the model (and so compiles it); the module flags
    stay off (the choice is the model's, compiler/int8_scope.py)."""
    import types

    import uvicorn

    from webrlx import openai_api
    from webrlx.cli.serve_llm import main_serve_llm
    from webrlx.compiler import int8_decode, int8_prefill
    from webrlx.models import engine, llm
    made = []

    def fake_app(*args, **kwargs):                 # noqa: ANN002, ANN003, ANN202
        made.append(kwargs["int8"])
        server = types.SimpleNamespace(load=lambda: None)
        return types.SimpleNamespace(state=types.SimpleNamespace(server=server))
    monkeypatch.setattr(openai_api, "create_app", fake_app)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    argv = ["--model", "model.gguf", "--embedding-model", "none"] + [f"--int8-{what}"] * flag
    assert main_serve_llm(argv) == 0
    assert made == [{what} if flag else set()]
    assert not int8_decode.INT8_DECODE and not int8_prefill.INT8_PREFILL
    loads = []
    monkeypatch.setattr(llm, "load", lambda path, device, max_context, int8: loads.append(
        (path, int8)) or "lm")
    monkeypatch.setattr(engine, "Engine", lambda lm, n, ctx: (lm, n, ctx))
    server = openai_api.Server("model.gguf", None, int8=made[0])
    assert server._make_engine() == ("lm", server.max_sequences, None)
    assert loads == [("model.gguf", made[0])]
