"""The numpy reference: one rule per op (REFERENCE), and an interpreter of a whole graph.

It is the oracle of every backend test, the constant folder's evaluator, and (through
backends/reference.py) the fallback device when no adapter exists. Float math runs in float64
where numpy would lose accuracy, then rounds to the node's dtype.
"""
from __future__ import annotations

import sys
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .activations import ACTIVATIONS, erf, gelu
from .graph import Graph, Node
from .ops_decoder import rope_inv_freq

Rule = Callable[[list[np.ndarray], dict[str, Any]], np.ndarray]


def _f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64) if x.dtype.kind == "f" else x


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return np.power(a.astype(np.float64), b).astype(np.float64)
    with np.errstate(all="ignore"):
        return np.power(_f64(a), _f64(b))


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.true_divide(_f64(a), _f64(b))


def _reduce(fn: Callable) -> Rule:
    def rule(xs, at):
        axes = tuple(at["axes"]) if at["axes"] is not None else None
        with warnings.catch_warnings():          # numpy's mean of nothing: NaN, said once
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(_f64(xs[0]), axis=axes, keepdims=at["keepdims"])
    return rule


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    x = _f64(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    x = _f64(x)
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def _layer_norm(xs, at):
    x = _f64(xs[0])
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + at["eps"])
    return _affine(y, xs[1:])


def _rms_norm(xs, at):
    x = _f64(xs[0])
    return _affine(x / np.sqrt((x * x).mean(-1, keepdims=True) + at["eps"]), xs[1:])


def _norm_grad(xs, at, rms):
    x, dy = _f64(xs[0]), _f64(xs[1])
    xc = x if rms else x - x.mean(-1, keepdims=True)
    inv = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + at["eps"])
    xh = xc * inv
    gh = dy * _f64(xs[2]) if len(xs) > 2 else dy
    inner = gh - xh * (gh * xh).mean(-1, keepdims=True)
    return inv * (inner if rms else inner - gh.mean(-1, keepdims=True))


def _affine(y: np.ndarray, wb: list[np.ndarray]) -> np.ndarray:
    if wb:
        y = y * _f64(wb[0])
    if len(wb) > 1:
        y = y + _f64(wb[1])
    return y


def _matmul(xs, at):
    y = np.matmul(_f64(xs[0]), _f64(xs[1]))
    if len(xs) == 3:
        y = y + _f64(xs[2])
    return ACTIVATIONS[at.get("activation", "none")].numpy(y)


def _activation(name: str) -> Rule:
    fn = ACTIVATIONS[name].numpy
    return lambda xs, at: fn(_f64(xs[0]))


def _slice(xs, at):
    return xs[0][tuple(slice(a, b) for a, b in zip(at["starts"], at["stops"]))]


def _argtopk(xs, at):
    # stable: among equal values the lower index comes first; NaN first of all (torch.topk)
    x, axis, k = _f64(xs[0]), at["axis"], at["k"]
    nan = np.isnan(x)
    order = np.lexsort((-np.where(nan, 0.0, x), ~nan), axis=axis)
    return np.take(order, np.arange(k), axis=axis)


def _gather(xs, at):
    x, idx = xs
    n = x.shape[at["axis"]]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError(f"gather: index out of range [0, {n}) "
                         f"(got min {idx.min()}, max {idx.max()})")
    return np.take(x, idx, axis=at["axis"])


def _scatter_set(xs, at):
    out = xs[0].copy()
    idx = xs[1].astype(np.int64)
    keep = (idx >= 0) & (idx < len(out))
    out[idx[keep]] = xs[2][keep]
    return out


def _scatter_add(xs, at):
    out = _f64(xs[0]).copy()
    idx = xs[1].astype(np.int64)
    keep = (idx >= 0) & (idx < len(out))
    np.add.at(out, idx[keep], _f64(xs[2])[keep])
    return out


def _conv2d(xs, at):
    x, w = _f64(xs[0]), _f64(xs[1])
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (ph, pw), (dh, dw), g = at["stride"], at["padding"], at["dilation"], at["groups"]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // g
    for gi in range(g):
        xs_g = xp[:, gi * cg:(gi + 1) * cg]
        w_g = w[gi * og:(gi + 1) * og]
        for i in range(kh):
            for j in range(kw):
                patch = xs_g[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                             j * dw: j * dw + sw * (ow - 1) + 1: sw]
                out[:, gi * og:(gi + 1) * og] += np.einsum("nchw,oc->nohw", patch, w_g[:, :, i, j])
    if len(xs) == 3:
        out += _f64(xs[2])[None, :, None, None]
    return out


