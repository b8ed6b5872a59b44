"""Token sampling in numpy: the reference rule of op `sample` (nn.sample), written to match the
WGSL kernel shaders/sample/sample.wgsl step for step, so every device draws the same token.

The semantics (also in nn.sample's docstring), for logits x of length n:

1. repetition penalty (HF's): l = x, except for seen tokens (seen[i] > 0):
   l = x / rp if x > 0 else x * rp, in float32 (rp = 1 disables it).
2. temperature <= 0: the token is the first index of max(l) (greedy).
3. otherwise values compare through `order_keys` (the float32 bits as an order-preserving
   uint32, -0.0 folded into +0.0), and tokens are kept by two thresholds on l:
   top_k (0 or >= n: all): keep l >= t_k, the top_k-th largest l (ties at t_k all kept);
   top_p (>= 1: all): with w = exp((l - max l) / temperature) and mass(t) = sum of w over
   kept tokens with l >= t, keep l >= t_p, the largest t <= max l with
   mass(t) >= top_p * mass(t_k). Ties again are all kept; top_p <= 0 keeps the maximum(s).
4. u = (pcg(seed + pcg(step)) >> 8) / 2**24 in [0, 1) (uint32 wraparound; `uniform`), and
   the token is the first kept index, in index order, whose running sum of w exceeds
   u * (sum of kept w). Should rounding leave none, the last kept token with w > 0.

Logits must be finite or -inf (a NaN or +inf gives an unspecified token). The GPU sums in
float32, this module in float64: tokens differ only where u * total lies within rounding of a
boundary of the running sum (or top_p * total of a top-p boundary).

Rows: logits (r, V) draw r tokens, row k with fparams[k] / iparams[k] exactly as one row (its
own seed and step); `seen` (V,) applies to every row. In place: on a GPU the kernel also sets
seen[token] = 1 when `seen` is a graph state and r = 1 (never for r > 1). This
rule cannot mutate its input; `mark_seen` is that update for numpy callers, and a graph can
add `seen.scatter_set(token, one)` so that every device updates the state alike.
"""
from __future__ import annotations

import numpy as np

_M32 = 0xFFFFFFFF


def pcg(v: int) -> int:
    """The PCG-RXS-M-XS integer hash on uint32 (a bijection), as in the WGSL kernel."""
    s = (v * 747796405 + 2891336453) & _M32
    w = (((s >> ((s >> 28) + 4)) ^ s) * 277803737) & _M32
    return ((w >> 22) ^ w) & _M32


def uniform(seed: int, step: int) -> float:
    """The draw u in [0, 1) of (seed, step): a multiple of 2**-24, exact in float32."""
    h = pcg(((seed & _M32) + pcg(step & _M32)) & _M32)
    return (h >> 8) / 16777216.0


def order_keys(x: np.ndarray) -> np.ndarray:
    """float32 -> uint32 keys in the same order (-0.0 folded into +0.0; NaN above +inf)."""
    b = np.ascontiguousarray(x, np.float32).view(np.uint32)
    b = np.where(b == 0x80000000, np.uint32(0), b)
    return np.where(b & 0x80000000, ~b, b | np.uint32(0x80000000)).astype(np.uint32)


def penalized(logits: np.ndarray, seen: np.ndarray, rp: float) -> np.ndarray:
    """Step 1: the repetition penalty on seen tokens, in float32."""
    x = np.asarray(logits, np.float32).reshape(-1)
    r = np.float32(rp)
    with np.errstate(all="ignore"):
        pen = np.where(x > 0, x / r, x * r).astype(np.float32)
    return np.where(np.asarray(seen).reshape(-1) > 0, pen, x)


def kept_weights(logits: np.ndarray, seen: np.ndarray, fparams: np.ndarray,
                 iparams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1 and 3: (kept mask, w with zeros outside it) for a temperature > 0."""
    temperature, top_p, rp = (float(v) for v in np.asarray(fparams, np.float32)[:3])
    top_k = int(iparams[0])
    l = penalized(logits, seen, rp)  # noqa: E741 - the docstring's name for it
    n = l.size
    keys = order_keys(l)
    kept = np.ones(n, bool)
    if 0 < top_k < n:
        kept = keys >= np.partition(keys, n - top_k)[n - top_k]
    with np.errstate(all="ignore"):
        w = np.exp((l.astype(np.float64) - float(l.max())) / temperature)
    if top_p < 1:
        idx = np.flatnonzero(kept)
        order = idx[np.argsort(-keys[idx].astype(np.int64), kind="stable")]
        cum = np.cumsum(w[order])
        target = np.float32(top_p) * cum[-1]
        first = int(np.argmax(cum >= target))     # ties of keys[order[first]] are all kept
        kept &= keys >= keys[order[first]]
    return kept, np.where(kept, w, 0.0)


def draw(w: np.ndarray, u: float) -> int:
    """Step 4: the first index whose running sum of w exceeds u * total."""
    cum = np.cumsum(w)
    i = int(np.searchsorted(cum, u * cum[-1], side="right"))
    return i if i < w.size else int(np.flatnonzero(w > 0)[-1])


def sample(logits: np.ndarray, seen: np.ndarray, fparams: np.ndarray,
           iparams: np.ndarray) -> int:
    """The token op `sample` draws (see the module docstring)."""
    fparams = np.asarray(fparams, np.float32)
    if not fparams[0] > 0:
        return int(np.argmax(penalized(logits, seen, float(fparams[2]))))
    _, w = kept_weights(logits, seen, fparams, iparams)
    return draw(w, uniform(int(iparams[1]), int(iparams[2])))


def probabilities(logits: np.ndarray, seen: np.ndarray, fparams: np.ndarray,
                  iparams: np.ndarray) -> np.ndarray:
    """The exact distribution op `sample` draws from (one-hot for greedy), float64."""
    fparams = np.asarray(fparams, np.float32)
    n = np.asarray(logits).size
    if not fparams[0] > 0:
        return np.eye(n)[int(np.argmax(penalized(logits, seen, float(fparams[2]))))]
    _, w = kept_weights(logits, seen, fparams, iparams)
    return w / w.sum()


def mark_seen(seen: np.ndarray, token: int) -> np.ndarray:
    """seen[token] = 1, in place (what the GPU kernel does to a `seen` state); returns seen."""
    seen.reshape(-1)[int(token)] = 1
    return seen


def reference_rule(xs: list[np.ndarray], attrs: dict) -> np.ndarray:
    """REFERENCE["sample"]: inputs (logits (V,) or (r, V), seen, fparams, iparams) -> int32
    (r,): each row drawn as `sample` draws one, with its own fparams / iparams row (a (4,)
    params array serves a single row); `seen` is shared by every row."""
    logits, seen, fparams, iparams = (np.asarray(x) for x in xs)
    rows = logits.reshape(-1, logits.shape[-1])
    f = np.asarray(fparams, np.float32).reshape(-1, 4)
    i = np.asarray(iparams).reshape(-1, 4)
    return np.array([sample(rows[k], seen, f[k], i[k]) for k in range(rows.shape[0])],
                    np.int32)
