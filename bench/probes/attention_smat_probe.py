"""Probe: attention_smat (f16 flash attention on subgroup matrices) on inputs that isolate its
parts, against float64 numpy; under the Dawn runner on an adapter with subgroup matrices.
  zero_q:   q = 0, so P is uniform over the keys: out = the mean of V's rows (P V, the sums)
  eye_v:    V the identity (64 keys, d 64): out = P itself (S = Q K^T and the softmax)
  random:   the test's inputs (rand * 2, a mask)
  rising:   scores rising along 300 keys by ~45 (each key tile moves the rows' max)
Prints JSON: per case the max error, max |ref|, and the first rows of got / want.
    python -m webrlx dawn -- python bench/probes/attention_smat_probe.py"""
from __future__ import annotations

import json

import numpy as np

import webrlx as wr
from webrlx.compiler import lower_attention


def ref(q, k, v, mask):
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    s = s + np.where(mask[:, None, None, :] != 0, 0, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


USED: list[str] = []
_kernel = lower_attention.kernel
lower_attention.kernel = lambda name, **slots: USED.append(name) or _kernel(name, **slots)


def run(q, k, v, mask):
    g = wr.Graph()
    ins = [g.input(n, a.shape, a.dtype) for n, a in zip("qkvm", (q, k, v, mask))]
    exe = wr.compile(g, outputs=[wr.nn.attention(*ins[:3], mask=ins[3])])
    USED.clear()
    got = exe.run({n: a for n, a in zip("qkvm", (q, k, v, mask))})[0]
    return got, list(USED)


def cases_out() -> dict:
    rng = np.random.default_rng(0)
    cases = {}
    d, n = 64, 64
    k = rng.standard_normal((1, 1, n, d)).astype(np.float16)
    v = rng.standard_normal((1, 1, n, d)).astype(np.float16)
    m = np.ones((1, n), np.int32)
    cases["zero_q"] = (np.zeros((1, 1, n, d), np.float16), k, v, m)
    q = (rng.standard_normal((1, 1, n, d)) * 0.5).astype(np.float16)
    cases["eye_v"] = (q, k, np.eye(n, d, dtype=np.float16)[None, None], m)
    cases["eye_v_zero_q"] = (np.zeros((1, 1, n, d), np.float16), k,
                             np.eye(n, d, dtype=np.float16)[None, None], m)
    qr, kr, vr = (rng.uniform(-2, 2, (2, 3, s, 64)).astype(np.float16) for s in (130, 200, 200))
    mr = np.ones((2, 200), np.int32)
    mr[-1, 66:] = 0
    cases["random"] = (qr, kr, vr, mr)
    qs = (0.5 + rng.random((1, 2, 300, 64))).astype(np.float16)
    ks = (np.linspace(0.0, 5.0, 300)[None, None, :, None] *
          (0.5 + rng.random((1, 2, 300, 64)))).astype(np.float16)
    cases["rising"] = (qs, ks, rng.standard_normal((1, 2, 300, 64)).astype(np.float16),
                       np.ones((1, 300), np.int32))
    out = {}
    for name, (q, k, v, mask) in cases.items():
        got, names = run(q, k, v, mask)
        want = ref(q, k, v, mask)
        got = got.astype(np.float64)
        out[name] = {"kernels": names, "max_err": float(np.abs(got - want).max()),
                     "max_ref": float(np.abs(want).max()),
                     "got_row0": np.round(got[0, 0, 0, :8], 4).tolist(),
                     "want_row0": np.round(want[0, 0, 0, :8], 4).tolist(),
                     "got_row17": np.round(got[0, 0, 17, :8], 4).tolist(),
                     "want_row17": np.round(want[0, 0, 17, :8], 4).tolist()}
    return out


def main() -> None:
    from webrlx.compiler import smat
    if smat.available(wr.device().info):
        lower_attention.FORCE_PATH = "smat"
    print(json.dumps(cases_out(), indent=1))

if __name__ == "__main__":
    main()