def _pool2d(kind: str) -> Rule:
    def rule(xs, at):
        x = _f64(xs[0])
        (kh, kw), (sh, sw), (ph, pw) = at["kernel"], at["stride"], at["padding"]
        fill = -np.inf if kind == "max" else 0.0
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
        n, c, h, w = x.shape
        oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
        windows = np.stack([xp[:, :, i: i + sh * (oh - 1) + 1: sh, j: j + sw * (ow - 1) + 1: sw]
                            for i in range(kh) for j in range(kw)])
        # avg pool counts padded zeros (count_include_pad=True, the torch default)
        return windows.max(0) if kind == "max" else windows.mean(0)
    return rule


def _conv_taps(at: dict, oh: int, ow: int, i: int, j: int) -> tuple[slice, slice]:
    """The padded-input rows and columns that tap (i, j) of every output position reads."""
    (sh, sw), (dh, dw) = at["stride"], at.get("dilation", (1, 1))
    return (slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
            slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))


def _conv2d_grad_input(xs, at):
    dy, w = _f64(xs[0]), _f64(xs[1])
    n, o, oh, ow = dy.shape
    _, cg, kh, kw = w.shape
    g, (ph, pw), (h, wd) = at["groups"], at["padding"], at["input_size"]
    dxp = np.zeros((n, cg * g, h + 2 * ph, wd + 2 * pw))
    og = o // g
    for k in range(g):
        for i in range(kh):
            for j in range(kw):
                ys, xs_ = _conv_taps(at, oh, ow, i, j)
                dxp[:, k * cg:(k + 1) * cg, ys, xs_] += np.einsum(
                    "nohw,oc->nchw", dy[:, k * og:(k + 1) * og], w[k * og:(k + 1) * og, :, i, j])
    return dxp[:, :, ph:ph + h, pw:pw + wd]


def _conv2d_grad_weight(xs, at):
    dy, x = _f64(xs[0]), _f64(xs[1])
    n, o, oh, ow = dy.shape
    c = x.shape[1]
    g, (ph, pw), (kh, kw) = at["groups"], at["padding"], at["kernel"]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    cg, og = c // g, o // g
    dw = np.zeros((o, cg, kh, kw))
    for k in range(g):
        for i in range(kh):
            for j in range(kw):
                ys, xs_ = _conv_taps(at, oh, ow, i, j)
                dw[k * og:(k + 1) * og, :, i, j] = np.einsum(
                    "nohw,nchw->oc", dy[:, k * og:(k + 1) * og],
                    xp[:, k * cg:(k + 1) * cg, ys, xs_])
    return dw


def _pool2d_grad(kind: str) -> Rule:
    def rule(xs, at):
        dy, x = _f64(xs[0]), _f64(xs[1])
        (kh, kw), (ph, pw) = at["kernel"], at["padding"]
        _, _, oh, ow = dy.shape
        n, c, h, w = x.shape
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=-np.inf)
        taps = [(i, j) for i in range(kh) for j in range(kw)]
        first = np.stack([xp[:, :, ys, xs_] for ys, xs_ in
                          (_conv_taps(at, oh, ow, i, j) for i, j in taps)]).argmax(0)
        dxp = np.zeros_like(xp)
        for k, (i, j) in enumerate(taps):
            ys, xs_ = _conv_taps(at, oh, ow, i, j)
            dxp[:, :, ys, xs_] += np.where(first == k, dy, 0.0) if kind == "max" else \
                dy / (kh * kw)
        return dxp[:, :, ph:ph + h, pw:pw + w]
    return rule


