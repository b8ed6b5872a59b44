"""Linear-algebra rows composed of webrlx ops: Einsum (diagonals by gather, contractions by
matmul when two operands meet, else broadcast products and sums) and Det (LU with partial
pivoting, unrolled over the matrix size)."""
from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .common import lift, static_shape
from .registry import op


# -- Einsum -----------------------------------------------------------------------------------
def _terms(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Operand and output subscripts with '...' spelled out as letters of their own."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise OnnxImportError(f"Einsum: {equation!r} names {len(terms)} operands, got "
                              f"{len(ranks)}")
    n_ell = max((r - len(t) + 3 for t, r in zip(terms, ranks) if "..." in t), default=0)
    ell = "".join(chr(0x3B1 + i) for i in range(n_ell))      # greek: never an ONNX label
    out_terms = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            t = t.replace("...", ell[n_ell - (r - len(t) + 3):])
        if len(t) != r:
            raise OnnxImportError(f"Einsum: subscripts {t!r} do not fit a rank-{r} operand")
        out_terms.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = Counter("".join(out_terms))
        out = ell + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ell))
    return out_terms, out


def _diagonal(ctx: Context, x: Tensor, term: str) -> tuple[Tensor, str]:
    """Take the diagonal over every label repeated within one operand."""
    while len(set(term)) < len(term):
        c = next(c for c in term if term.count(c) > 1)
        i, j = term.index(c), term.index(c, term.index(c) + 1)
        keep = [k for k in range(len(term)) if k not in (i, j)]
        shape = static_shape(ctx, x)
        n = shape[i]
        x = x.permute(keep + [i, j]).reshape(tuple(shape[k] for k in keep) + (n * n,))
        x = x.gather(np.arange(n, dtype=np.int32) * (n + 1), axis=len(keep))
        term = "".join(term[k] for k in keep) + c
    return x, term


def _align(ctx: Context, x: Tensor, term: str, order: str) -> Tensor:
    """x with its labels permuted into order's and size-1 dims for the labels it lacks."""
    mine = [c for c in order if c in term]
    x = x.permute([term.index(c) for c in mine])
    shape = dict(zip(mine, static_shape(ctx, x)))
    return x.reshape(tuple(shape.get(c, 1) for c in order))


def _combine(ctx: Context, a: Tensor, ta: str, b: Tensor, tb: str, keep: str
             ) -> tuple[Tensor, str]:
    """a times b, summed over the labels keep lacks: one batched matmul where the shared
    labels allow it (floats, equal batch sizes), else a broadcast product and a sum."""
    sa, sb = dict(zip(ta, static_shape(ctx, a))), dict(zip(tb, static_shape(ctx, b)))
    batch = [c for c in ta if c in tb and c in keep]
    inner = [c for c in ta if c in tb and c not in keep]
    if inner and a.dtype.is_float and b.dtype.is_float and all(sa[c] == sb[c] for c in batch):
        left = [c for c in ta if c not in tb]
        right = [c for c in tb if c not in ta]
        size = {**sb, **sa}
        m, k, n = (math.prod(size[c] for c in g) for g in (left, inner, right))
        bshape = tuple(size[c] for c in batch)
        am = a.permute([ta.index(c) for c in batch + left + inner]).reshape(bshape + (m, k))
        bm = b.permute([tb.index(c) for c in batch + inner + right]).reshape(bshape + (k, n))
        out = (am @ bm).reshape(bshape + tuple(size[c] for c in left + right))
        return out, "".join(batch + left + right)
    order = "".join(dict.fromkeys(ta + tb))
    x = _align(ctx, a, ta, order) * _align(ctx, b, tb, order)
    return _sum_out(x, order, keep)


def _sum_out(x: Tensor, t: str, keep: str) -> tuple[Tensor, str]:
    gone = [k for k, c in enumerate(t) if c not in keep]
    if not gone:
        return x, t
    return x.sum(axis=gone), "".join(c for c in t if c in keep)


def _einsum(ctx: Context, xs: list[Tensor], equation: str) -> Tensor:
    terms, out = _terms(equation, [x.ndim for x in xs])
    ops = [_diagonal(ctx, x, t) for x, t in zip(xs, terms)]
    x, t = ops[0]
    x, t = _sum_out(x, t, out + "".join(u for _, u in ops[1:]))
    for i in range(1, len(ops)):
        y, u = ops[i]
        rest = out + "".join(v for _, v in ops[i + 1:])
        y, u = _sum_out(y, u, rest + t)
        x, t = _combine(ctx, x, t, y, u, rest)
    x, t = _sum_out(x, t, out)
    return x.permute([t.index(c) for c in out]) if len(out) > 1 else x


@op("Einsum")
def einsum(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    eq = attrs["equation"]
    return [_einsum(ctx, lift(ctx, *ins), eq.decode() if isinstance(eq, bytes) else eq)]


# -- Det --------------------------------------------------------------------------------------
@op("Det")
def det(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    (a,) = lift(ctx, ins[0])
    shape = static_shape(ctx, a)
    n, batch = shape[-1], shape[:-2]
    rows = ctx.tensor(np.arange(n, dtype=np.int32).reshape(n, 1))
    sign = ctx.tensor(np.ones(batch + (1, 1), a.dtype.np_dtype))
    result = sign
    for k in range(n):
        col = abs(a.narrow(-1, k, 1).narrow(-2, k, n - k))               # (..., n-k, 1)
        p = col.argmax(axis=col.ndim - 2, keepdims=True) + k              # (..., 1, 1)
        swap = wt.where(rows == k, p, wt.where(rows == p, k, rows))       # rows k <-> p
        a = a.take_along_axis(swap.expand(shape), a.ndim - 2)
        sign = wt.where(p == k, sign, -sign)
        pivot = a.narrow(-2, k, 1).narrow(-1, k, 1)
        result = result * pivot
        if k + 1 < n:                        # eliminate below the pivot (a zero pivot: det 0)
            below = a.narrow(-2, k + 1, n - k - 1)
            f = below.narrow(-1, k, 1) / wt.where(pivot == 0, 1.0, pivot)
            a = wt.concat([a.narrow(-2, 0, k + 1), below - f * a.narrow(-2, k, 1)], -2)
    return [(result * sign).reshape(batch)]
