"""NaN and ±inf follow numpy on every backend (torch where numpy has no such op).

The values cover NaN, ±inf, ±0 and ordinary numbers; binary ops see every pair of them. The
numpy side runs in float32 (what the graph computes) unless float64 rounding cannot differ.
Documented choices where numpy has no rule: softmax of a row that is all -inf is NaN (numpy's
formula exp(x - max) / sum gives 0/0), layer_norm of a row with an inf is NaN (as torch)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check

import webrlx as wr

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 0.25], np.float32)
# every (a, b) pair of SPECIAL: a varies slowest
PAIR_A = np.repeat(SPECIAL, len(SPECIAL))
PAIR_B = np.tile(SPECIAL, len(SPECIAL))


def _np32(fn):
    """Run a numpy rule in float32, warnings off (invalid/overflow are the point here)."""
    def rule(*arrays):
        with np.errstate(all="ignore"):
            return fn(*(np.asarray(a, np.float32) for a in arrays))
    return rule


@pytest.mark.parametrize("op, rule", [
    ("maximum", np.maximum), ("minimum", np.minimum), ("add", np.add), ("sub", np.subtract),
    ("mul", np.multiply), ("div", np.divide), ("pow", np.power)], ids=lambda v: str(v)[:12])
def test_binary_special_values(backend, op, rule):
    fn = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b, "pow": lambda a, b: a ** b,
          "maximum": lambda a, b: a.maximum(b), "minimum": lambda a, b: a.minimum(b)}[op]
    check(backend, fn, _np32(rule), PAIR_A, PAIR_B, rtol=1e-6, atol=0)


def test_compare_special_values(backend):
    for op, rule in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                     ("ge", np.greater_equal)]:
        fn = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
              "lt": lambda a, b: a < b, "ge": lambda a, b: a >= b}[op]
        check(backend, fn, _np32(rule), PAIR_A, PAIR_B)


@pytest.mark.parametrize("op", ["relu", "tanh", "sigmoid", "silu", "abs", "neg", "floor",
                                "exp", "gelu", "gelu_tanh", "clamp", "sqrt", "log"])
def test_unary_special_values(backend, op):
    x = np.concatenate([SPECIAL, np.array([-100, 100, -30, 30, 4, -1], np.float32)])
    fn = {"gelu": lambda t: t.gelu(), "gelu_tanh": lambda t: t.gelu("tanh"),
          "clamp": lambda t: t.clamp(-1.0, 1.0)}.get(op, lambda t: getattr(t, op)())

    def rule(a):
        with np.errstate(all="ignore"):
            a = np.asarray(a, np.float64)
            if op == "clamp":
                r = np.clip(a, -1.0, 1.0)
            elif op in ("gelu", "gelu_tanh", "silu"):
                from webrlx.activations import ACTIVATIONS
                r = ACTIVATIONS[op].numpy(a)
            else:
                r = {"relu": lambda v: np.maximum(v, 0), "neg": np.negative,
                     "sigmoid": lambda v: 1 / (1 + np.exp(-v))}.get(op, getattr(np, op, None))(a)
            return np.asarray(r, np.float32)       # exp(100) is inf in float32
    check(backend, fn, rule, x, rtol=2e-6, atol=1e-6)


ROWS = np.array([
    [1.0, np.nan, 3.0, -1.0, 0.0],           # a NaN: max/min/sum propagate it
    [-np.inf] * 5,                           # all -inf: max is -inf, not the lowest float
    [np.inf, 1.0, 2.0, np.inf, 0.0],         # +inf twice: argmax is the first
    [2.0, -np.inf, 5.0, 5.0, -1.0],          # a -inf among finite values
    [np.nan, np.nan, 0.0, np.inf, 1.0],      # argmax returns the first NaN
    [np.inf, -np.inf, 0.0, 1.0, 2.0],        # inf - inf in a sum is NaN
], np.float32)


@pytest.mark.parametrize("op", ["max", "min", "sum", "mean", "prod"])
def test_reductions_special_values(backend, op):
    check(backend, lambda t: getattr(t, op)(axis=1), _np32(lambda a: getattr(np, op)(a, axis=1)),
          ROWS, rtol=1e-6, atol=0)
    check(backend, lambda t: getattr(t, op)(axis=0), _np32(lambda a: getattr(np, op)(a, axis=0)),
          ROWS, rtol=1e-6, atol=0)


def test_argmax_special_values(backend):
    check(backend, lambda t: t.argmax(axis=1), lambda a: np.argmax(a, axis=1).astype(np.int32),
          ROWS, exact_dtype=False)
    big = np.zeros((3, 700), np.float32)     # a NaN far into a long row, after a larger value
    big[0, 600], big[0, 10] = np.nan, 5.0
    big[1, 300], big[1, 650] = np.inf, np.nan
    big[2, :] = -np.inf
    check(backend, lambda t: t.argmax(axis=1), lambda a: np.argmax(a, axis=1).astype(np.int32),
          big, exact_dtype=False)


SOFTMAX_ROWS = np.array([
    [0.0, -np.inf, 1.0, -np.inf],            # masked entries: exactly 0
    [-np.inf] * 4,                           # fully masked: NaN (numpy's formula)
    [1.0, np.nan, 0.0, 2.0],                 # NaN anywhere: the whole row is NaN
    [np.inf, 0.0, 1.0, 2.0],                 # +inf: inf - inf is NaN, so the row is NaN
], np.float32)


def _softmax(a, axis=-1):
    with np.errstate(all="ignore"):
        e = np.exp(a - a.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(a, axis=-1):
    with np.errstate(all="ignore"):
        s = a - a.max(axis=axis, keepdims=True)
        return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def test_softmax_special_values(backend):
    check(backend, lambda t: t.softmax(-1), _softmax, SOFTMAX_ROWS, rtol=1e-6, atol=1e-7)
    check(backend, lambda t: t.log_softmax(-1), _log_softmax, SOFTMAX_ROWS, rtol=1e-6,
          atol=1e-6)


def test_norms_and_matmul_propagate_nan(backend):
    x = np.ones((3, 8), np.float32)
    x[0, 2], x[1, 5] = np.nan, np.inf
    with np.errstate(all="ignore"):
        mu = x.astype(np.float64).mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        ln = (x - mu) / np.sqrt(var + 1e-5)
        rms = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5)
    check(backend, lambda t: wr.nn.layer_norm(t, eps=1e-5), lambda a: ln, x, atol=1e-5)
    check(backend, lambda t: wr.nn.rms_norm(t, eps=1e-5), lambda a: rms, x, atol=1e-5)
    w = np.ones((8, 4), np.float32)
    check(backend, lambda t, u: t @ u, _np32(np.matmul), x, w, rtol=1e-6)


def test_max_pool_and_topk_special_values(backend):
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    x[0, 0, 1, 1], x[0, 1, :2, :2] = np.nan, -np.inf          # a NaN window, an all -inf one

    def pool(a):                                              # torch: NaN in a window wins
        w = a.reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(1, 2, 2, 2, 4)
        return w.max(-1)
    check(backend, lambda t: wr.nn.max_pool2d(t, 2), pool, x, rtol=0, atol=0)
    row = np.array([[1.0, np.nan, np.inf, 3.0, np.nan, -np.inf, 3.0]], np.float32)
    want = np.array([[1, 4, 2, 3, 6, 0, 5]], np.int32)        # NaNs first (torch.topk)
    check(backend, lambda t: t.topk(7)[1], lambda a: want, row, exact_dtype=False)
