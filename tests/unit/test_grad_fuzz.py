"""Random graphs of differentiable ops: wr.grad's gradients against torch autograd (float64) on
the same graph: 200 graphs on the reference device and 200 on the GPU adapter by default;
WEBRLX_FUZZ=N runs N on each. Tolerance: 2e-3 * max|torch grad| + 1e-4."""
from __future__ import annotations

import os

import numpy as np
import pytest

import webrlx as wr

torch = pytest.importorskip("torch")      # the reference: native only

N = int(os.environ.get("WEBRLX_FUZZ", "0"))
COUNTS = {"reference": N or 200, "gpu": N or 200}

# (name, arity, webrlx fn, torch fn); inputs stay in ranges where each op is smooth
UNARY = [("tanh", lambda a: a.tanh(), torch.tanh),
         ("sigmoid", lambda a: a.sigmoid(), torch.sigmoid),
         ("sin", lambda a: a.sin(), torch.sin),
         ("exp_small", lambda a: (a * 0.3).exp(), lambda a: torch.exp(a * 0.3)),
         ("silu", lambda a: a.silu(), torch.nn.functional.silu),
         ("square", lambda a: a * a, lambda a: a * a),
         ("softplus_log", lambda a: (a.exp() + 1.0).log(), lambda a: torch.log(torch.exp(a) + 1)),
         ("softmax", lambda a: a.softmax(axis=-1), lambda a: torch.softmax(a, -1)),
         ("log_softmax", lambda a: a.log_softmax(axis=-1), lambda a: torch.log_softmax(a, -1)),
         ("mean_keep", lambda a: a.mean(axis=-1, keepdims=True) + a,
          lambda a: a.mean(-1, keepdims=True) + a),
         ("sum0_keep", lambda a: a.sum(axis=0, keepdims=True) * a,
          lambda a: a.sum(0, keepdims=True) * a),
         ("layer_norm", lambda a: wr.nn.layer_norm(a, eps=1e-5),
          lambda a: torch.nn.functional.layer_norm(a, (a.shape[-1],), eps=1e-5)),
         ("transpose_back", lambda a: a.permute(1, 0).permute(1, 0) * 0.5, lambda a: a * 0.5),
         ("cumsum", lambda a: a.cumsum(axis=1) * 0.3, lambda a: torch.cumsum(a, 1) * 0.3)]
BINARY = [("add", lambda a, b: a + b, lambda a, b: a + b),
          ("sub", lambda a, b: a - b, lambda a, b: a - b),
          ("mul", lambda a, b: a * b, lambda a, b: a * b),
          ("div", lambda a, b: a / (b * b + 1.0), lambda a, b: a / (b * b + 1)),
          ("maximum", lambda a, b: a.maximum(b), torch.maximum),
          ("matmul", lambda a, b: a @ b.permute(1, 0) * 0.3, lambda a, b: a @ b.T * 0.3
           if a.shape[-1] == b.shape[-1] else None)]


def _graph(seed: int):
    """A random op list over two (4, 4) inputs and a (4,) one (broadcast)."""
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(rng.integers(2, 7)):
        if rng.random() < 0.55:
            steps.append(("u", int(rng.integers(len(UNARY))), None))
        else:
            steps.append(("b", int(rng.integers(len(BINARY))), int(rng.integers(3))))
    arrays = [rng.standard_normal((4, 4)), rng.standard_normal((4, 4)),
              rng.standard_normal(4)]
    return steps, [a.astype(np.float32).astype(np.float64) for a in arrays], rng


def _apply(steps, xs, unary, binary):
    h = xs[0]
    for kind, i, j in steps:
        h = unary[i](h) if kind == "u" else binary[i](h, xs[j] if BINARY[i][0] != "matmul"
                                                       else xs[1])
    return h


@pytest.mark.parametrize("device", ["reference", "gpu"])
def test_random_graph_gradients_match_torch(device):
    dev = wr.device(device)
    for seed in range(COUNTS[device]):
        steps, arrays, rng = _graph(seed)
        txs = [torch.tensor(a, requires_grad=True) for a in arrays]
        tout = _apply(steps, txs, [u[2] for u in UNARY], [b[2] for b in BINARY])
        r = rng.standard_normal(tuple(tout.shape))
        (tout * torch.tensor(r)).sum().backward()
        g = wr.Graph()
        xs = [g.input(f"x{i}", a.shape) for i, a in enumerate(arrays)]
        out = _apply(steps, xs, [u[1] for u in UNARY], [b[1] for b in BINARY])
        loss = (out * g.constant(r.astype(np.float32))).sum()
        exe = wr.compile(g, outputs=wr.grad(loss, xs), device=dev)
        got = exe.run({f"x{i}": a.astype(np.float32) for i, a in enumerate(arrays)})
        names = [UNARY[i][0] if k == "u" else BINARY[i][0] for k, i, _ in steps]
        for i, (gi, t) in enumerate(zip(got, txs)):
            want = t.grad.numpy() if t.grad is not None else np.zeros_like(arrays[i])
            tol = 2e-3 * max(np.abs(want).max(), 1.0) + 1e-4
            np.testing.assert_allclose(gi, want, rtol=0, atol=tol,
                                       err_msg=f"graph {seed} {names}: input {i}")
