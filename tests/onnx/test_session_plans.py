"""InferenceSession's plans when the dims change every run (a decoder's growing past): one device
copy of the weights shared by every plan, the least recently used plan's memory freed past
max_plans, Executable.release / share_params; and MatMul by a constant weight whose column
count is no multiple of 4 (padded to one for the vec4 kernels), against numpy."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import webrlx as wr  # noqa: E402
from webrlx.onnx import InferenceSession  # noqa: E402


def _matmul_model(w: np.ndarray, rank: int = 2) -> bytes:
    """y = concat(past, x) @ w along axis rank - 2: the rows grow with the past."""
    lead = ["batch"] * (rank - 2)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [*lead, "rows", w.shape[0]])
    past = helper.make_tensor_value_info("past", TensorProto.FLOAT,
                                         [*lead, "past", w.shape[0]])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Concat", ["past", "x"], ["h"], axis=rank - 2),
             helper.make_node("MatMul", ["h", "w"], ["y"])]
    g = helper.make_graph(nodes, "g", [x, past], [y], [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("rows,rank", [(1, 2), (3, 3), (70, 2)])
def test_matmul_odd_columns_padded(rows: int, rank: int) -> None:
    rng = np.random.default_rng(rows)
    w = rng.standard_normal((24, 37)).astype(np.float32)
    lead = (2,) * (rank - 2)
    x = rng.standard_normal((*lead, rows, 24)).astype(np.float32)
    past = rng.standard_normal((*lead, 2, 24)).astype(np.float32)
    sess = InferenceSession(_matmul_model(w, rank))
    (y,) = sess.run(None, {"x": x, "past": past})
    ref = np.concatenate([past, x], -2) @ w
    assert y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    assert sess.executable is not None
    assert sess.executable.graph.params.keys() == {"w#pad4"}      # (24, 40): no "w" upload


def test_plans_share_weights_and_free_memory_past_max_plans() -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    sess = InferenceSession(_matmul_model(w), max_plans=3)
    x = rng.standard_normal((1, 16)).astype(np.float32)
    exes, live = [], []
    for n in range(1, 11):                       # a plan per past length
        past = rng.standard_normal((n, 16)).astype(np.float32)
        (y,) = sess.run(None, {"x": x, "past": past})
        np.testing.assert_allclose(y, np.concatenate([past, x]) @ w, rtol=1e-5, atol=1e-5)
        exe = sess.executable
        assert exe is not None
        exes.append(exe)
        stats = exe.stats
        live.append(stats["buffers"] - stats.get("buffers_released", 0))
    if exes[0].engine.__class__.__name__ != "GpuEngine":
        pytest.skip("the reference device holds no device buffers")
    assert len(sess._plans) == 3
    bufs = {id(e.engine.param_bufs["w"]) for e in exes}
    assert len(bufs) == 1, "every plan must use the one device copy of w"
    assert live[4:] == [live[4]] * 6, f"device buffers alive after each run: {live}"
    assert not exes[0].engine.plans, "an evicted plan's memory is released"
    (y,) = exes[0].run({"x": x, "past": np.ones((1, 16), np.float32)})   # recompiled on demand
    np.testing.assert_allclose(y, np.concatenate([np.ones((1, 16)), x]) @ w, rtol=1e-5,
                               atol=1e-5)


def test_share_params_needs_matching_shape_and_a_run_donor() -> None:
    g1 = wr.Graph()
    x1 = g1.input("x", (1, 4))
    a = wr.compile(g1, [x1 @ g1.param("w", (4, 4)) + g1.param("b", (4,))])
    a.set_params({"w": np.eye(4, dtype=np.float32), "b": np.ones(4, np.float32)})
    g2 = wr.Graph()
    x2 = g2.input("x", (2, 4))
    b = wr.compile(g2, [x2 @ g2.param("w", (4, 4)) + g2.param("b", (2,)).sum()])
    assert b.share_params(a) == [], "a donor that never ran holds nothing on the device"
    a.run({"x": np.zeros((1, 4), np.float32)})
    if not hasattr(a.engine, "param_bufs"):
        pytest.skip("the reference device holds no device buffers")
    assert b.share_params(a) == ["w"]            # b's "b" has another shape
    b.set_params({"b": np.full(2, 0.5, np.float32)})
    (y,) = b.run({"x": np.arange(8, dtype=np.float32).reshape(2, 4)})
    np.testing.assert_allclose(y, np.arange(8, dtype=np.float32).reshape(2, 4) + 1.0)
