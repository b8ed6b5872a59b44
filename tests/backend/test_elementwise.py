"""Elementwise ops (binary with broadcasting, compare, where, unary, cast) against numpy."""
from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import check, rand

import webrlx as wr

SHAPES = [((3,), (3,)), ((1,), (257,)), ((2, 3), (3,)), ((4, 1, 5), (3, 1)), ((1000,), ()),
          ((2, 1), (1, 3))]
BINARY = {
    "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply), "div": (lambda a, b: a / b, np.divide),
    "maximum": (lambda a, b: a.maximum(b), np.maximum),
    "minimum": (lambda a, b: a.minimum(b), np.minimum),
}


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(backend, op, shapes):
    fn, np_fn = BINARY[op]
    b = rand(*shapes[1], seed=1) + (3.0 if op == "div" else 0.0)
    check(backend, fn, np_fn, rand(*shapes[0]), b, rtol=1e-6)


@pytest.mark.parametrize("shapes", SHAPES[:4], ids=str)
def test_pow(backend, shapes):
    check(backend, lambda a, b: a ** b, np.power, rand(*shapes[0], low=0.1, high=2),
          rand(*shapes[1], seed=3, low=-2, high=2), rtol=1e-5)


def test_clamp(backend):
    check(backend, lambda a: a.clamp(-0.25, 0.5), lambda a: np.clip(a, -0.25, 0.5), rand(3, 300))


def test_pow_negative_base_integral_exponent(backend):
    check(backend, lambda a: a ** 3.0, lambda a: a ** 3, rand(17), rtol=1e-5)


def test_scalar_operands(backend):
    check(backend, lambda a: 2.0 * a - 1.0 + a / 4.0, lambda a: 2 * a - 1 + a / 4, rand(33))


@pytest.mark.parametrize("op,np_fn", [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                                      ("le", np.less_equal), ("gt", np.greater),
                                      ("ge", np.greater_equal)])
def test_compare(backend, op, np_fn):
    a = np.round(rand(4, 5) * 3)
    b = np.round(rand(5, seed=2) * 3)
    check(backend, lambda x, y: getattr(x, f"__{op}__")(y), np_fn, a, b)


def test_where(backend):
    check(backend, lambda c, a, b: wr.where(c > 0, a, b), lambda c, a, b: np.where(c > 0, a, b),
          rand(3, 1), rand(1, 4, seed=1), rand(3, 4, seed=2))


def _np_gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


UNARY = {
    "neg": (lambda x: -x, np.negative, (-3, 3)), "abs": (abs, np.abs, (-3, 3)),
    "exp": (lambda x: x.exp(), np.exp, (-5, 5)), "log": (lambda x: x.log(), np.log, (0.01, 9)),
    "sqrt": (lambda x: x.sqrt(), np.sqrt, (0, 9)),
    "rsqrt": (lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), (0.01, 9)),
    "sin": (lambda x: x.sin(), np.sin, (-3, 3)), "cos": (lambda x: x.cos(), np.cos, (-3, 3)),
    "tanh": (lambda x: x.tanh(), np.tanh, (-20, 20)),
    "sigmoid": (lambda x: x.sigmoid(), lambda x: 1 / (1 + np.exp(-x)), (-20, 20)),
    "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0), (-3, 3)),
    "gelu": (lambda x: x.gelu(), _np_gelu, (-5, 5)),
    "gelu_tanh": (lambda x: x.gelu("tanh"), lambda x: 0.5 * x * (1 + np.tanh(
        math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), (-5, 5)),
    "silu": (lambda x: x.silu(), lambda x: x / (1 + np.exp(-x)), (-10, 10)),
    "erf": (lambda x: x.erf(), np.vectorize(math.erf), (-3, 3)),
    "floor": (lambda x: x.floor(), np.floor, (-3, 3)),
    "ceil": (lambda x: x.ceil(), np.ceil, (-3, 3)),
    "round": (lambda x: x.round(), np.round, (-3, 3)),
}


