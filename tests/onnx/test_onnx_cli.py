"""`python -m webrlx onnx info | run`: the histogram, the unsupported list, random and given
inputs, symbolic dims, and the printed outputs checked against numpy."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from webrlx.cli.onnx import main_onnx, parse_dims, random_feeds  # noqa: E402
from webrlx.onnx import InferenceSession  # noqa: E402

W = np.arange(12, dtype=np.float32).reshape(3, 4) / 10 - 0.5


def _model(path, extra_nodes=(), opsets=(("", 17),)) -> str:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Relu", ["h"], ["y"], name="relu"),
             helper.make_node("Shape", ["ids"], ["s"], name="shape"), *extra_nodes]
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [numpy_helper.from_array(W, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    onnx.save(model, path)
    return str(path)


def test_info_lists_io_opsets_histogram(tmp_path, capsys) -> None:
    path = _model(tmp_path / "m.onnx")
    assert main_onnx(["info", path]) == 0
    text = capsys.readouterr().out
    assert "x: tensor(float) ['batch', 3]" in text
    assert "ids: tensor(int64) ['batch', 'seq']" in text
    assert "y: tensor(float) ['batch', 4]" in text
    assert "ai.onnx 17" in text
    assert re.search(r"\n\s+1\s+MatMul\n", text) and re.search(r"\n\s+1\s+Relu\n", text)
    assert "unsupported: none" in text


def test_info_lists_every_unsupported_op_once(tmp_path, capsys) -> None:
    extra = [helper.make_node("Frob", ["y"], ["z1"], name="f1", domain="com.example"),
             helper.make_node("Frob", ["z1"], ["z2"], name="f2", domain="com.example"),
             helper.make_node("StringNormalizer", ["z2"], ["z3"], name="sn")]
    path = _model(tmp_path / "bad.onnx", extra, (("", 17), ("com.example", 1)))
    assert main_onnx(["info", path]) == 1
    text = capsys.readouterr().out
    assert "unsupported: 2" in text
    assert "com.example::Frob (opset 1): 2 node(s), e.g. f1, f2" in text
    assert "ai.onnx::StringNormalizer (opset 17): 1 node(s), e.g. sn" in text


def test_run_with_given_input_and_dims(tmp_path, capsys) -> None:
    path = _model(tmp_path / "m.onnx")
    x = np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main_onnx(["run", path, "--input", f"x={tmp_path / 'x.npy'}", "--dims",
                      "seq=7", "--runs", "2"]) == 0
    text = capsys.readouterr().out
    want = np.maximum(x @ W, 0)
    m = re.search(r"output y: float32 \[5, 4\] mean (\S+) std (\S+) min (\S+) max (\S+)", text)
    assert m, text
    np.testing.assert_allclose([float(v) for v in m.groups()],
                               [want.mean(), want.std(), want.min(), want.max()], rtol=1e-4,
                               atol=1e-5)
    assert "output s: int64 [2]" in text
    assert re.search(r"warm run: median [\d.]+ ms, min [\d.]+ ms over 2 runs", text)
    assert re.search(r"cold run \(import \+ compile \+ run\) [\d.]+ ms", text)


def test_run_random_inputs_binds_symbols(tmp_path, capsys) -> None:
    path = _model(tmp_path / "m.onnx")
    assert main_onnx(["run", path, "--dims", "batch=2,seq=9", "--runs", "1",
                      "--device", "reference"]) == 0
    text = capsys.readouterr().out
    assert "input  x: float32 [2, 3] random" in text
    assert "input  ids: int64 [2, 9] random" in text
    assert "output s: int64 [2] mean 5.5 std 3.5 min 2 max 9" in text
    assert "symbolic dims set to 1" not in text


def test_random_feeds_kinds_and_defaults() -> None:
    sess = InferenceSession(_model_bytes())
    feeds, defaulted = random_feeds(sess.get_inputs(), {"seq": 4})
    assert defaulted == ["batch"]
    assert feeds["x"].shape == (1, 3) and feeds["x"].dtype == np.float32
    assert feeds["ids"].shape == (1, 4) and feeds["ids"].dtype == np.int64
    assert ((feeds["ids"] >= 0) & (feeds["ids"] < 100)).all()


def _model_bytes() -> bytes:
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        with open(_model(f"{d}/m.onnx"), "rb") as f:
            return f.read()


def test_bad_arguments_are_named(tmp_path) -> None:
    import argparse
    with pytest.raises(argparse.ArgumentTypeError, match="batch"):
        parse_dims("batch")
    path = _model(tmp_path / "m.onnx")
    assert main_onnx(["run", path, "--input", "nope=x.npy", "--device", "reference"]) == 2


def test_module_entry_point(tmp_path) -> None:
    path = _model(tmp_path / "m.onnx")
    r = subprocess.run([sys.executable, "-m", "webrlx", "onnx", "info", path],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "MatMul" in r.stdout
