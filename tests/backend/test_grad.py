"""wr.grad: every VJP rule against central finite differences of the same function in float64
numpy (the loss is sum(f(x) * r) for a fixed random r), on every backend; errors for
non-differentiable paths. Tolerance: |got - fd| <= 2e-3 * max|fd| + 1e-4 unless a case says."""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

import webrlx as wr


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _conv_np(x, w, b, s, p, d, groups):
    from webrlx.reference import REFERENCE
    at = {"stride": (s, s), "padding": (p, p), "dilation": (d, d), "groups": groups}
    return REFERENCE["conv2d"]([x, w] + ([b] if b is not None else []), at)


def _pool_np(x, k, s, p, kind):
    from webrlx.reference import REFERENCE
    return REFERENCE[f"{kind}_pool2d"]([x], {"kernel": (k, k), "stride": (s, s),
                                             "padding": (p, p)})


def _rope_np(x, interleaved):
    from webrlx.reference import REFERENCE
    base, p0 = (10000.0, 5) if interleaved else (100.0, 2)
    return REFERENCE["rope"]([x, np.array([p0], np.int32)], {"base": base,
                                                            "interleaved": interleaved})


def _attn_np(q, k, v, mask, causal):
    from webrlx.reference import REFERENCE
    ins = [q, k, v] + ([mask.astype(np.int32)] if mask is not None else [])
    return REFERENCE["attention"](ins, {"scale": 1 / np.sqrt(q.shape[-1]), "causal": causal})


def _erf(x):
    from math import erf
    return np.vectorize(erf)(x)


