"""Loop, Scan and sequence rows on forms the node tests leave out (Scan axes and directions,
Loop stopping on its condition, negative positions, scalar splits, ConcatFromSequence with a
new axis) against onnx's reference evaluator."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from webrlx.onnx import InferenceSession  # noqa: E402

F = TensorProto.FLOAT


def _check(nodes: list, inputs: dict, outputs: list, opset: int = 18) -> None:
    gi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
          for n, v in inputs.items()]
    go = [helper.make_tensor_value_info(o, F, None) for o in outputs]
    model = helper.make_model(helper.make_graph(nodes, "g", gi, go),
                              opset_imports=[helper.make_opsetid("", opset)])
    want = ReferenceEvaluator(model).run(None, inputs)
    got = InferenceSession(model.SerializeToString()).run(None, inputs)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


def _const(name: str, v: int) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, TensorProto.INT64, [], [v]))


def test_scan_axes_and_directions() -> None:
    """A running sum over axis 1 read backwards, its outputs stacked on axis 1 in reverse
    (onnx's reference evaluator implements neither, so numpy states the expected values)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "x_t"], ["y_t"])], "body",
        [helper.make_tensor_value_info("s_in", F, [2]),
         helper.make_tensor_value_info("x_t", F, [2])],
        [helper.make_tensor_value_info("s_out", F, [2]),
         helper.make_tensor_value_info("y_t", F, [2])])
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[1],
                            scan_output_axes=[1], scan_output_directions=[1])
    gi = [helper.make_tensor_value_info("s0", F, [2]), helper.make_tensor_value_info(
        "x", F, [2, 5])]
    go = [helper.make_tensor_value_info(o, F, None) for o in ("s", "y")]
    model = helper.make_model(helper.make_graph([node], "g", gi, go),
                              opset_imports=[helper.make_opsetid("", 18)])
    s0, x = _rand(2), _rand(2, 5)
    state, ys = s0.astype(np.float64), []
    for t in range(4, -1, -1):
        state = state + x[:, t]
        ys.append(state * x[:, t])
    got_s, got_y = InferenceSession(model.SerializeToString()).run(None, {"s0": s0, "x": x})
    np.testing.assert_allclose(got_s, state, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_y, np.stack(ys[::-1], 1), rtol=1e-5, atol=1e-6)


def test_loop_stops_on_its_condition() -> None:
    """No trip count: the body doubles x until its sum passes a bound; scan output per step."""
    body = helper.make_graph(
        [helper.make_node("Add", ["x_in", "x_in"], ["x_out"]),
         helper.make_node("ReduceSum", ["x_out"], ["total"], keepdims=0),
         helper.make_node("Constant", [], ["bound"], value=helper.make_tensor(
             "bound", F, [], [40.0])),
         helper.make_node("Less", ["total", "bound"], ["cond_out"]),
         helper.make_node("Identity", ["x_out"], ["y"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_in", F, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x_out", F, [3]),
         helper.make_tensor_value_info("y", F, [3])])
    nodes = [helper.make_node("Constant", [], ["x0"], value=helper.make_tensor(
                 "x0", F, [3], [1.0, 2.0, 0.5])),
             helper.make_node("Constant", [], ["go"], value=helper.make_tensor(
                 "go", TensorProto.BOOL, [], [True])),
             helper.make_node("Loop", ["", "go", "x0"], ["x_last", "ys"], body=body),
             helper.make_node("Mul", ["x_last", "w"], ["out"])]
    _check(nodes, {"w": _rand(3)}, ["out", "ys"])


def test_sequence_positions_and_concat() -> None:
    """A scalar split, erase and read at negative positions, concat on a new last axis."""
    nodes = [_const("two", 2), _const("minus1", -1), _const("minus2", -2),
             helper.make_node("SplitToSequence", ["x", "two"], ["s"], axis=1),
             helper.make_node("SequenceErase", ["s", "minus2"], ["t"]),
             helper.make_node("SequenceAt", ["t", "minus1"], ["last"]),
             helper.make_node("SequenceInsert", ["t", "last", "minus1"], ["u"]),
             helper.make_node("ConcatFromSequence", ["u"], ["y"], axis=-1, new_axis=1)]
    _check(nodes, {"x": _rand(3, 6)}, ["y", "last"])
