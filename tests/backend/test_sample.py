"""Token sampling (nn.sample, op `sample`) on every backend: greedy and temperature 0, fixed
seeds, top-k (ties included), the distribution of 2,000 draws against the exact one computed
here from the stated semantics, the device's tokens against the numpy rule draw for draw, a
49,152-token vocabulary, the in-place update of a `seen` state, and multi-row logits (r, V)
(r symbolic) drawing each row as the one-row op does.

Each executable is compiled once per vocabulary size and draws DRAWS tokens a run, for steps
step..step+DRAWS-1 (the step is added on the device), so 2,000 draws take 125 runs.
"""
from __future__ import annotations

import numpy as np
import pytest

import webrlx as wr
from webrlx import nn, sampling

DRAWS = 16


def _compile(backend, v: int):
    g = wr.Graph()
    x = g.input("logits", (1, v))
    seen = g.input("seen", (v,), "int32")
    f = g.input("fparams", (4,))
    i = g.input("iparams", (4,), "int32")
    toks = [nn.sample(x, seen, f, i + g.constant(np.array([0, 0, j, 0], np.int32)))
            for j in range(DRAWS)]
    return wr.compile(g, outputs=toks, device=backend)


@pytest.fixture(scope="module")
def s1000(backend):
    return _compile(backend, 1000)


@pytest.fixture(scope="module")
def s49k(backend):
    return _compile(backend, 49152)


def draws(exe, logits, seen, n=DRAWS, temperature=1.0, top_p=1.0, rp=1.0, top_k=0, seed=0,
          step=0) -> np.ndarray:
    """Tokens for steps step..step+n-1 (n a multiple of DRAWS)."""
    f = np.array([temperature, top_p, rp, 0], np.float32)
    out = []
    for s0 in range(step, step + n, DRAWS):
        res = exe.run({"logits": np.asarray(logits, np.float32).reshape(1, -1),
                       "seen": np.asarray(seen, np.int32), "fparams": f,
                       "iparams": np.array([top_k, seed, s0, 0], np.int32)})
        out += [int(t[0]) for t in res]
    return np.array(out)


def penalized(x, seen, rp) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return np.where(seen > 0, np.where(x > 0, x / np.float32(rp), x * np.float32(rp)), x)


def expected(x, seen, temperature, top_k, top_p, rp) -> tuple[np.ndarray, float]:
    """The exact distribution by the stated semantics (sorting, float64), and the relative
    margin of its top-p boundary (how far top_p * mass is from a cumulative mass)."""
    z = penalized(x, seen, rp).astype(np.float64) / temperature
    keep = np.ones(z.size, bool)
    if 0 < top_k < z.size:
        keep = z >= np.sort(z)[::-1][top_k - 1]
    w = np.where(keep, np.exp(z - z.max()), 0.0)
    zs = np.sort(z[keep])[::-1]
    cum = np.cumsum(np.sort(w[keep])[::-1])
    i = int(np.argmax(cum >= top_p * cum[-1]))
    margin = min(abs(cum[j] - top_p * cum[-1]) for j in (i - 1, i) if j >= 0) / cum[-1]
    w = np.where(keep & (z >= zs[i]), w, 0.0)
    return w / w.sum(), margin


def near_boundary(w: np.ndarray, u: float, rel: float = 1e-4) -> bool:
    """True when u * total lies within rounding of a boundary of the running sum of w."""
    cum = np.cumsum(w)
    return bool(np.min(np.abs(cum - u * cum[-1])) <= rel * cum[-1])


def _row(v=1000, seed=7):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 1.0, v)
    strong = rng.choice(v, 70, replace=False)
    x[strong[:10]] = rng.uniform(4.0, 6.0, 10)          # ten strong tokens
    x[strong[10:]] = rng.uniform(2.2, 3.2, 60)          # sixty middling ones
    x = x.astype(np.float32)
    seen = np.zeros(v, np.int32)
    seen[strong[:2]] = seen[strong[10:14]] = 1
    seen[np.argsort(x)[:5]] = 1                         # negative logits: x * rp
    return x, seen


