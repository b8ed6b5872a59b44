"""Recurrent rows: RNN, GRU and LSTM unrolled over the time steps (the sequence length is a
static dim). The input projection of every step is one matmul; each step adds the recurrent
matmul and the gate math, all webrlx ops. Directions forward, reverse and bidirectional;
activations with alpha/beta, clip, linear_before_reset, layout, initial states, peepholes,
sequence_lens (rows past their length keep their state and output zeros, as the spec says)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .common import lift, static_shape
from .registry import op

Act = Callable[[Tensor, float | None, float | None], Tensor]


def _softplus(x: Tensor) -> Tensor:
    return x.relu() + ((-abs(x)).exp() + 1.0).log()


ACTIVATIONS: dict[str, Act] = {
    "relu": lambda x, a, b: x.relu(),
    "tanh": lambda x, a, b: x.tanh(),
    "sigmoid": lambda x, a, b: x.sigmoid(),
    "affine": lambda x, a, b: x * (1.0 if a is None else a) + (0.0 if b is None else b),
    "leakyrelu": lambda x, a, b: wt.where(x >= 0, x, x * (0.01 if a is None else a)),
    "thresholdedrelu": lambda x, a, b: wt.where(x > (1.0 if a is None else a), x, x * 0.0),
    "scaledtanh": lambda x, a, b: (x * (1.0 if b is None else b)).tanh()
    * (1.0 if a is None else a),
    "hardsigmoid": lambda x, a, b: (x * (0.2 if a is None else a)
                                    + (0.5 if b is None else b)).clamp(0, 1),
    "elu": lambda x, a, b: wt.where(x >= 0, x, (x.exp() - 1.0) * (1.0 if a is None else a)),
    "softsign": lambda x, a, b: x / (abs(x) + 1.0),
    "softplus": lambda x, a, b: _softplus(x),
}
DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _activations(ctx: Context, op_type: str, attrs: dict[str, Any], dirs: int
                 ) -> list[list[Callable[..., Tensor]]]:
    """Per direction, the activation functions (f, g, h as the op uses them)."""
    names = [n.decode() if isinstance(n, bytes) else n for n in attrs.get("activations", [])]
    per = len(DEFAULT_ACTS[op_type])
    names = names or DEFAULT_ACTS[op_type] * dirs
    if len(names) == per:
        names = names * dirs
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta",
                                                                            []))
    out = []
    for d in range(dirs):
        fns = []
        for k in range(per):
            i = d * per + k
            name = names[i].lower()
            if name not in ACTIVATIONS:
                raise OnnxImportError(f"{ctx.node_name}: activation {names[i]!r} is not "
                                      "supported")
            a = alphas[i] if i < len(alphas) else None
            b = betas[i] if i < len(betas) else None
            fns.append(lambda x, f=ACTIVATIONS[name], a=a, b=b: f(x, a, b))
        out.append(fns)
    return out


def _step_input(ctx: Context, op_type: str, attrs: dict[str, Any], ins: list[Any]
                ) -> dict[str, Any]:
    """The inputs in time-major form and per-direction weights."""
    ins = ins + [None] * (8 - len(ins))
    x, w, r, b, lens, h0 = ins[:6]
    layout = attrs.get("layout", 0)
    (x, w, r) = lift(ctx, x, w, r)
    if layout:
        x = x.transpose(0, 1) if x.ndim == 3 else x
        if h0 is not None:
            h0 = ctx.tensor(h0).transpose(0, 1)
    steps, batch, _ = static_shape(ctx, x, "input shape")
    if lens is not None:            # (B, 1) lengths: step t updates the rows with t < length
        lens = ctx.tensor(lens).cast("int32").reshape((batch, 1))
    return {"x": x, "w": w, "r": r, "b": b, "h0": h0, "steps": steps, "batch": batch,
            "lens": lens}


def _run(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    op_type = node.op_type
    p = _step_input(ctx, op_type, attrs, ins)
    x, w, r, b, h0 = p["x"], p["w"], p["r"], p["b"], p["h0"]
    steps, batch, lens = p["steps"], p["batch"], p["lens"]
    hidden = attrs["hidden_size"]
    direction = attrs.get("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    dirs = 2 if direction == "bidirectional" else 1
    gates = GATES[op_type]
    acts = _activations(ctx, op_type, attrs, dirs)
    clip = attrs.get("clip")
    extra = ins + [None] * (8 - len(ins))
    c0, peep = extra[6], extra[7]
    if op_type == "LSTM" and attrs.get("layout", 0) and c0 is not None:
        c0 = ctx.tensor(c0).transpose(0, 1)
    ys: list[Tensor] = []
    hs: list[Tensor] = []
    cs: list[Tensor] = []
    for d in range(dirs):
        wd, rd = w[d], r[d]                                     # (gates*H, in), (gates*H, H)
        proj = x @ wd.transpose()                               # (T, B, gates*H)
        wb = rb = None
        if b is not None:
            bd = ctx.tensor(b)[d]
            wb, rb = bd[:gates * hidden], bd[gates * hidden:]
            proj = proj + wb
        rt = rd.transpose()                                     # (H, gates*H)
        h = ctx.tensor(h0)[d] if h0 is not None else ctx.g.constant(
            np.zeros((batch, hidden), np.float32), "float32").cast(x.dtype)
        c = ctx.tensor(c0)[d] if c0 is not None else h * 0.0    # LSTM's cell state
        pd = ctx.tensor(peep)[d] if peep is not None else None
        reverse = direction == "reverse" or d == 1
        out: dict[int, Tensor] = {}
        for s in range(steps):
            t = steps - 1 - s if reverse else s
            xt, h_prev, c_prev = proj[t], h, c
            if op_type == "RNN":
                h = _rnn_cell(xt, h, rt, rb, acts[d], clip)
            elif op_type == "GRU":
                h = _gru_cell(xt, h, rd, rb, hidden, acts[d], clip,
                              attrs.get("linear_before_reset", 0))
            else:
                h, c = _lstm_cell(xt, h, c, rt, rb, pd, hidden, acts[d], clip,
                                  attrs.get("input_forget", 0))
            if lens is not None:    # past a row's length: state kept, output zero
                live = lens > t
                h, c = wt.where(live, h, h_prev), wt.where(live, c, c_prev)
                out[t] = wt.where(live, h, h * 0.0)
            else:
                out[t] = h
        ys.append(wt.concat([out[t].unsqueeze(0) for t in range(steps)], 0))   # (T, B, H)
        hs.append(h)
        cs.append(c)
    y = wt.concat([v.unsqueeze(1) for v in ys], 1)                   # (T, dirs, B, H)
    yh = wt.concat([v.unsqueeze(0) for v in hs], 0)                  # (dirs, B, H)
    outs = [y, yh]
    if op_type == "LSTM":
        outs.append(wt.concat([v.unsqueeze(0) for v in cs], 0))
    if attrs.get("layout", 0):
        outs = [y.permute(2, 0, 1, 3)] + [o.transpose(0, 1) for o in outs[1:]]
    return outs


def _pre(v: Tensor, clip: float | None) -> Tensor:
    return v if clip is None else v.clamp(-clip, clip)


def _rnn_cell(xt: Tensor, h: Tensor, rt: Tensor, rb: Tensor | None, acts: list[Any],
              clip: float | None) -> Tensor:
    v = xt + h @ rt
    return acts[0](_pre(v if rb is None else v + rb, clip))


def _gru_cell(xt: Tensor, h: Tensor, rd: Tensor, rb: Tensor | None, hidden: int,
              acts: list[Any], clip: float | None, lbr: int) -> Tensor:
    f, g = acts
    H = hidden
    rz, rr, rh = (rd[k * H:(k + 1) * H].transpose() for k in range(3))
    bz, br, bh = (None, None, None) if rb is None else (rb[:H], rb[H:2 * H], rb[2 * H:])

    def add(v: Tensor, bias: Tensor | None) -> Tensor:
        return v if bias is None else v + bias
    z = f(_pre(add(xt[:, :H] + h @ rz, bz), clip))
    r = f(_pre(add(xt[:, H:2 * H] + h @ rr, br), clip))
    if lbr:
        hh = g(_pre(xt[:, 2 * H:] + r * add(h @ rh, bh), clip))
    else:
        hh = g(_pre(add(xt[:, 2 * H:] + (r * h) @ rh, bh), clip))
    return (1.0 - z) * hh + z * h


def _lstm_cell(xt: Tensor, h: Tensor, c: Tensor, rt: Tensor, rb: Tensor | None,
               peep: Tensor | None, hidden: int, acts: list[Any], clip: float | None,
               couple: int) -> tuple[Tensor, Tensor]:
    f, g, hf = acts
    H = hidden
    v = xt + h @ rt
    if rb is not None:
        v = v + rb
    vi, vo, vf, vc = (v[:, k * H:(k + 1) * H] for k in range(4))
    if peep is not None:
        vi = vi + peep[:H] * c
        vf = vf + peep[2 * H:] * c
    i = f(_pre(vi, clip))
    fg = 1.0 - i if couple else f(_pre(vf, clip))
    cc = g(_pre(vc, clip))
    c = fg * c + i * cc
    if peep is not None:
        vo = vo + peep[H:2 * H] * c
    o = f(_pre(vo, clip))
    return o * hf(c), c


@op("RNN", "GRU", "LSTM")
def recurrent(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return _run(ctx, node, ins, attrs)
