"""Control-flow rows: If (a host-known condition inlines the taken branch, so If on shapes
costs nothing; a device condition runs both branches and selects with where), Loop and Scan
(unrolled at import: the body is inlined once per iteration, so the trip count, condition and
sequence length must be known on the host; the body's math stays webrlx ops)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import tensor as wt
from ..context import Context, OnnxImportError
from ..reader import GraphDef
from .common import norm_axis, onnx_np_dtype, same_dtype, static_shape
from .registry import op


@op("If")
def if_(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    cond = ins[0]
    if ctx.is_host(cond):
        branch = attrs["then_branch"] if bool(np.asarray(cond).reshape(-1)[0]) \
            else attrs["else_branch"]
        return ctx.inline(branch, [])
    then = ctx.inline(attrs["then_branch"], [])
    other = ctx.inline(attrs["else_branch"], [])
    if not all(isinstance(v, (wt.Tensor, np.ndarray)) for v in then + other) or any(
            tuple(ctx.shape(a)) != tuple(ctx.shape(b)) for a, b in zip(then, other)):
        # branches of other shapes or kinds (sequences, optionals): the condition picks the
        # plan, so the session needs it on the host
        ctx.host(cond, "a condition choosing between branches of different shapes or kinds")
    c = cond.reshape(())
    outs = []
    for a, b in zip(then, other):
        ta, tb = same_dtype(ctx.tensor(a), ctx.tensor(b))
        outs.append(wt.where(c, ta, tb))
    return outs


# a Loop without a trip count stops on its condition; past this many iterations it refuses
MAX_UNROLL = 4096


def _stack(ctx: Context, values: list[Any], axis: int, body_out: Any) -> Any:
    """Per-iteration values stacked along a new axis (an empty scan output when none)."""
    if not values:
        t = body_out.type
        dims = tuple(d if isinstance(d, int) and d >= 0 else 0 for d in (t.shape or ()))
        return np.zeros((0,) + dims, onnx_np_dtype(t.elem_type))
    if all(ctx.is_host(v) for v in values):
        return np.stack(values, axis)
    first = ctx.tensor(values[0])
    parts = [first] + [same_dtype(first, ctx.tensor(v))[1] for v in values[1:]]
    return wt.concat([p.unsqueeze(axis) for p in parts], axis)


@op("Loop")
def loop(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    body: GraphDef = attrs["body"]
    trips_in, cond_in = (ins + [None, None])[:2]
    carried = list(ins[2:])
    trips = None if trips_in is None else int(ctx.host(trips_in, "the trip count").reshape(-1)[0])
    keep = cond_in is None or bool(ctx.host(cond_in, "the loop condition").reshape(-1)[0])
    scans: list[list[Any]] = [[] for _ in body.outputs[1 + len(carried):]]
    i = 0
    while keep and (trips is None or i < trips):
        if trips is None and i >= MAX_UNROLL:
            raise OnnxImportError(f"{ctx.node_name}: no trip count and the condition still "
                                  f"holds after {MAX_UNROLL} iterations")
        outs = ctx.inline(body, [np.array(i, np.int64), np.array(keep)] + carried)
        carried = outs[1:1 + len(carried)]
        for acc, v in zip(scans, outs[1 + len(carried):]):
            acc.append(v)
        keep = bool(ctx.host(outs[0], "the loop condition").reshape(-1)[0])
        i += 1
    outs_k = body.outputs[1 + len(carried):]
    return carried + [_stack(ctx, v, 0, o) for v, o in zip(scans, outs_k)]


def _step(ctx: Context, x: Any, axis: int, t: int) -> Any:
    """x[..., t, ...] along axis, the axis dropped."""
    if ctx.is_host(x):
        return np.take(x, t, axis=axis)
    return x.narrow(axis, t, 1).squeeze(axis)


def _scan(ctx: Context, body: GraphDef, states: list[Any], xs: list[Any],
          attrs: dict[str, Any]) -> list[Any]:
    """One Scan over xs (no batch axis): final states, then the scan outputs."""
    n_in, n_out = len(xs), len(body.outputs) - len(states)
    in_axes = [norm_axis(a, len(ctx.shape(x))) for a, x in
               zip(attrs.get("scan_input_axes") or [0] * n_in, xs)]
    in_dirs = attrs.get("scan_input_directions") or [0] * n_in
    out_dirs = attrs.get("scan_output_directions") or [0] * n_out
    lengths = {static_shape(ctx, x, "scan input shape")[a] for x, a in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise OnnxImportError(f"{ctx.node_name}: scan inputs have lengths {sorted(lengths)}")
    (steps,) = lengths
    scans: list[list[Any]] = [[] for _ in range(n_out)]
    for t in range(steps):
        slices = [_step(ctx, x, a, steps - 1 - t if d else t)
                  for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = ctx.inline(body, states + slices)
        states = outs[:len(states)]
        for acc, v in zip(scans, outs[len(states):]):
            acc.append(v)
    results = []
    for k, (acc, d) in enumerate(zip(scans, out_dirs)):
        o = body.outputs[len(states) + k]
        rank = len(ctx.shape(acc[0])) + 1 if acc else 1
        axis = norm_axis((attrs.get("scan_output_axes") or [0] * n_out)[k], rank)
        results.append(_stack(ctx, acc[::-1] if d else acc, axis, o))
    return states + results


@op("Scan", since=9)
def scan(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    n_in = attrs["num_scan_inputs"]
    return _scan(ctx, attrs["body"], list(ins[:len(ins) - n_in]), list(ins[len(ins) - n_in:]),
                 attrs)


@op("Scan", since=8, until=8)
def scan8(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    n_in = attrs["num_scan_inputs"]
    lens, rest = ins[0], list(ins[1:])
    states, xs = rest[:len(rest) - n_in], rest[len(rest) - n_in:]
    batch, steps = static_shape(ctx, xs[0], "scan input shape")[:2]
    if lens is not None and np.any(ctx.host(lens, "sequence_lens") != steps):
        raise OnnxImportError(f"{ctx.node_name}: sequence_lens shorter than the scan axis are "
                              "not supported")
    sub = {"scan_input_directions": attrs.get("directions")}
    per_batch = [_scan(ctx, attrs["body"], [_step(ctx, s, 0, b) for s in states],
                       [_step(ctx, x, 0, b) for x in xs], sub) for b in range(batch)]
    return [_stack(ctx, list(vals), 0, o) for vals, o in zip(zip(*per_batch),
                                                            attrs["body"].outputs)]