# name -> (webrlx fn, numpy fn, input shapes, positive inputs?)
CASES = {
    "add_broadcast": (lambda a, b: a + b, lambda a, b: a + b, [(3, 4), (4,)], False),
    "sub_broadcast": (lambda a, b: a - b, lambda a, b: a - b, [(3, 1), (1, 4)], False),
    "mul_broadcast": (lambda a, b: a * b, lambda a, b: a * b, [(2, 3, 4), (3, 1)], False),
    "div": (lambda a, b: a / b, lambda a, b: a / b, [(3, 4), (3, 4)], True),
    "pow": (lambda a, b: a ** b, lambda a, b: a ** b, [(3, 4), (3, 4)], True),
    "maximum": (lambda a, b: a.maximum(b), np.maximum, [(3, 4), (4,)], False),
    "minimum": (lambda a, b: a.minimum(b), np.minimum, [(3, 4), (3, 4)], False),
    "neg_abs": (lambda a: (-a).abs(), lambda a: np.abs(-a), [(3, 4)], False),
    "exp": (lambda a: a.exp(), np.exp, [(3, 4)], False),
    "log": (lambda a: a.log(), np.log, [(3, 4)], True),
    "sqrt": (lambda a: a.sqrt(), np.sqrt, [(3, 4)], True),
    "rsqrt": (lambda a: a.rsqrt(), lambda a: 1 / np.sqrt(a), [(3, 4)], True),
    "sin_cos": (lambda a: a.sin() + a.cos(), lambda a: np.sin(a) + np.cos(a), [(3, 4)], False),
    "tanh": (lambda a: a.tanh(), np.tanh, [(3, 4)], False),
    "sigmoid": (lambda a: a.sigmoid(), lambda a: 1 / (1 + np.exp(-a)), [(3, 4)], False),
    "relu": (lambda a: a.relu(), lambda a: np.maximum(a, 0), [(3, 4)], False),
    "silu": (lambda a: a.silu(), lambda a: a / (1 + np.exp(-a)), [(3, 4)], False),
    "erf": (lambda a: a.erf(), _erf, [(3, 4)], False),
    "gelu": (lambda a: a.gelu(), lambda a: 0.5 * a * (1 + _erf(a / np.sqrt(2))), [(3, 4)],
             False),
    "gelu_tanh": (lambda a: a.gelu("tanh"),
                  lambda a: 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3))),
                  [(3, 4)], False),
    "where": (lambda a, b: wr.where(a > b, a * 2.0, b), lambda a, b: np.where(a > b, a * 2, b),
              [(3, 4), (4,)], False),
    "clamp": (lambda a: a.clamp(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5), [(3, 4)], False),
    "sum_axis": (lambda a: a.sum(axis=1), lambda a: a.sum(axis=1), [(2, 3, 4)], False),
    "sum_keepdims": (lambda a: a.sum(axis=(0, 2), keepdims=True),
                     lambda a: a.sum(axis=(0, 2), keepdims=True), [(2, 3, 4)], False),
    "mean": (lambda a: a.mean(axis=-1), lambda a: a.mean(axis=-1), [(3, 5)], False),
    "mean_all": (lambda a: a.mean(), lambda a: a.mean(), [(3, 5)], False),
    "max": (lambda a: a.max(axis=0), lambda a: a.max(axis=0), [(4, 3)], False),
    "min_keepdims": (lambda a: a.min(axis=1, keepdims=True),
                     lambda a: a.min(axis=1, keepdims=True), [(4, 3)], False),
    "prod": (lambda a: a.prod(axis=1), lambda a: a.prod(axis=1), [(3, 4)], True),
    "softmax": (lambda a: a.softmax(axis=-1), _softmax, [(3, 5)], False),
    "softmax_axis0": (lambda a: a.softmax(axis=0), lambda a: _softmax(a, 0), [(3, 5)], False),
    "log_softmax": (lambda a: a.log_softmax(axis=-1),
                    lambda a: np.log(_softmax(a)), [(3, 5)], False),
    "cumsum": (lambda a: a.cumsum(axis=1), lambda a: np.cumsum(a, axis=1), [(3, 5)], False),
    "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [(3, 4), (4, 5)], False),
    "matmul_batched_broadcast": (lambda a, b: a @ b, lambda a, b: a @ b,
                                 [(2, 3, 4), (4, 5)], False),
    "matmul_vector": (lambda a, b: a @ b, lambda a, b: a @ b, [(4,), (4, 5)], False),
    "matmul_bias_relu": (lambda a, b, c: a.matmul(b, bias=c, activation="relu"),
                         lambda a, b, c: np.maximum(a @ b + c, 0), [(3, 4), (4, 5), (5,)],
                         False),
    "matmul_bias_tanh": (lambda a, b, c: a.matmul(b, bias=c, activation="tanh"),
                         lambda a, b, c: np.tanh(a @ b + c), [(3, 4), (4, 5), (5,)], False),
    "reshape_permute": (lambda a: a.reshape(4, 6).permute(1, 0) * 1.5,
                        lambda a: a.reshape(4, 6).T * 1.5, [(2, 3, 4)], False),
    "expand": (lambda a: a.expand(3, 4) * 2.0, lambda a: np.broadcast_to(a, (3, 4)) * 2,
               [(1, 4)], False),
    "cast": (lambda a: a.cast("float16").cast("float32") * 1.0, lambda a: a, [(3, 4)], False),
    "layer_norm": (lambda a, w, b: wr.nn.layer_norm(a, w, b, eps=1e-5),
                   lambda a, w, b: (a - a.mean(-1, keepdims=True)) / np.sqrt(
                       a.var(-1, keepdims=True) + 1e-5) * w + b, [(3, 6), (6,), (6,)], False),
    "layer_norm_plain": (lambda a: wr.nn.layer_norm(a, eps=1e-5),
                         lambda a: (a - a.mean(-1, keepdims=True)) / np.sqrt(
                             a.var(-1, keepdims=True) + 1e-5), [(2, 3, 5)], False),
    "rms_norm": (lambda a, w: wr.nn.rms_norm(a, w, eps=1e-6),
                 lambda a, w: a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6) * w,
                 [(3, 6), (6,)], False),
    "rms_norm_plain": (lambda a: wr.nn.rms_norm(a, eps=1e-6),
                       lambda a: a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6),
                       [(2, 2, 40)], False),
    "slice": (lambda a: a[1:3, :, 2:] * 2.0, lambda a: a[1:3, :, 2:] * 2, [(4, 2, 5)], False),
    "concat": (lambda a, b: wr.concat([a, b * 3.0, a], axis=1),
               lambda a, b: np.concatenate([a, b * 3, a], axis=1), [(2, 3), (2, 2)], False),
    "conv2d": (lambda a, w, b: wr.nn.conv2d(a, w, b, stride=1, padding=1),
               lambda a, w, b: _conv_np(a, w, b, 1, 1, 1, 1), [(2, 3, 5, 5), (4, 3, 3, 3), (4,)],
               False),
    "conv2d_strided_dilated": (lambda a, w: wr.nn.conv2d(a, w, stride=2, padding=1, dilation=2),
                               lambda a, w: _conv_np(a, w, None, 2, 1, 2, 1),
                               [(1, 2, 7, 6), (3, 2, 2, 3)], False),
    "conv2d_groups": (lambda a, w: wr.nn.conv2d(a, w, groups=2),
                      lambda a, w: _conv_np(a, w, None, 1, 0, 1, 2),
                      [(2, 4, 4, 4), (6, 2, 3, 3)], False),
    "max_pool2d": (lambda a: wr.nn.max_pool2d(a, 2), lambda a: _pool_np(a, 2, 2, 0, "max"),
                   [(2, 3, 4, 6)], False),
    "max_pool2d_overlap_pad": (lambda a: wr.nn.max_pool2d(a, 3, stride=2, padding=1),
                               lambda a: _pool_np(a, 3, 2, 1, "max"), [(1, 2, 5, 5)], False),
    "avg_pool2d": (lambda a: wr.nn.avg_pool2d(a, 3, stride=2, padding=1),
                   lambda a: _pool_np(a, 3, 2, 1, "avg"), [(1, 2, 5, 6)], False),
    "rope": (lambda a: wr.nn.rope(a, a.graph.constant(np.array([5], np.int32)), 10000.0),
             lambda a: _rope_np(a, True), [(1, 3, 2, 8)], False),
    "rope_half": (lambda a: wr.nn.rope(a, a.graph.constant(np.array([2], np.int32)), 100.0,
                                       interleaved=False),
                  lambda a: _rope_np(a, False), [(2, 2, 1, 6)], False),
    "attention": (lambda q, k, v: wr.nn.attention(q, k, v),
                  lambda q, k, v: _attn_np(q, k, v, None, False), [(1, 2, 3, 4), (1, 2, 5, 4),
                                                                   (1, 2, 5, 4)], False),
    "attention_causal_masked": (
        lambda q, k, v: wr.nn.attention(q, k, v, causal=True,
                                        mask=q.graph.constant(np.array([[1, 0, 1, 1, 1],
                                                                        [1, 1, 1, 1, 0]],
                                                                       np.int32))),
        lambda q, k, v: _attn_np(q, k, v, np.array([[1, 0, 1, 1, 1], [1, 1, 1, 1, 0]]), True),
        [(2, 1, 3, 4), (2, 1, 5, 4), (2, 1, 5, 4)], False),
    "take_along_axis": (lambda a: a.take_along_axis(a.graph.constant(
                            np.array([[0, 3, 3], [1, 1, 2], [4, 0, 0]], np.int32)), axis=1),
                        lambda a: np.take_along_axis(a, np.array([[0, 3, 3], [1, 1, 2],
                                                                  [4, 0, 0]]), axis=1),
                        [(3, 5)], False),
    "take_along_axis0": (lambda a: a.take_along_axis(a.graph.constant(
                             np.array([[2, 0, 1, 1]], np.int32)), axis=0),
                         lambda a: np.take_along_axis(a, np.array([[2, 0, 1, 1]]), axis=0),
                         [(3, 4)], False),
    "mlp": (lambda x, w1, b1, w2: ((x @ w1 + b1).tanh() @ w2).log_softmax(axis=-1),
            lambda x, w1, b1, w2: np.log(_softmax(np.tanh(x @ w1 + b1) @ w2)),
            [(4, 6), (6, 5), (5,), (5, 3)], False),
}
TOL = {"cast": 2e-2, "pow": 5e-3, "prod": 5e-3}     # cast: the float16 round trip


