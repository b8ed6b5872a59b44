"""The RNN/GRU/LSTM rows on forms the node tests leave out (reverse, bidirectional, clip,
other activations, linear_before_reset, layout 1 with initial states, peepholes), against
the ONNX spec's equations in numpy (onnx's reference evaluator implements neither
bidirectional nor reverse nor activations beyond Tanh/Affine)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from webrlx.onnx import InferenceSession  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
ACTS = {"Tanh": lambda x, a, b: np.tanh(x), "Sigmoid": lambda x, a, b: 1 / (1 + np.exp(-x)),
        "Relu": lambda x, a, b: np.maximum(x, 0), "LeakyRelu": lambda x, a, b: np.where(
            x >= 0, x, a * x), "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
        "Softsign": lambda x, a, b: x / (1 + np.abs(x))}
DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _spec(op: str, attrs: dict, feeds: dict, layout: int, hidden: int) -> list[np.ndarray]:
    """The ONNX spec's RNN/GRU/LSTM equations in float64 numpy."""
    f64 = {k: v.astype(np.float64) for k, v in feeds.items() if k != "sequence_lens"}
    x = f64["X"].transpose(1, 0, 2) if layout else f64["X"]
    steps, batch, _ = x.shape
    dirs = f64["W"].shape[0]
    names = attrs.get("activations", DEFAULTS[op])
    alphas, betas = attrs.get("activation_alpha", []), attrs.get("activation_beta", [])
    per = len(DEFAULTS[op])
    clip = attrs.get("clip")

    def pre(v: np.ndarray) -> np.ndarray:
        return v if clip is None else np.clip(v, -clip, clip)
    ys, hs, cs = [], [], []
    for d in range(dirs):
        acts = []
        for k in range(per):
            i = (d * per + k) % len(names)
            acts.append(lambda v, f=ACTS[names[i]], a=(alphas + [None] * 9)[i],
                        b=(betas + [None] * 9)[i]: f(v, a, b))
        w, r, bias = f64["W"][d], f64["R"][d], f64["B"][d]
        g = GATES[op] * hidden
        wb, rb = bias[:g], bias[g:]
        h0 = f64.get("initial_h", np.zeros((dirs, batch, hidden)))
        h0 = h0.transpose(1, 0, 2) if layout and "initial_h" in f64 else h0
        c0 = f64.get("initial_c", np.zeros((dirs, batch, hidden)))
        c0 = c0.transpose(1, 0, 2) if layout and "initial_c" in f64 else c0
        h, c = h0[d], c0[d]
        p = f64.get("P", np.zeros((dirs, 3 * hidden)))[d]
        y = np.zeros((steps, batch, hidden))
        order = range(steps - 1, -1, -1) if attrs.get("direction") == "reverse" or d else \
            range(steps)
        lens = feeds.get("sequence_lens", np.full(batch, steps))[:, None]
        for t in order:
            h_prev, c_prev = h, c
            xw = x[t] @ w.T + wb
            if op == "RNN":
                h = acts[0](pre(xw + h @ r.T + rb))
            elif op == "GRU":
                H = hidden
                hr = h @ r.T
                z = acts[0](pre(xw[:, :H] + hr[:, :H] + rb[:H]))
                rr = acts[0](pre(xw[:, H:2 * H] + hr[:, H:2 * H] + rb[H:2 * H]))
                if attrs.get("linear_before_reset"):
                    hh = acts[1](pre(xw[:, 2 * H:] + rr * (hr[:, 2 * H:] + rb[2 * H:])))
                else:
                    hh = acts[1](pre(xw[:, 2 * H:] + (rr * h) @ r[2 * H:].T + rb[2 * H:]))
                h = (1 - z) * hh + z * h
            else:
                H = hidden
                v = xw + h @ r.T + rb
                i = acts[0](pre(v[:, :H] + p[:H] * c))
                f = acts[0](pre(v[:, 2 * H:3 * H] + p[2 * H:] * c))
                c = f * c + i * acts[1](pre(v[:, 3 * H:]))
                o = acts[0](pre(v[:, H:2 * H] + p[H:2 * H] * c))
                h = o * acts[2](c)
            h, c = np.where(t < lens, h, h_prev), np.where(t < lens, c, c_prev)
            y[t] = np.where(t < lens, h, 0.0)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    outs = [np.stack(ys, 1), np.stack(hs), np.stack(cs)][:3 if op == "LSTM" else 2]
    if layout:
        outs = [outs[0].transpose(2, 0, 1, 3)] + [o.transpose(1, 0, 2) for o in outs[1:]]
    return outs


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) * 0.5).astype(np.float32)