GREEDY_ROWS = {
    "random": lambda: np.random.default_rng(1).normal(0, 3, 1000),
    "ties": lambda: np.where(np.isin(np.arange(1000), [17, 400, 999]), 9.0,
                             np.random.default_rng(2).normal(0, 1, 1000)),
    "all equal": lambda: np.full(1000, 0.25),
    "negative with -inf": lambda: np.where(np.arange(1000) % 3 == 0, -np.inf,
                                           -5 - np.random.default_rng(3).random(1000)),
    "max last": lambda: np.arange(1000) * 1e-3,
}


@pytest.mark.parametrize("row", GREEDY_ROWS, ids=list(GREEDY_ROWS))
def test_greedy_is_the_first_argmax(s1000, row):
    x = GREEDY_ROWS[row]().astype(np.float32)
    seen = np.zeros(1000, np.int32)
    assert (draws(s1000, x, seen, temperature=0.0) == np.argmax(x)).all()


def test_greedy_after_the_repetition_penalty(s1000):
    x = np.random.default_rng(4).normal(0, 1, 1000).astype(np.float32)
    x[[10, 20]] = [5.0, 4.5]
    x[[30, 40]] = [-0.5, -0.4]
    seen = np.zeros(1000, np.int32)
    seen[[10, 40]] = 1                                   # 5 / 2 < 4.5; -0.4 * 2 < -0.5
    assert draws(s1000, x, seen, temperature=0.0, rp=2.0)[0] == 20
    y = np.full(1000, -1.0, np.float32)
    y[[30, 40]] = [-0.5, -0.4]
    assert draws(s1000, y, seen, temperature=0.0, rp=2.0)[0] == 30
    assert draws(s1000, y, seen, temperature=0.0, rp=1.0)[0] == 40


def test_temperature_zero_or_below_equals_greedy(s1000):
    x, seen = _row()
    want = int(np.argmax(penalized(x, seen, 1.3)))
    for t in (0.0, -1.0):
        got = draws(s1000, x, seen, temperature=t, top_k=50, top_p=0.9, rp=1.3, seed=5)
        assert (got == want).all()


def test_a_fixed_seed_and_step_repeat(s1000):
    x, seen = _row()
    a = draws(s1000, x, seen, n=2 * DRAWS, temperature=1.5, seed=11, step=100)
    b = draws(s1000, x, seen, n=2 * DRAWS, temperature=1.5, seed=11, step=100)
    c = draws(s1000, x, seen, n=2 * DRAWS, temperature=1.5, seed=12, step=100)
    assert (a == b).all()
    assert len(set(a)) > 3 and (a != c).any()           # steps and seeds do change the draw


def test_top_k_1_and_top_p_0_equal_greedy(s1000):
    x, seen = _row()
    want = int(np.argmax(penalized(x, seen, 1.3)))
    assert (draws(s1000, x, seen, n=2 * DRAWS, top_k=1, rp=1.3, seed=3) == want).all()
    assert (draws(s1000, x, seen, n=DRAWS, top_p=0.0, rp=1.3, seed=3) == want).all()


def test_top_k_keeps_every_tie_at_its_threshold(s1000):
    x = np.full(1000, -3.0, np.float32)
    x[[5, 300, 600, 900]] = [2.0, 1.0, 1.0, 1.0]        # the 2nd largest is tied three ways
    x[7] = 0.5
    got = draws(s1000, x, np.zeros(1000, np.int32), n=8 * DRAWS, top_k=2, seed=9)
    assert set(got) == {5, 300, 600, 900}