def _attention(xs, at):
    q, k, v = (_f64(t) for t in xs[:3])
    s = q @ np.swapaxes(k, -1, -2) * at["scale"]
    if len(xs) == 4:
        s = s + np.where(xs[3][:, None, None, :] != 0, 0.0, -np.inf)
    if at.get("causal"):
        qn, kn = s.shape[-2], s.shape[-1]
        s = np.where(np.tril(np.ones((qn, kn), bool), kn - qn), s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = _softmax(s, -1)
    if len(xs) == 4:          # a row whose keys are all masked gives 0, as the kernels do
        p = np.where((xs[3] == 0).all(-1)[:, None, None, None], 0.0, p)
    return p @ v


def _cast(xs, at):
    x = xs[0]
    target = np.dtype(at["dtype"])
    if x.dtype.kind == "f" and target.kind in "iu":
        with np.errstate(invalid="ignore"):
            return np.trunc(x).astype(target)
    return x.astype(target)


# -- quantized: dequantize the raw blocks (quant.py), then float64 math ----------------------
DEQUANT_CACHE_BYTES = (256 if sys.platform == "emscripten" else 2048) << 20
_dequantized: dict[tuple, tuple[Any, np.ndarray]] = {}   # key -> (weakref to raw, float32)


def _qrows(w: np.ndarray, at: dict[str, Any], rows: np.ndarray | slice) -> np.ndarray:
    """Rows of the dequantized (n, k) weight; whole weights are cached (float32) while their
    raw array lives, so a model's params are dequantized once, not on every run."""
    from . import quant
    n, k, fmt = at["n"], at["k"], at["format"]
    key = (id(w), w.__array_interface__["data"][0], fmt, n, k)
    hit = _dequantized.get(key)
    if hit is not None and hit[0]() is w:
        return hit[1][rows]
    raw = quant.as_bytes(w)[:quant.nbytes(fmt, n, k)].reshape(n, -1)
    full = quant.dequantize(raw, fmt, (n, k))
    for old in [kk for kk, (ref, _) in _dequantized.items() if ref() is None]:
        del _dequantized[old]
    if sum(v.nbytes for _, v in _dequantized.values()) + full.nbytes <= DEQUANT_CACHE_BYTES:
        try:
            _dequantized[key] = (weakref.ref(w), full)
        except TypeError:                    # an array type without weak references
            pass
    return full[rows]


def _qmatmul(xs, at):
    x, n, step = _f64(xs[0]), at["n"], 8192     # dequantize a slab of rows at a time
    y = np.concatenate([x @ _qrows(xs[1], at, slice(i, min(i + step, n))).T.astype(np.float64)
                        for i in range(0, n, step)], axis=-1)
    return y + _f64(xs[2]) if len(xs) == 3 else y


def _qgather(xs, at):
    w, ids = xs
    n = at["n"]
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise IndexError(f"qgather: id out of range [0, {n}) "
                         f"(got min {ids.min()}, max {ids.max()})")
    return _qrows(w, at, ids.reshape(-1).astype(np.int64)).reshape(ids.shape + (at["k"],))


# -- sampling: the same math as the kernel, in sampling.py (the token only: no in-place mark)
def _sample(xs, at):
    from . import sampling
    return sampling.reference_rule(xs, at)


# -- decoder: rope, cache_write (a copy with the rows set), cached_attention (dense, masked)
def _kv_rows(pos, b):
    """Per batch row (positions, KV slots): pos (1,) is row 0's position for every batch
    (slot = batch index); pos (2, B) holds [positions; slots]."""
    pos = np.asarray(pos).astype(np.int64)
    if pos.ndim == 2:
        return pos[0], pos[1]
    return np.full(b, int(pos.reshape(-1)[0])), np.arange(b)


def _rope(xs, at):
    x = _f64(xs[0])
    b, s, d = x.shape[0], x.shape[1], x.shape[3]
    p0 = _kv_rows(xs[1], b)[0]
    inv = np.array(rope_inv_freq(d, at["base"], at.get("factors", ())))
    ang = (p0[:, None] + np.arange(s, dtype=np.float64)[None, :])[..., None] * inv  # (B,S,D/2)
    cos, sin = np.cos(ang)[:, :, None, :], np.sin(ang)[:, :, None, :]
    if at["interleaved"]:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    else:
        x1, x2 = x[..., :d // 2], x[..., d // 2:]
    y1, y2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos
    if at["interleaved"]:
        return np.stack([y1, y2], axis=-1).reshape(x.shape)
    return np.concatenate([y1, y2], axis=-1)


def _cache_write(xs, at):
    cache, new = xs[0].copy(), xs[1]
    for bi, (p0, slot) in enumerate(zip(*_kv_rows(xs[2], new.shape[0]), strict=True)):
        for s in range(new.shape[1]):
            if 0 <= p0 + s < cache.shape[2]:
                cache[slot, :, p0 + s, :] = new[bi, s, :, :]
    return cache


def _cached_attention(xs, at):
    q = _f64(xs[0])
    b, s, h, d = q.shape
    out = np.zeros_like(q)
    for bi, (p0, slot) in enumerate(zip(*_kv_rows(xs[3], b), strict=True)):
        out[bi] = _attend_cache(q[bi], xs[1][slot], xs[2][slot], max(int(p0), 0), at)
    return out


def _attend_cache(q, kc, vc, p0, at):
    """One batch row: q (S, H, D) over its caches (Hkv, T, D), rows at p0 + s."""
    s, h, _ = q.shape
    hkv, t = kc.shape[0], kc.shape[1]
    n = min(t, p0 + s)                                    # keys past pos + S are never read
    k = np.repeat(_f64(kc[:, :n]), h // hkv, axis=0)      # (H, n, D)
    v = np.repeat(_f64(vc[:, :n]), h // hkv, axis=0)
    sc = np.einsum("shd,hkd->hsk", q, k) * at["scale"]
    if at.get("softcap", 0.0) > 0:
        sc = np.tanh(sc / at["softcap"]) * at["softcap"]
    key, row = np.arange(n)[None, :], p0 + np.arange(s)[:, None]
    visible = key <= row
    if at.get("window", 0) > 0:                           # sliding window: row - key < window
        visible &= row - key < at["window"]
    sc = np.where(visible, sc, -np.inf)
    return np.einsum("hsk,hkd->shd", _softmax(sc, -1), v)


REFERENCE: dict[str, Rule] = {
    "add": lambda xs, at: np.add(_f64(xs[0]), _f64(xs[1])),
    "sub": lambda xs, at: np.subtract(_f64(xs[0]), _f64(xs[1])),
    "mul": lambda xs, at: np.multiply(_f64(xs[0]), _f64(xs[1])),
    "div": lambda xs, at: _div(xs[0], xs[1]),
    "pow": lambda xs, at: _pow(xs[0], xs[1]),
    "maximum": lambda xs, at: np.maximum(xs[0], xs[1]),
    "minimum": lambda xs, at: np.minimum(xs[0], xs[1]),
    "bitwise_and": lambda xs, at: np.bitwise_and(xs[0], xs[1]),
    "bitwise_or": lambda xs, at: np.bitwise_or(xs[0], xs[1]),
    "bitwise_xor": lambda xs, at: np.bitwise_xor(xs[0], xs[1]),
    "bitwise_not": lambda xs, at: np.invert(xs[0]),
    "shl": lambda xs, at: np.left_shift(xs[0], np.bitwise_and(xs[1], 31).astype(xs[0].dtype)),
    "shr": lambda xs, at: np.right_shift(xs[0], np.bitwise_and(xs[1], 31).astype(xs[0].dtype)),
    "eq": lambda xs, at: xs[0] == xs[1],
    "ne": lambda xs, at: xs[0] != xs[1],
    "lt": lambda xs, at: xs[0] < xs[1],
    "le": lambda xs, at: xs[0] <= xs[1],
    "gt": lambda xs, at: xs[0] > xs[1],
    "ge": lambda xs, at: xs[0] >= xs[1],
    "where": lambda xs, at: np.where(xs[0], xs[1], xs[2]),
    "neg": lambda xs, at: -xs[0],
    "abs": lambda xs, at: np.abs(xs[0]),
    "exp": lambda xs, at: np.exp(_f64(xs[0])),
    "log": lambda xs, at: np.log(_f64(xs[0])),
    "sqrt": lambda xs, at: np.sqrt(_f64(xs[0])),
    "rsqrt": lambda xs, at: 1 / np.sqrt(_f64(xs[0])),
    "sin": lambda xs, at: np.sin(_f64(xs[0])),
    "cos": lambda xs, at: np.cos(_f64(xs[0])),
    "tanh": _activation("tanh"),
    "sigmoid": _activation("sigmoid"),
    "relu": lambda xs, at: np.maximum(xs[0], 0),
    "gelu": lambda xs, at: gelu(xs[0], at.get("approximate", "none")),
    "silu": _activation("silu"),
    "erf": lambda xs, at: erf(xs[0]),
    "floor": lambda xs, at: np.floor(xs[0]),
    "ceil": lambda xs, at: np.ceil(xs[0]),
    "round": lambda xs, at: np.round(xs[0]),
    "cast": _cast,
    "bitcast": lambda xs, at: np.ascontiguousarray(xs[0]).view(np.dtype(at["dtype"])),
    "clamp": lambda xs, at: np.clip(_f64(xs[0]), at["lo"], at["hi"]),
    "sum": _reduce(np.sum),
    "mean": _reduce(np.mean),
    "max": _reduce(np.max),
    "min": _reduce(np.min),
    "prod": _reduce(np.prod),
    "argmax": lambda xs, at: np.asarray(np.argmax(xs[0], axis=at["axis"],
                                                  keepdims=at["keepdims"])),
    "softmax": lambda xs, at: _softmax(xs[0], at.get("axis", -1)),
    "log_softmax": lambda xs, at: _log_softmax(xs[0], at.get("axis", -1)),
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "layer_norm_grad": lambda xs, at: _norm_grad(xs, at, rms=False),
    "rms_norm_grad": lambda xs, at: _norm_grad(xs, at, rms=True),
    "cumsum": lambda xs, at: np.cumsum(_f64(xs[0]) if xs[0].dtype.kind == "f" else xs[0],
                                       axis=at["axis"]),
    "argtopk": _argtopk,
    "matmul": _matmul,
    "reshape": lambda xs, at: xs[0].reshape(at["_shape"]),
    "permute": lambda xs, at: np.transpose(xs[0], at["axes"]),
    "expand": lambda xs, at: np.broadcast_to(xs[0], at["_shape"]),
    "slice": _slice,
    "concat": lambda xs, at: np.concatenate(xs, axis=at["axis"]),
    "gather": _gather,
    "scatter_set": _scatter_set,
    "assign": lambda xs, at: xs[1],
    "scatter_add": _scatter_add,
    "take_along_axis": lambda xs, at: np.take_along_axis(xs[0], xs[1].astype(np.int64),
                                                         axis=at["axis"]),
    "conv2d": _conv2d,
    "max_pool2d": _pool2d("max"),
    "avg_pool2d": _pool2d("avg"),
    "conv2d_grad_input": _conv2d_grad_input,
    "conv2d_grad_weight": _conv2d_grad_weight,
    "max_pool2d_grad": _pool2d_grad("max"),
    "avg_pool2d_grad": _pool2d_grad("avg"),
    "attention": _attention,
    # -- decoder
    "rope": _rope,
    "cache_write": _cache_write,
    "cached_attention": _cached_attention,
    # -- quantized
    "qmatmul": _qmatmul,
    "qgather": _qgather,
    # -- sampling
    "sample": _sample,
}

def evaluate(node: Node, args: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """Apply node's reference rule and return a contiguous array of the node's dtype."""
    attrs = dict(node.attrs, _shape=shape)
    with np.errstate(all="ignore"):      # NaN/Inf follow numpy; overflow to inf is a value
        out = np.asarray(REFERENCE[node.op](args, attrs))
        if node.dtype.is_int and out.dtype.kind == "f":
            out = np.trunc(out)
        return np.asarray(out.astype(node.dtype.np_dtype, copy=False).reshape(shape),
                          order="C")


def _at_node(e: Exception, node: Node) -> Exception:
    """The same kind of error as e, with a message naming the node it came from."""
    msg = f"reference: evaluating {node}: {type(e).__name__}: {e}"
    try:
        return type(e)(msg)
    except Exception:  # noqa: BLE001 - an exception type with another constructor
        return RuntimeError(msg)


def interpret(graph: Graph, shapes: Mapping[int, tuple[int, ...]],
              sources: Mapping[int, np.ndarray], wanted: list[int], keep_all: bool = False,
              ) -> list[np.ndarray] | dict[int, np.ndarray]:
    """Evaluate the nodes needed for `wanted`, given bound shapes and source values.

    Returns the wanted values in order, or (keep_all) every evaluated node's value by id.
    """
    needed = set(wanted)
    for node in reversed(graph.nodes):
        if node.id in needed:
            needed.update(node.inputs)
    values: dict[int, np.ndarray] = {}
    last_use = {i: n.id for n in graph.nodes for i in n.inputs}
    keep = set(wanted)
    for node in graph.nodes:
        if node.id not in needed:
            continue
        if node.id in sources:
            values[node.id] = sources[node.id]
        else:
            try:
                values[node.id] = evaluate(node, [values[i] for i in node.inputs],
                                           shapes[node.id])
            except Exception as e:   # say which node failed, keep the cause
                raise _at_node(e, node) from e
        for i in node.inputs:   # free values after their last use
            if last_use.get(i) == node.id and i not in keep and not keep_all:
                values.pop(i, None)
    return values if keep_all else [values[i] for i in wanted]
