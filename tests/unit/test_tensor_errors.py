"""Bad input to Tensor ops and graph building: each gives a clear error (ShapeError,
TypeError or ValueError) naming the op and the argument, raised while the graph is built,
never a numpy or Python internal error later; the graph stays usable afterwards."""
from __future__ import annotations

import numpy as np
import pytest

import webrlx as wr
from webrlx import nn
from webrlx.shape import ShapeError


def _graph():
    g = wr.Graph()
    return g, g.input("x", (2, 3)), g.input("y", (4, 5)), g.input("i", (2,), "int32")


CASES = [
    ("add shapes", lambda g, x, y, i: x + y, ShapeError, r"add: shapes \(2, 3\), \(4, 5\) do not broadcast"),
    ("add a string", lambda g, x, y, i: x + "a", TypeError, r"add: operand 'a' \(str\) is not a Tensor"),
    ("mul a ragged list", lambda g, x, y, i: x * [[1], [1, 2]], TypeError, r"mul: operand .* is not a Tensor, a number or a rectangular"),
    ("pow an object", lambda g, x, y, i: x ** object(), TypeError, r"pow: operand .* \(object\) is not a Tensor"),
    ("matmul shapes", lambda g, x, y, i: x @ y, ShapeError, r"matmul: inner dims differ"),
    ("matmul a string", lambda g, x, y, i: x @ "a", TypeError, r"matmul: operand 'a'"),
    ("rmatmul a string", lambda g, x, y, i: "a" @ x, TypeError, r"matmul: operand 'a'"),
    ("where a string", lambda g, x, y, i: wr.where(x > 0, x, "b"), TypeError, r"where: operand 'b'"),
    ("sum axis range", lambda g, x, y, i: x.sum(axis=5), ShapeError, r"sum: axis 5 is out of range for rank 2"),
    ("sum axis type", lambda g, x, y, i: x.sum(axis="a"), TypeError, r"sum: axis must be an int, got str 'a'"),
    ("sum axis float", lambda g, x, y, i: x.sum(axis=1.0), TypeError, r"sum: axis must be an int, got float"),
    ("mean axis twice", lambda g, x, y, i: x.mean(axis=(0, 0)), ShapeError, r"mean: axes \(0, 0\) name an axis twice"),
    ("max axis twice", lambda g, x, y, i: x.max(axis=(1, -1)), ShapeError, r"max: axes \(1, -1\) name an axis twice"),
    ("softmax axis", lambda g, x, y, i: x.softmax(axis=3), ShapeError, r"softmax: axis 3 is out of range"),
    ("argmax axis", lambda g, x, y, i: x.argmax(axis=7), ShapeError, r"argmax: axis 7 is out of range"),
    ("cumsum axis", lambda g, x, y, i: x.cumsum(axis=2), ShapeError, r"cumsum: axis 2 is out of range"),
    ("reshape count", lambda g, x, y, i: x.reshape((4, 4)), ShapeError, r"reshape: \(2, 3\) -> \(4, 4\) changes the element count"),
    ("permute repeat", lambda g, x, y, i: x.permute((0, 0)), ShapeError, r"permute: axes \(0, 0\) are not a permutation"),
    ("narrow range", lambda g, x, y, i: x.narrow(0, 1, 5), ShapeError, r"range \[1:6\] is out of bounds for dim 2"),
    ("narrow axis", lambda g, x, y, i: x.narrow(4, 0, 1), ShapeError, r"narrow: axis 4 is out of range"),
    ("gather float ids", lambda g, x, y, i: x.gather(x), ShapeError, r"gather: indices must be int32/uint32, got float32"),
    ("gather axis", lambda g, x, y, i: x.gather(i, axis=4), ShapeError, r"gather: axis 4 is out of range"),
    ("cast dtype", lambda g, x, y, i: x.cast("float99"), TypeError, r"unknown dtype 'float99'"),
    ("topk k", lambda g, x, y, i: x.topk(9), ShapeError, r"topk: k=9 must be in \[1, 3\]"),
    ("concat shapes", lambda g, x, y, i: wr.concat([x, y], 0), ShapeError, r"concat: shapes .* differ outside axis 0"),
    ("concat nothing", lambda g, x, y, i: wr.concat([], 0), ValueError, r"concat: needs at least one tensor"),
    ("expand shape", lambda g, x, y, i: x.expand((5, 5)), ShapeError, r"expand: shapes \(2, 3\), \(5, 5\) do not broadcast"),
    ("layer_norm weight", lambda g, x, y, i: nn.layer_norm(x, g.input("w", (7,))), ShapeError, r"layer_norm: weight/bias must have shape \(3,\), got \(7,\)"),
    ("conv2d rank", lambda g, x, y, i: nn.conv2d(x, x), ShapeError, r"conv2d: input \(N,C,H,W\)"),
    ("where condition", lambda g, x, y, i: wr.where(x, x, x), ShapeError, r"where: condition must be bool"),
    ("clamp bound", lambda g, x, y, i: x.clamp("a", 1), TypeError, r"clamp: lo must be a number, got str 'a'"),
    ("index range", lambda g, x, y, i: x[5], ShapeError, r"getitem: index 5 is out of range for dim 2"),
    ("index type", lambda g, x, y, i: x["a"], TypeError, r"getitem: unsupported index 'a'"),
    ("two graphs", lambda g, x, y, i: x + wr.Graph().input("z", (2, 3)), ValueError, r"different graphs"),
    ("input dtype", lambda g, x, y, i: g.input("q", (2,), "float99"), TypeError, r"unknown dtype 'float99'"),
    ("input dim", lambda g, x, y, i: g.input("r", (-3,)), ShapeError, r"negative dim -3"),
    ("input name", lambda g, x, y, i: g.input(5, (2,)), ValueError, r"names must be non-empty strings, got 5"),
    ("input name twice", lambda g, x, y, i: g.input("x", (2,)), ValueError, r"'x'"),
    ("compile outputs", lambda g, x, y, i: wr.compile(g, outputs=["x"]), ValueError, r"compile\(\): 'x' is not a Tensor of this graph"),
    ("compile device", lambda g, x, y, i: wr.compile(g, outputs=[x], device="nope"), ValueError, r"unknown device 'nope'"),
]


@pytest.mark.parametrize("build, error, msg", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_names_the_op_and_argument(build, error, msg):
    g, x, y, i = _graph()
    with pytest.raises(error, match=msg):
        build(g, x, y, i)
    # the graph still builds and runs
    exe = wr.compile(g, outputs=[(x * 2).sum(axis=1)], device="reference")
    np.testing.assert_array_equal(exe.run({"x": np.ones((2, 3), np.float32)})[0], [6, 6])