def test_distribution_of_2000_draws(s1000):
    """T=0.8, top_k=50, top_p=0.9, rp=1.3 with seen tokens: top-k and top-p both cut (26
    tokens kept of 150 without top-k). Total variation of 2,000 draws from the exact
    distribution < 0.06 (multinomial noise alone: mean 0.034, 99.9th percentile 0.054), no
    token outside the kept set, and each token equals the numpy rule's for its step except
    within rounding of a boundary (at most 1%)."""
    x, seen = _row()
    probs, margin = expected(x, seen, 0.8, 50, 0.9, 1.3)
    assert 20 < (probs > 0).sum() < 40 and margin > 1e-4
    assert (expected(x, seen, 0.8, 0, 0.9, 1.3)[0] > 0).sum() > 100
    got = draws(s1000, x, seen, n=2000, temperature=0.8, top_k=50, top_p=0.9, rp=1.3,
                seed=1234)
    assert (probs[got] > 0).all(), f"tokens outside the kept set: {set(got[probs[got] == 0])}"
    tv = 0.5 * np.abs(np.bincount(got, minlength=1000) / got.size - probs).sum()
    assert tv < 0.06, tv
    kept, w = sampling.kept_weights(x, seen, np.array([0.8, 0.9, 1.3, 0], np.float32),
                                    np.array([50, 1234, 0, 0], np.int32))
    np.testing.assert_array_equal(kept, probs > 0)
    us = [sampling.uniform(1234, s) for s in range(2000)]
    want = np.array([sampling.draw(w, u) for u in us])
    bad = np.flatnonzero(got != want)
    assert len(bad) <= 20 and all(near_boundary(w, us[i]) for i in bad), bad


def test_tokens_equal_the_numpy_rule_draw_for_draw(s1000):
    """320 draws with no top-k, a top-p of 0.95 and a hot temperature (many tokens kept)."""
    x, seen = _row(seed=8)
    f, ip = np.array([1.3, 0.95, 1.2, 0], np.float32), np.array([0, 77, 500, 0], np.int32)
    got = draws(s1000, x, seen, n=320, temperature=1.3, top_p=0.95, rp=1.2, seed=77, step=500)
    kept, w = sampling.kept_weights(x, seen, f, ip)
    assert kept.sum() > 300
    us = [sampling.uniform(77, 500 + s) for s in range(320)]
    want = np.array([sampling.draw(w, u) for u in us])
    assert all(sampling.sample(x, seen, f, np.array([0, 77, 500 + s, 0])) == want[s]
               for s in range(0, 320, 40))                  # the reference rule itself
    bad = np.flatnonzero(got != want)
    assert len(bad) <= 3 and all(near_boundary(w, us[i]) for i in bad), bad


def test_a_49152_token_vocabulary(s49k):
    """A peaked row (a few tokens far above the rest): greedy, top-p, and top-k with top-p."""
    v = 49152
    rng = np.random.default_rng(5)
    x = rng.normal(0, 2, v).astype(np.float32)
    x[[123, 4567, 30000, 49151]] += np.float32([14, 13, 12.5, 12])     # 77% to 98% of the mass
    seen = np.zeros(v, np.int32)
    seen[rng.choice(v, 200, replace=False)] = 1
    seen[4567] = 1
    assert (draws(s49k, x, seen, temperature=0.0, rp=1.1) == np.argmax(penalized(x, seen,
                                                                                  1.1))).all()
    for f, ip, n_kept in (([1.0, 0.95, 1.1, 0], [0, 21, 0, 0], 173),
                          ([1.5, 0.99, 1.1, 0], [40, 22, 0, 0], 34),
                          ([2.0, 1.0, 1.1, 0], [40, 23, 0, 0], 40)):
        f, ip = np.array(f, np.float32), np.array(ip, np.int32)
        got = draws(s49k, x, seen, n=2 * DRAWS, temperature=f[0], top_p=f[1], rp=f[2],
                    top_k=ip[0], seed=ip[1])
        kept, w = sampling.kept_weights(x, seen, f, ip)
        assert kept.sum() == n_kept
        assert kept[got].all()
        us = [sampling.uniform(int(ip[1]), s) for s in range(2 * DRAWS)]
        bad = [i for i, u in enumerate(us) if got[i] != sampling.draw(w, u)]
        assert len(bad) <= 1 and all(near_boundary(w, us[i]) for i in bad), bad


@pytest.mark.parametrize("case", ["tie across chunks", "penalty moves it", "all equal",
                                  "last token", "-inf and -0"])