def _fd(np_fn, arrays, r, eps=1e-6):
    def loss(xs):
        return float((np_fn(*xs) * r).sum())
    grads = []
    for i, a in enumerate(arrays):
        gi = np.zeros_like(a)
        for j in np.ndindex(a.shape):
            hi = [x.copy() for x in arrays]
            lo = [x.copy() for x in arrays]
            hi[i][j] += eps
            lo[i][j] -= eps
            gi[j] = (loss(hi) - loss(lo)) / (2 * eps)
        grads.append(gi)
    return grads


@pytest.mark.parametrize("case", sorted(CASES))
def test_vjp_matches_finite_differences(backend, case):
    fn, np_fn, shapes, positive = CASES[case]
    rng = np.random.default_rng(zlib.crc32(case.encode()))
    arrays = [rng.uniform(0.5, 2.0, s) if positive else rng.standard_normal(s) for s in shapes]
    arrays = [a.astype(np.float32).astype(np.float64) for a in arrays]   # what the GPU sees
    r = rng.standard_normal(np.shape(np_fn(*arrays)))
    g = wr.Graph()
    xs = [g.input(f"x{i}", a.shape) for i, a in enumerate(arrays)]
    loss = (fn(*xs) * g.constant(r.astype(np.float32))).sum()
    exe = wr.compile(g, outputs=wr.grad(loss, xs), device=backend)
    got = exe.run({f"x{i}": a.astype(np.float32) for i, a in enumerate(arrays)})
    for i, (gi, want) in enumerate(zip(got, _fd(np_fn, arrays, r))):
        assert gi.shape == want.shape, (case, i)
        tol = TOL.get(case, 2e-3) * max(np.abs(want).max(), 1.0) + 1e-4
        np.testing.assert_allclose(gi, want, rtol=0, atol=tol, err_msg=f"{case}: input {i}")


