"""Graph building: shape/dtype inference and build-time errors (no GPU)."""
from __future__ import annotations

import numpy as np
import pytest

import webrlx as wr
from webrlx.shape import ShapeError


def test_broadcast_and_symbolic_shapes():
    g = wr.Graph()
    x = g.input("x", ("batch", 1, 5))
    y = g.input("y", (3, 1))
    assert (x + y).shape == ("batch", 3, 5)
    assert (x @ g.param("w", (5, 7))).shape == ("batch", 1, 7)
    assert x.reshape(-1, 5).shape == ("batch", 5)
    assert x.reshape("batch", 5).sum(axis=0).shape == (5,)


def test_dtype_rules():
    g = wr.Graph()
    i = g.input("i", (3,), "int32")
    f = g.input("f", (3,), "float16")
    assert (i + 1).dtype == wr.int32
    assert (i / 2).dtype == wr.float32
    assert (i + f).dtype == wr.float16
    assert (f > 0).dtype == wr.bool_
    assert f.argmax().dtype == wr.int32


@pytest.mark.parametrize("build,msg", [
    (lambda g: g.input("a", (2, 3)) + g.input("b", (4,)), r"add: shapes \(2, 3\), \(4,\) do not "
                                                          r"broadcast"),
    (lambda g: g.input("a", (2, 3)) @ g.input("b", (4, 5)), r"matmul: inner dims differ"),
    (lambda g: g.input("a", (2, 3)).reshape(4, 2), r"reshape: .* changes the element count"),
    (lambda g: g.input("a", (2, 3), "int32").exp(), r"exp: needs a float32/float16 operand"),
    (lambda g: g.input("a", (2, 3)).sum(axis=2), r"sum: axis 2 is out of range for rank 2"),
    (lambda g: g.input("a", (2, 3)).permute(0, 0), r"permute: axes \(0, 0\) are not a permutation"),
    (lambda g: g.input("a", (2, 3))[5], r"getitem: index 5 is out of range"),
    (lambda g: g.input("a", (2, 3)).topk(4), r"topk: k=4 must be in \[1, 3\]"),
    (lambda g: wr.concat([g.input("a", (2, 3)), g.input("b", (3, 3))], axis=1), r"concat"),
    (lambda g: g.param("p", ("n", 3)), r"param 'p': shape \('n', 3\) must be static"),
    (lambda g: wr.nn.conv2d(g.input("a", (1, 3, 8, 8)), g.param("w", (4, 2, 3, 3))),
     r"conv2d: channels 3"),
])
def test_build_errors_name_op_and_shapes(build, msg):
    with pytest.raises(ShapeError, match=msg):
        build(wr.Graph())


def test_duplicate_and_bad_names():
    g = wr.Graph()
    g.input("x", (1,))
    with pytest.raises(ValueError, match="already used"):
        g.param("x", (1,))
    with pytest.raises(TypeError, match="float64 is not supported"):
        g.input("y", (1,), np.float64)


def test_tensor_has_no_truth_value():
    g = wr.Graph()
    with pytest.raises(TypeError, match="no truth value"):
        bool(g.input("x", (1,)) > 0)


def test_constants_from_python_values():
    g = wr.Graph()
    assert g.constant(np.arange(3)).dtype == wr.int32
    assert g.constant(1.5).dtype == wr.float32
    assert g.constant([True, False]).dtype == wr.bool_


def test_pretty_printer_and_verify():
    g = wr.Graph()
    y = (g.input("x", ("n", 2)) * 2).exp()
    text = str(g)
    assert "%0 = input('x') : nxn" not in text and "input('x')" in text and "exp(%2)" in text
    g.verify()
    assert y.shape == ("n", 2)