def _check(op: str, attrs: dict, layout: int = 0, states: bool = False,
           lens: np.ndarray | None = None) -> None:
    """Build one node with random weights and compare every output with _spec."""
    rng = np.random.default_rng(len(op) + len(attrs))
    steps, batch, size, hidden = 4, 2, 3, 5
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    g = GATES[op]
    x = _rand(rng, batch, steps, size) if layout else _rand(rng, steps, batch, size)
    feeds = {"X": x, "W": _rand(rng, dirs, g * hidden, size),
             "R": _rand(rng, dirs, g * hidden, hidden), "B": _rand(rng, dirs, 2 * g * hidden)}
    names = ["X", "W", "R", "B"]
    if lens is not None:
        feeds["sequence_lens"] = lens
        names.append("sequence_lens")
    if states:
        st = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
        feeds["initial_h"] = _rand(rng, *st)
        names += [""] * (5 - len(names)) + ["initial_h"]
        if op == "LSTM":
            feeds["initial_c"] = _rand(rng, *st)
            feeds["P"] = _rand(rng, dirs, 3 * hidden)
            names += ["initial_c", "P"]
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, hidden_size=hidden, layout=layout, **attrs)
    gi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
          for n, v in feeds.items()]
    go = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]
    model = helper.make_model(helper.make_graph([node], "g", gi, go),
                              opset_imports=[helper.make_opsetid("", 22)])
    want = _spec(op, attrs, feeds, layout, hidden)
    got = InferenceSession(model.SerializeToString()).run(None, feeds)
    for w, v in zip(want, got):
        np.testing.assert_allclose(v, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["reverse", "bidirectional"])
def test_directions(op: str, direction: str) -> None:
    _check(op, {"direction": direction}, states=True)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_layout_with_states(op: str) -> None:
    _check(op, {}, layout=1, states=True)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_clip(op: str) -> None:
    _check(op, {"clip": 0.3})


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_sequence_lens(op: str) -> None:
    _check(op, {"direction": "bidirectional"}, states=True, lens=np.array([2, 4], np.int32))


def test_gru_linear_before_reset() -> None:
    _check("GRU", {"linear_before_reset": 1, "direction": "bidirectional"})


def test_rnn_activation_with_alpha() -> None:
    _check("RNN", {"activations": ["LeakyRelu"], "activation_alpha": [0.2]})


def test_lstm_activations() -> None:
    _check("LSTM", {"activations": ["HardSigmoid", "Softsign", "Tanh"],
                    "activation_alpha": [0.3], "activation_beta": [0.4]})


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_spec_agrees_with_reference_evaluator(op: str) -> None:
    """_spec itself against onnx's reference evaluator on the forward form it implements."""
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(7)
    g, hidden = GATES[op], 4
    feeds = {"X": _rand(rng, 3, 2, 3), "W": _rand(rng, 1, g * hidden, 3),
             "R": _rand(rng, 1, g * hidden, hidden), "B": _rand(rng, 1, 2 * g * hidden)}
    node = helper.make_node(op, list(feeds), ["Y", "Y_h"], hidden_size=hidden)
    gi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape) for n, v in feeds.items()]
    go = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("Y", "Y_h")]
    model = helper.make_model(helper.make_graph([node], "g", gi, go),
                              opset_imports=[helper.make_opsetid("", 22)])
    want = ReferenceEvaluator(model).run(None, feeds)
    for w, v in zip(want, _spec(op, {}, feeds, 0, hidden)):
        np.testing.assert_allclose(v, w, rtol=1e-5, atol=1e-6)