GRAD_TORCH = Path(__file__).resolve().parents[1] / "fixtures" / "grad_torch.npz"


def test_the_torch_fixture_covers_every_case():
    names = {k.split("/")[0] for k in np.load(GRAD_TORCH).files}
    assert names == set(CASES), "regenerate: python tests/fixtures/make_grad_torch.py"


@pytest.mark.parametrize("case", sorted(CASES))
def test_vjp_matches_torch_autograd(backend, case):
    """The same cases against torch autograd's float64 gradients on other random inputs (the
    fixture, from tests/fixtures/make_grad_torch.py: torch has no Pyodide build). Tolerance:
    1e-3 * max|torch grad| + 1e-5 (the TOL cases: their own factor)."""
    data = np.load(GRAD_TORCH)
    fn = CASES[case][0]
    arrays = [data[f"{case}/x{i}"] for i in range(len(CASES[case][2]))]
    g = wr.Graph()
    xs = [g.input(f"x{i}", a.shape) for i, a in enumerate(arrays)]
    loss = (fn(*xs) * g.constant(data[f"{case}/r"])).sum()
    exe = wr.compile(g, outputs=wr.grad(loss, xs), device=backend)
    got = exe.run({f"x{i}": a for i, a in enumerate(arrays)})
    for i, gi in enumerate(got):
        want = data[f"{case}/g{i}"]
        assert gi.shape == want.shape, (case, i)
        tol = TOL.get(case, 1e-3) * max(np.abs(want).max(), 1.0) + 1e-5
        np.testing.assert_allclose(gi, want, rtol=0, atol=tol, err_msg=f"{case}: input {i}")


def test_gradient_of_a_symbolic_batch_mean(backend):
    """mean over a symbolic dim divides by the bound size at run time."""
    g = wr.Graph()
    x = g.input("x", ("batch", 3))
    w = g.param("w", (3,))
    (gw,) = wr.grad((x * w).mean(), [w])
    exe = wr.compile(g, outputs=[gw], device=backend)
    exe.set_params({"w": np.ones(3, np.float32)})
    for n in (2, 5):
        xs = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(exe.run({"x": xs})[0], xs.sum(0) / (3 * n), rtol=1e-5)


def test_non_differentiable_paths_are_named():
    g = wr.Graph()
    x = g.input("x", (3, 4))
    with pytest.raises(wr.GradError, match="argmax.*not differentiable"):
        wr.grad(x.argmax(axis=1).cast("float32").sum(), [x])
    with pytest.raises(wr.GradError, match="gt .*not differentiable"):
        wr.grad((x > 0.0).cast("float32").sum(), [x])
    with pytest.raises(wr.GradError, match="floor.*not differentiable"):
        wr.grad(x.floor().sum(), [x])
    with pytest.raises(wr.GradError, match="scalar"):
        wr.grad(x * 2.0, [x])
    with pytest.raises(wr.GradError, match="int32"):
        wr.grad(x.sum(), [g.input("i", (2,), "int32")])
    with pytest.raises(wr.GradError, match="cache_write.*no gradient rule yet"):
        cache = g.state("kc", (1, 1, 4, 4))
        wr.grad(wr.nn.cache_write(cache, x.reshape(1, 3, 1, 4), g.constant(
            np.array([0], np.int32))).sum(), [x])


