"""Debug tools on every backend (and inside Pyodide): validate finds a broken kernel and names
its node, check_finite names the first NaN/Inf, profile times every kernel, dump writes them."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import rand, run_coroutine

import webrlx as wr
from webrlx.compiler.registry import LOWERINGS, lowering
from webrlx.kernels import from_source, render
from webrlx.models import minilm


@pytest.fixture(scope="module")
def encoder(backend):
    return minilm.load(device=backend)


@pytest.fixture(scope="module")
def feeds(encoder):
    rows = [encoder.tokenizer.encode(s, minilm.MAX_LENGTH)
            for s in ["A man is eating food.", "Two men pushed carts through the woods."]]
    return encoder.feeds(rows)


def test_validate_minilm_matches_the_reference(encoder, feeds, backend):
    report = encoder.executable.validate(feeds)
    assert report.ok, str(report)
    if backend.name != "reference":
        assert report.checked >= 50          # every layer's values were compared
    async_report = run_coroutine(encoder.executable.validate_async(feeds))
    assert async_report.ok and async_report.checked == report.checked


def _broken_cumsum(ctx, node):
    """cumsum with an off-by-one: the last element of each row is never written."""
    src = render("scan/cumsum", T=ctx.T(node.dtype), ACC="f32").replace("j < p.n", "j + 1u < p.n")
    assert src.count("j + 1u < p.n") == 1
    shape = ctx.shape(node.id)
    buf, rows, n, _ = ctx.rows_last(node.inputs[0], (len(shape) - 1,))
    out = ctx.temp(shape, node.dtype)
    ctx.emit(from_source("cumsum-off-by-one", src), {"x": buf, "out": out},
             {"rows": rows, "n": n}, ctx.grid(rows), name="cumsum")
    return out


def test_validate_names_the_node_of_a_broken_kernel(backend, monkeypatch):
    g = wr.Graph()
    x = g.input("x", (4, 33))
    y = ((x * 2.0).cumsum(-1) + 1.0).softmax(-1)
    monkeypatch.setitem(LOWERINGS, "cumsum", LOWERINGS["cumsum"])
    lowering("cumsum")(_broken_cumsum)
    exe = wr.compile(g, outputs=[y], device=backend)
    report = exe.validate({"x": rand(4, 33)})
    if backend.name == "reference":       # the oracle has nothing to compare against
        assert report.ok
        return
    assert not report.ok
    assert report.first.node.op == "cumsum" and report.first.at[-1] == 32, str(report)
    assert "cumsum" in str(report) and "diverges" in str(report)
    with pytest.raises(AssertionError, match="cumsum"):
        report.raise_if_diverged()


def test_validate_matches_nan_and_inf_where_the_reference_has_them(backend):
    g = wr.Graph()
    x = g.input("x", (2, 4))
    y = (x.log() * 2.0).softmax(-1)         # log of a negative: NaN; of 0: -inf
    exe = wr.compile(g, outputs=[y], device=backend)
    xs = np.array([[1.0, -1.0, 0.0, 2.0], [0.5, 1.5, 2.5, 3.5]], np.float32)
    report = exe.validate({"x": xs})
    assert report.ok, str(report)


def test_check_finite_walks_minilm(encoder, feeds):
    # every node of MiniLM (its unfused twin, kernel by kernel) is finite
    assert encoder.executable.check_finite(feeds) is None
    assert run_coroutine(encoder.executable.check_finite_async(feeds)) is None


def test_check_finite_names_the_first_nan(backend):
    g = wr.Graph()
    x = g.input("x", (3, 8))
    big = (x * 100.0).exp()                 # exp(100) overflows f32: inf
    y = (big - big).sum(-1)                 # inf - inf: nan
    exe = wr.compile(g, outputs=[y], device=backend)
    xs = rand(3, 8, low=1.0, high=2.0)
    bad = exe.check_finite({"x": xs})
    assert bad is not None and bad.node.op == "exp", str(bad)
    assert bad.count == 24 and "exp" in str(bad)
    assert exe.check_finite({"x": xs * 0.01}) is None
    xs[1, 2] = np.nan
    fed = run_coroutine(exe.check_finite_async({"x": xs}))
    assert fed.node.op == "input" and fed.at == (1, 2)


def test_profile_times_every_kernel(encoder, feeds, backend):
    prof = encoder.executable.profile(feeds, repeats=1)
    if backend.name == "reference":
        assert prof.source == "numpy" and prof.total_ms > 0
        return
    calls = encoder.executable.last_plan.program.calls
    # each row names the variant that ran: the call's default or one it offered
    assert all(r["kernel"] in [c.name] + [v.name for v in c.variants]
               for r, c in zip(prof.rows, calls, strict=True))
    assert prof.source in ("timestamp-query", "host")
    assert all(r["ms"] >= 0 for r in prof.rows) and prof.total_ms > 0
    assert "matmul" in " ".join(prof.by_kernel()) and str(prof).count("\n") == len(calls) + 1


def test_dump_writes_each_kernel(encoder, tmp_path, backend):
    if backend.name == "reference":
        with pytest.raises(RuntimeError, match="compiles no kernels"):
            encoder.executable.dump(tmp_path, batch=1, seq=9)
        return
    paths = encoder.executable.dump(tmp_path, batch=1, seq=9)
    plan = encoder.executable.plan({"batch": 1, "seq": 9})
    wgsl = [p for p in paths if p.suffix == ".wgsl"]
    assert len(wgsl) == len(plan.program.calls) and (tmp_path / "schedule.txt").is_file()
    text = next(p for p in wgsl if "layer_norm" in p.name).read_text()
    assert '"eps": 1e-12' in text and "@compute" in text and "// grid:" in text


def test_webrlx_validate_checks_every_run(backend, monkeypatch):
    g = wr.Graph()
    x = g.input("x", (4, 33))
    y = (x * 2.0).cumsum(-1)
    monkeypatch.setitem(LOWERINGS, "cumsum", LOWERINGS["cumsum"])
    lowering("cumsum")(_broken_cumsum)
    exe = wr.compile(g, outputs=[y], device=backend)
    exe.run({"x": rand(4, 33)})                       # off: the broken kernel runs silently
    monkeypatch.setenv("WEBRLX_VALIDATE", "1")
    if backend.name == "reference":
        exe.run({"x": rand(4, 33)})
        return
    with pytest.raises(AssertionError, match="cumsum"):
        exe.run({"x": rand(4, 33)})


def test_errors_name_the_node_they_came_from(backend):
    g = wr.Graph()
    table = g.input("table", (5, 3))
    ids = g.input("ids", (2,), "int32")
    exe = wr.compile(g, outputs=[table.gather(ids) + 1.0], device="reference")
    with pytest.raises(IndexError, match=r"%2 = gather"):
        exe.run({"table": rand(5, 3), "ids": np.array([1, 7], np.int32)})
    g = wr.Graph()
    q = g.input("q", (1, 1, 2, 300))
    exe = wr.compile(g, outputs=[wr.nn.attention(q, q, q)], device=backend)
    if backend.name != "reference":
        with pytest.raises(ValueError, match=r"lowering %\d+ = attention.*head dim 300"):
            exe.run({"q": rand(1, 1, 2, 300)})
