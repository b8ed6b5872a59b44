"""ops/quant.py against onnx's own numbers: the device rounding to float8 / float4 / e8m0 /
bfloat16 / int4 / int2 on thousands of values (ml_dtypes, which onnx's reference evaluator
uses, is the oracle), and quantized rows on random models (onnx.reference is the oracle)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import ml_dtypes  # noqa: E402  (an onnx dependency)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import webrlx as wr  # noqa: E402
from webrlx.onnx import InferenceSession  # noqa: E402
from webrlx.onnx.ops.quant import cast_to  # noqa: E402

DEVICES = ["gpu", "reference"]
SPECIAL = [0, -0.0, np.inf, -np.inf, np.nan, 448, 464, 465, 480, 57344, 61440, 61441, 6, 7,
           0.25, 0.75, 1e-7, -1e-7, 2.0 ** -9, 3 * 2.0 ** -10, 1.00390625, 1.01171875]
FLOATS = {17: ml_dtypes.float8_e4m3fn, 18: ml_dtypes.float8_e4m3fnuz,
          19: ml_dtypes.float8_e5m2, 20: ml_dtypes.float8_e5m2fnuz,
          23: ml_dtypes.float4_e2m1fn, 16: ml_dtypes.bfloat16}


def _values() -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, 3000) * np.exp2(rng.integers(-24, 24, 3000))
    return np.concatenate([x, SPECIAL]).astype(np.float32)


def _cast(device: str, x: np.ndarray, elem_type: int, *mode: object) -> np.ndarray:
    g = wr.Graph()
    y = cast_to(g.input("x", x.shape, str(x.dtype)), elem_type, *mode)
    return wr.compile(g, [y], device=wr.device(device)).run({"x": x})[0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("elem_type", sorted(FLOATS))
@pytest.mark.parametrize("saturate", [True, False])
def test_round_to_small_float(device: str, elem_type: int, saturate: bool) -> None:
    x, t = _values(), FLOATS[elem_type]
    if saturate and elem_type not in (16, 23):
        want = numpy_helper.saturate_cast(x, t).astype(np.float32)
    else:
        want = x.astype(t).astype(np.float32)
    got = _cast(device, x, elem_type, saturate)
    if elem_type == 23:               # float4e2m1 has no NaN: ml_dtypes gives -0, we give 0
        want[np.isnan(x)] = 0
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [True, False])
def test_round_to_e8m0(device: str, mode: str, saturate: bool) -> None:
    x = _values()
    want = numpy_helper.to_float8e8m0(x, saturate, mode).astype(np.float32)
    np.testing.assert_array_equal(_cast(device, x, 24, saturate, mode), want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("elem_type,t", [(22, ml_dtypes.int4), (21, ml_dtypes.uint4),
                                         (26, ml_dtypes.int2), (25, ml_dtypes.uint2)])
def test_wrap_to_narrow_int(device: str, elem_type: int, t: object) -> None:
    x = np.arange(-40, 40, dtype=np.int32)
    want = x.astype(t).astype(np.int32)
    np.testing.assert_array_equal(_cast(device, x, elem_type), want)


def _session_vs_onnx(node: onnx.NodeProto, feeds: dict[str, np.ndarray], out_type: int,
                     opset: int = 21) -> None:
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                            a.shape) for n, a in feeds.items()]
    graph = helper.make_graph([node], "q", inputs,
                              [helper.make_tensor_value_info("y", out_type, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    (got,) = InferenceSession(model.SerializeToString()).run(None, feeds)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_quantize_linear_blocked_int4() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(0, 4, (3, 10, 5)).astype(np.float32)
    scale = rng.uniform(0.2, 1.5, (3, 4, 5)).astype(np.float32)
    zero = rng.integers(-3, 3, (3, 4, 5)).astype(np.int8)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=3)
    model_zero = numpy_helper.from_array(zero.astype(ml_dtypes.int4), "z")
    graph = helper.make_graph(
        [node], "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                      helper.make_tensor_value_info("s", TensorProto.FLOAT, scale.shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT4, None)], [model_zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    want = ReferenceEvaluator(model).run(None, {"x": x, "s": scale})[0].astype(np.int8)
    (got,) = InferenceSession(model.SerializeToString()).run(None, {"x": x, "s": scale})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("columns", [1, 9])
def test_qlinear_matmul(columns: int) -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(0, 255, (2, 7, 33)).astype(np.uint8)
    b = rng.integers(0, 255, (33, 9)).astype(np.uint8)
    feeds = {"a": a, "as": np.float32([0.02]), "az": np.uint8([120]), "b": b,
             "bs": rng.uniform(0.01, 0.05, columns).astype(np.float32),
             "bz": rng.integers(100, 150, columns).astype(np.uint8), "ys": np.float32([0.4]),
             "yz": np.uint8([128])}
    node = helper.make_node("QLinearMatMul", list(feeds), ["y"])
    _session_vs_onnx(node, feeds, TensorProto.UINT8)


def test_dequantize_linear_per_axis() -> None:
    rng = np.random.default_rng(3)
    feeds = {"x": rng.integers(-128, 127, (4, 6, 3)).astype(np.int8),
             "s": rng.uniform(0.1, 2, 6).astype(np.float32),
             "z": rng.integers(-5, 5, 6).astype(np.int8)}
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1)
    _session_vs_onnx(node, feeds, TensorProto.FLOAT)