def test_greedy_over_many_chunks(s49k, case):
    """Greedy rows merge the pre-pass's chunk maxima (sample/sample_max.wgsl, 4,096 logits a
    workgroup): the first index of the max across chunks, after the penalty, -0 equal to +0."""
    v = 49152
    x = np.random.default_rng(7).normal(0, 1, v).astype(np.float32)
    seen = np.zeros(v, np.int32)
    rp = 1.0
    if case == "tie across chunks":
        x[[40000, 9000, 20000]] = 9.0                   # chunks 9, 2 and 4: 9000 is first
    elif case == "penalty moves it":
        x[[100, 45000]] = [8.0, 6.0]
        seen[100], rp = 1, 2.0                          # 8 / 2 < 6
    elif case == "all equal":
        x[:] = 0.25
    elif case == "last token":
        x[v - 1] = 50.0
    else:
        x[:] = -np.inf
        x[[30000, 5000]] = [0.0, -0.0]                  # equal: the first index wins
    want = int(np.argmax(penalized(x, seen, rp)))
    assert (draws(s49k, x, seen, temperature=0.0, rp=rp) == want).all(), want
    if case == "tie across chunks":
        assert want == 9000


@pytest.mark.parametrize("f,ip", [([1.0, 0.9, 1.0, 0], [0, 31, 0, 0]),
                                  ([1.0, 1.0, 1.0, 0], [0, 32, 0, 0]),
                                  ([1.0, 1.0, 1.0, 0], [300, 33, 0, 0]),
                                  ([0.5, 0.8, 1.2, 0], [2000, 34, 0, 0])],
                         ids=["top_p", "temperature only", "top_k 300", "top_k 2000 top_p"])
def test_a_flat_49152_token_vocabulary(s49k, f, ip):
    """A flat row: more tokens survive than the kernel's list holds (it works on the row)."""
    v = 49152
    rng = np.random.default_rng(6)
    x = rng.normal(0, 1, v).astype(np.float32)
    seen = (rng.random(v) < 0.01).astype(np.int32)
    f, ip = np.array(f, np.float32), np.array(ip, np.int32)
    kept, w = sampling.kept_weights(x, seen, f, ip)
    assert kept.sum() > 250
    got = draws(s49k, x, seen, n=2 * DRAWS, temperature=f[0], top_p=f[1], rp=f[2],
                top_k=ip[0], seed=ip[1])
    assert kept[got].all()
    us = [sampling.uniform(int(ip[1]), s) for s in range(2 * DRAWS)]
    bad = [i for i, u in enumerate(us) if got[i] != sampling.draw(w, u)]
    assert len(bad) <= 1 and all(near_boundary(w, us[i]) for i in bad), bad


def test_seen_state_is_marked_in_place_on_gpus(backend):
    """A `seen` state: the kernel sets seen[token] = 1 in place (GPUs), so the repetition
    penalty sees it next run; the reference rule cannot, and adding seen.scatter_set(token,
    one) to the graph updates the state on every device alike."""
    x = np.zeros(64, np.float32)
    x[[3, 9]] = [4.0, 3.0]
    feeds = {"logits": x, "fparams": np.array([0, 1, 4.0, 0], np.float32),
             "iparams": np.zeros(4, np.int32)}
    for portable in (False, True):
        g = wr.Graph()
        seen = g.state("seen", (64,), "int32")
        tok = nn.sample(g.input("logits", (64,)), seen, g.input("fparams", (4,)),
                        g.input("iparams", (4,), "int32"))
        if portable:
            seen.scatter_set(tok, g.constant(np.ones(1, np.int32)))
        exe = wr.compile(g, outputs=[tok], device=backend)
        marks = portable or backend.name != "reference"
        (t1,), (t2,) = exe.run(feeds), exe.run(feeds)
        assert t1[0] == 3 and t2[0] == (9 if marks else 3)
        want = np.zeros(64, np.int32)
        if marks:
            want[[3, 9]] = 1
        np.testing.assert_array_equal(exe.read_state("seen"), want)
        assert sampling.mark_seen(np.zeros(64, np.int32), 3)[3] == 1