def test_embedding_gradient_sums_repeated_rows(backend):
    """gather's rule: scatter_add of the output gradient into the table's rows."""
    g = wr.Graph()
    table = g.param("table", (5, 3))
    ids = g.input("ids", (2, 4), "int32")
    r = g.input("r", (2, 4, 3))
    (gt,) = wr.grad((table.gather(ids, axis=0) * r).sum(), [table])
    exe = wr.compile(g, outputs=[gt], device=backend)
    exe.set_params({"table": np.ones((5, 3), np.float32)})
    idv = np.array([[0, 2, 2, 4], [2, 0, 1, 2]], np.int32)
    rv = np.random.default_rng(3).standard_normal((2, 4, 3)).astype(np.float32)
    want = np.zeros((5, 3))
    np.add.at(want, idv.reshape(-1), rv.reshape(-1, 3).astype(np.float64))
    np.testing.assert_allclose(exe.run({"ids": idv, "r": rv})[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("m", [1, 7, 300])
def test_scatter_add(backend, m):
    from helpers import check
    rng = np.random.default_rng(m)
    target = rng.standard_normal((6, 2, 3)).astype(np.float32)
    idx = rng.integers(-1, 7, m).astype(np.int32)        # -1 and 6: skipped
    vals = rng.standard_normal((m, 2, 3)).astype(np.float32)

    def np_fn(t, i, v):
        out = t.copy()
        keep = (i >= 0) & (i < 6)
        np.add.at(out, i[keep].astype(np.int64), v[keep])
        return out
    check(backend, lambda t, i, v: t.scatter_add(i, v), np_fn, target, idx, vals,
          rtol=1e-5, atol=1e-5)


def _norm_fd(x, dy, w, rms, eps):
    """d(sum(norm(x) * w * dy))/dx by central differences: rows are independent, so column j
    of every row is perturbed at once (2n evaluations)."""
    def f(a):
        c = a if rms else a - a.mean(-1, keepdims=True)
        return (c / np.sqrt((c * c).mean(-1, keepdims=True) + eps) * w * dy).sum(-1)
    out, h = np.zeros_like(x), 1e-6
    for j in range(x.shape[-1]):
        e = np.zeros(x.shape[-1])
        e[j] = h
        out[..., j] = (f(x + e) - f(x - e)) / (2 * h)
    return out


@pytest.mark.parametrize("op", ["layer_norm_grad", "rms_norm_grad"])
@pytest.mark.parametrize("shape,weighted", [((4, 7), True), ((3, 5, 64), False),
                                            ((2, 1500), True)])
def test_norm_grad_kernel(backend, op, shape, weighted):
    """The fused backward kernel (dx of a norm, one workgroup reduction tree per row): against
    central differences of the forward in float64. Rows of <= 1024 run 8 per workgroup."""
    from helpers import check
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    w = rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32)
    rms = op == "rms_norm_grad"
    if weighted:
        check(backend, lambda a, d, v: a._op(op, d, v, eps=1e-5),
              lambda a, d, v: _norm_fd(a, d, v, rms, 1e-5), x, dy, w, rtol=1e-3, atol=1e-4)
    else:
        check(backend, lambda a, d: a._op(op, d, eps=1e-5),
              lambda a, d: _norm_fd(a, d, 1.0, rms, 1e-5), x, dy, rtol=1e-3, atol=1e-4)


def test_unrelated_tensor_gets_zeros(backend):
    g = wr.Graph()
    x, y = g.input("x", (2,)), g.input("y", (2,))
    gx, gy = wr.grad((x * x).sum(), [x, y])
    exe = wr.compile(g, outputs=[gx, gy], device=backend)
    got = exe.run({"x": np.array([1.0, -2.0], np.float32), "y": np.ones(2, np.float32)})
    np.testing.assert_allclose(got[0], [2.0, -4.0])
    np.testing.assert_allclose(got[1], [0.0, 0.0])