@pytest.mark.parametrize("shape", [(1,), (257,), (3, 5, 7)], ids=str)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(backend, op, shape):
    fn, np_fn, (lo, hi) = UNARY[op]
    x = rand(*shape, low=lo, high=hi)
    # WGSL allows sin/cos an absolute error of 2^-11 on [-pi, pi] (SwiftShader uses it)
    atol = 5e-4 if op in ("sin", "cos") else 1e-6
    check(backend, fn, np_fn, x, rtol=2e-6, atol=atol)


def test_round_half_to_even(backend):
    check(backend, lambda x: x.round(), np.round, np.array([0.5, 1.5, -2.5, 2.5, 3.5],
                                                           np.float32))


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"),
                                     ("float32", "bool"), ("bool", "float32"),
                                     ("float32", "float16"), ("float16", "float32"),
                                     ("int32", "uint32"), ("float32", "uint32")])
def test_cast(backend, src, dst):
    x = (rand(37, low=0 if "uint" in dst else -9, high=9)).astype(np.float32)
    x[:3] = 0
    x = x.astype(src) if src != "bool" else x > 0
    check(backend, lambda t: t.cast(dst), lambda t: t.astype(dst) if t.dtype.kind != "f"
          or dst not in ("int32", "uint32") else np.trunc(t).astype(dst), x, rtol=1e-3)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("int32", "float32"),
                                     ("float32", "uint32"), ("uint32", "int32")])
def test_bitcast(backend, src, dst):
    x = np.array([1.0, -0.0, 3.5e-38, -2.75, np.inf, 448.0, 1e30], np.float32).view(src)
    check(backend, lambda t: t.bitcast(dst), lambda t: t.astype(src).view(dst), x)


@pytest.mark.parametrize("op", ["and", "or", "xor", "not", "shl", "shr"])
@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_bitwise(backend, op, dtype):
    a = np.array([0, 1, -1, 5, -6, 0x7FFFFFFF, -0x80000000, 12345678], np.int64).astype(dtype)
    b = np.array([3, 0, 7, 31, 1, 4, 2, 9], dtype)
    fn, np_fn = {"and": (lambda x, y: x & y, np.bitwise_and),
                 "or": (lambda x, y: x | y, np.bitwise_or),
                 "xor": (lambda x, y: x ^ y, np.bitwise_xor),
                 "not": (lambda x, y: ~x, lambda x, y: np.invert(x)),
                 "shl": (lambda x, y: x << y, np.left_shift),
                 "shr": (lambda x, y: x >> y, np.right_shift)}[op]
    check(backend, fn, np_fn, a, b)


def test_int_arithmetic(backend):
    a = np.arange(-6, 6, dtype=np.int32)
    check(backend, lambda x: (x * 3 + 1) - x.maximum(0), lambda x: (x * 3 + 1) - np.maximum(x, 0),
          a)


def test_float16_math(backend):
    x = rand(64, low=-2, high=2).astype(np.float16)
    check(backend, lambda t: (t * t + 1).sqrt(), lambda t: np.sqrt(t * t + 1), x, rtol=2e-3,
          atol=2e-3)


def test_bool_logic(backend):
    a, b = rand(20) > 0, rand(20, seed=5) > 0
    check(backend, lambda x, y: x * y, np.logical_and, a, b)


@pytest.mark.parametrize("op", ["gelu", "erf", "tanh", "exp", "relu", "neg"])
def test_rank0_unary(backend, op):
    check(backend, lambda a: getattr(a, op)(), {
        "gelu": lambda a: 0.5 * a * (1 + np.vectorize(math.erf)(a / math.sqrt(2))),
        "erf": np.vectorize(math.erf), "tanh": np.tanh, "exp": np.exp,
        "relu": lambda a: np.maximum(a, 0), "neg": np.negative}[op],
        np.array(0.3, np.float32), rtol=1e-5, atol=1e-6)


def test_rank0_binary_and_broadcast(backend):
    check(backend, lambda a, b: (a * b + 1.0).maximum(a), lambda a, b: np.maximum(a * b + 1, a),
          np.array(0.5, np.float32), np.array(-2.0, np.float32))
    check(backend, lambda a, b: a + b, np.add, np.array(1.5, np.float32), rand(3, 4))