# (fparams, iparams) of multi-row rows: greedy, top-k, top-p, temperature only, both, penalty
ROW_SETTINGS = [([0.0, 1.0, 1.0, 0], [0, 0, 0, 0]), ([0.9, 1.0, 1.0, 0], [20, 11, 5, 0]),
                ([1.0, 0.8, 1.0, 0], [0, 12, 9, 0]), ([1.3, 1.0, 1.0, 0], [0, 13, 2, 0]),
                ([0.7, 0.9, 1.0, 0], [40, 14, 77, 0]), ([1.0, 1.0, 1.4, 0], [0, 15, 3, 0])]


@pytest.fixture(scope="module")
def s_rows(backend):
    g = wr.Graph()
    tok = nn.sample(g.input("logits", ("r", 1000)), g.input("seen", (1000,), "int32"),
                    g.input("fparams", ("r", 4)), g.input("iparams", ("r", 4), "int32"))
    return wr.compile(g, outputs=[tok], device=backend)


@pytest.mark.parametrize("rows", [[1], [0, 3, 5], [2, 4, 1]], ids=["r1", "r3a", "r3b"])
def test_rows_equal_the_one_row_op_per_row(s1000, s_rows, rows):
    """logits (r, V) with r symbolic (bound to 1 and 3): row k's token is the one the one-row
    op draws from row k with fparams[k] / iparams[k] (its own seed and step; `seen` shared)."""
    xs = [_row(seed=20 + k)[0] for k in range(len(rows))]
    seen = _row(seed=20)[1]
    f = np.array([ROW_SETTINGS[j][0] for j in rows], np.float32)
    ip = np.array([ROW_SETTINGS[j][1] for j in rows], np.int32)
    for step in (0, 40):
        ip[:, 2] += step
        (got,) = s_rows.run({"logits": np.stack(xs), "seen": seen, "fparams": f,
                             "iparams": ip})
        want = [draws(s1000, xs[k], seen, temperature=f[k, 0], top_p=f[k, 1], rp=f[k, 2],
                      top_k=ip[k, 0], seed=ip[k, 1], step=ip[k, 2])[0]
                for k in range(len(rows))]
        assert got.shape == (len(rows),) and got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, sampling.reference_rule(
            [np.stack(xs), seen, f, ip], {}))


def test_rows_only_read_a_seen_state(backend):
    """With r > 1 rows a `seen` state is only read (rows drawn at once would race on it): no
    run marks it, so repeated runs draw the same greedy tokens."""
    x = np.zeros((2, 64), np.float32)
    x[:, [3, 9]] = [[4.0, 3.0], [3.0, 4.0]]
    g = wr.Graph()
    seen = g.state("seen", (64,), "int32")
    tok = nn.sample(g.input("logits", (2, 64)), seen, g.input("fparams", (2, 4)),
                    g.input("iparams", (2, 4), "int32"))
    exe = wr.compile(g, outputs=[tok], device=backend)
    feeds = {"logits": x, "fparams": np.tile(np.array([0, 1, 4.0, 0], np.float32), (2, 1)),
             "iparams": np.zeros((2, 4), np.int32)}
    for _ in range(2):
        np.testing.assert_array_equal(exe.run(feeds)[0], [3, 9])
    np.testing.assert_array_equal(exe.read_state("seen"), np.zeros(64, np.int32))


@pytest.mark.parametrize("bad", ["seen_dtype", "seen_len", "fparams", "iparams", "rows",
                                 "params_rows"])
def test_bad_operands_are_shape_errors(bad):
    g = wr.Graph()
    args = {"logits": g.input("x", (2, 8) if bad in ("rows", "params_rows") else (1, 8)),
            "seen": g.input("s", (8,), "float32" if bad == "seen_dtype" else "int32")
            if bad != "seen_len" else g.input("s", (7,), "int32"),
            "fparams": g.input("f", (3,) if bad == "fparams" else (3, 4)
                               if bad == "params_rows" else (4,)),
            "iparams": g.input("i", (4,), "float32" if bad == "iparams" else "int32")}
    with pytest.raises(wr.ShapeError, match="sample"):
        nn.sample(**args)
