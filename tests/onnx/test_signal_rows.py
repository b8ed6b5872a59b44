"""The DFT and STFT rows on forms the node tests leave out (dft_length padding and truncation,
complex onesided input, odd-length irfft, complex inverse on another axis, STFT on complex
input), against onnx's reference evaluator (numpy's FFT in float64)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from webrlx.onnx import InferenceSession  # noqa: E402


def _check(op: str, inputs: dict, consts: dict, attrs: dict, opset: int = 20) -> None:
    nodes = [helper.make_node("Constant", [], [n], value=helper.make_tensor(
        n, TensorProto.INT64, [], [int(v)])) for n, v in consts.items()]
    names = {"DFT": ["x", "dft_length", "axis"],
             "STFT": ["x", "frame_step", "window", "frame_length"]}[op]
    ins = [n if n in inputs or n in consts else "" for n in names]
    while not ins[-1]:
        ins.pop()
    nodes.append(helper.make_node(op, ins, ["y"], **attrs))
    gi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n, v in inputs.items()]
    go = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    model = helper.make_model(helper.make_graph(nodes, "g", gi, go),
                              opset_imports=[helper.make_opsetid("", opset)])
    (want,) = ReferenceEvaluator(model).run(None, inputs)
    (got,) = InferenceSession(model.SerializeToString()).run(None, inputs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("length", [6, 13])     # truncate, zero-pad
def test_dft_length(length: int) -> None:
    _check("DFT", {"x": _rand(2, 9, 1)}, {"dft_length": length, "axis": 1}, {})


def test_complex_onesided_on_axis_0() -> None:
    _check("DFT", {"x": _rand(8, 3, 2)}, {"axis": 0}, {"onesided": 1})


@pytest.mark.parametrize("length", [7, 8])
def test_irfft_lengths(length: int) -> None:
    _check("DFT", {"x": _rand(3, 5, 2)}, {"dft_length": length, "axis": 1},
           {"inverse": 1, "onesided": 1})


def test_complex_inverse_axis_2() -> None:
    _check("DFT", {"x": _rand(2, 3, 6, 2)}, {"axis": 2}, {"inverse": 1})


def test_stft_complex_two_sided() -> None:
    _check("STFT", {"x": _rand(2, 40, 2), "window": _rand(8)}, {"frame_step": 5},
           {"onesided": 0}, opset=17)
