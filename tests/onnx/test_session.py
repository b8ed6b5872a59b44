"""InferenceSession and import_model on small models built with onnx.helper, checked against
numpy: onnxruntime's surface, plan caching, shape folding, and the bad-input errors."""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import webrlx as wr  # noqa: E402
from webrlx.onnx import InferenceSession, OnnxFormatError, OnnxImportError, import_model  # noqa: E402


def _run_coroutine(coro: Any) -> Any:
    """asyncio.run in a fresh thread: a session-wide Playwright sync API (the browser tests)
    keeps an event loop running on the main thread, where asyncio.run refuses to start."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _model(nodes, inputs, outputs, inits=(), opset=17) -> bytes:
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]
                             ).SerializeToString()


def _flatten_model() -> bytes:
    """y = reshape(x, (batch, -1)) @ w + b, with the shape computed by Shape/Gather/Concat."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(6, 2) / 10, "w")
    b = numpy_helper.from_array(np.array([1.0, -1.0], np.float32), "b")
    idx = numpy_helper.from_array(np.array([0], np.int64), "idx")
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "minus1")
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "idx"], ["n"]),
             helper.make_node("Concat", ["n", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["flat"]),
             helper.make_node("MatMul", ["flat", "w"], ["mm"]),
             helper.make_node("Add", ["mm", "b"], ["y"], name="bias_add"),
             helper.make_node("Relu", ["y"], ["r"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                        ["batch", 2, 3])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2]),
                   helper.make_tensor_value_info("r", TensorProto.FLOAT, ["batch", 2])],
                  [w, b, idx, minus1])


def _numpy_flatten(x: np.ndarray) -> np.ndarray:
    w = np.arange(12, dtype=np.float32).reshape(6, 2) / 10
    return x.reshape(len(x), -1) @ w + np.array([1.0, -1.0], np.float32)


def test_inputs_outputs_like_onnxruntime() -> None:
    sess = InferenceSession(_flatten_model())
    (x,) = sess.get_inputs()
    assert (x.name, x.shape, x.type) == ("x", ["batch", 2, 3], "tensor(float)")
    assert [(o.name, o.shape, o.type) for o in sess.get_outputs()] == [
        ("y", ["batch", 2], "tensor(float)"), ("r", ["batch", 2], "tensor(float)")]


def test_run_plans_per_shape_and_folds_shape_arithmetic() -> None:
    sess = InferenceSession(_flatten_model())
    x = np.random.default_rng(0).standard_normal((4, 2, 3)).astype(np.float32)
    y, r = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, _numpy_flatten(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(r, np.maximum(_numpy_flatten(x), 0), rtol=1e-5, atol=1e-6)
    exe = sess.executable
    ops = {n.op for n in exe.graph.nodes}
    assert not ops & {"gather", "concat"}, f"shape arithmetic reached the graph: {ops}"
    (r_only,) = sess.run(["r"], {"x": x})
    assert sess.executable is exe, "the same dims must reuse the compiled plan"
    np.testing.assert_array_equal(r_only, r)
    x2 = x[:3]
    (y2, _) = sess.run(None, {"x": x2})
    assert sess.executable is not exe
    np.testing.assert_allclose(y2, _numpy_flatten(x2), rtol=1e-5, atol=1e-6)


def test_keep_on_device_and_run_async() -> None:
    sess = InferenceSession(_flatten_model())
    x = np.ones((2, 2, 3), np.float32)
    (y,) = sess.run(["y"], {"x": x}, keep_on_device=True)
    assert isinstance(y, wr.DeviceTensor)
    np.testing.assert_allclose(y.numpy(), _numpy_flatten(x), rtol=1e-5)
    (y_async, _) = _run_coroutine(sess.run_async(None, {"x": x}))
    np.testing.assert_allclose(y_async, _numpy_flatten(x), rtol=1e-5)


def test_int64_io_casts_back_and_shape_inputs_bind_per_value() -> None:
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Mul", ["r", "r"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.INT64, [6]),
                           helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                   [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    sess = InferenceSession(model)
    x = np.arange(6, dtype=np.int64) - 2
    for shape in ((2, 3), (3, 2)):
        (y,) = sess.run(None, {"x": x, "shape": np.array(shape, np.int64)})
        assert y.dtype == np.int64
        np.testing.assert_array_equal(y, (x * x).reshape(shape))


def test_import_model_gives_a_graph_to_extend() -> None:
    g, (y, r), params = import_model(_flatten_model(), {"x": (2, 2, 3)})
    z = (y * 2.0).sum(axis=-1)
    exe = wr.compile(g, [z])
    exe.set_params(params)
    x = np.random.default_rng(1).standard_normal((2, 2, 3)).astype(np.float32)
    (got,) = exe.run({"x": x})
    np.testing.assert_allclose(got, (_numpy_flatten(x) * 2).sum(-1), rtol=1e-5, atol=1e-5)


def test_unsupported_ops_listed_together_before_compiling() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Frobnicate", ["a"], ["b"], name="frob1", domain="com.example"),
             helper.make_node("Frobnicate", ["b"], ["c"], name="frob2", domain="com.example"),
             helper.make_node("StringNormalizer", ["c"], ["d"], name="strnorm")]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [2])],
                          [helper.make_tensor_value_info("d", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with pytest.raises(OnnxImportError) as e:
        InferenceSession(model.SerializeToString())
    text = str(e.value)
    assert "com.example::Frobnicate (opset 1): nodes frob1, frob2" in text
    assert "ai.onnx::StringNormalizer (opset 17): nodes strnorm" in text
    # the device still works after the failed load
    sess = InferenceSession(_flatten_model())
    x = np.ones((1, 2, 3), np.float32)
    np.testing.assert_allclose(sess.run(["y"], {"x": x})[0], _numpy_flatten(x), rtol=1e-5)


def test_malformed_file_names_file_and_offset(tmp_path) -> None:
    path = tmp_path / "broken.onnx"
    data = _flatten_model()
    path.write_bytes(data[:-9])
    with pytest.raises(OnnxFormatError, match=r"broken\.onnx: byte \d+"):
        InferenceSession(str(path))
    sess = InferenceSession(data)
    assert sess.run(["y"], {"x": np.zeros((1, 2, 3), np.float32)})[0].shape == (1, 2)


def test_bad_feeds_are_named() -> None:
    sess = InferenceSession(_flatten_model())
    with pytest.raises(ValueError, match="missing \\['x'\\]"):
        sess.run(None, {})
    with pytest.raises(ValueError, match="'x' must have shape \\['batch', 2, 3\\]"):
        sess.run(None, {"x": np.zeros((1, 3, 3), np.float32)})
