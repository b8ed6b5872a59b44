"""Rows whose output shape depends on the input values (NonZero, Unique, NonMaxSuppression):
the plan is built per distinct input value, so they run on the host in numpy, with the ONNX
reference evaluator's semantics."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..context import Context
from .registry import op


def _host_inputs(ctx: Context, node: Any, ins: list[Any]) -> list[Any]:
    """Every input on the host (NeedsHostValue makes the session feed them as values)."""
    what = f"the inputs of {node.op_type} (they set its output's shape)"
    return [None if v is None else ctx.host(v, what) for v in ins]


def _nonzero(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.array(np.nonzero(ins[0]), np.int64).reshape(ins[0].ndim, -1)]


@op("NonZero", host=_nonzero)
def nonzero(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return _nonzero(node, _host_inputs(ctx, node, ins), attrs)


def _unique(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    axis = attrs.get("axis")
    y, first, inverse, counts = np.unique(x, True, True, True, axis=axis)
    if not attrs.get("sorted", 1):        # order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        first, counts, inverse = first[order], counts[order], rank[inverse.reshape(-1)]
        y = np.take(x.reshape(-1) if axis is None else x, first, axis=0 if axis is None
                    else axis)
    outs = [y, first, inverse.reshape(-1), counts]
    return [outs[0]] + [o.astype(np.int64) for o in outs[1:]]


@op("Unique", host=_unique)
def unique(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Any]:
    return _unique(node, _host_inputs(ctx, node, ins), attrs)


def _corners(boxes: np.ndarray, center: int) -> np.ndarray:
    """Boxes (n, 4) as (y_min, x_min, y_max, x_max)."""
    b = boxes.astype(np.float64)
    if center:
        x, y, w, h = b.T
        return np.stack([y - h / 2, x - w / 2, y + h / 2, x + w / 2], axis=1)
    return np.stack([np.minimum(b[:, 0], b[:, 2]), np.minimum(b[:, 1], b[:, 3]),
                     np.maximum(b[:, 0], b[:, 2]), np.maximum(b[:, 1], b[:, 3])], axis=1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Intersection over union of one box with each of others (0 where either is empty)."""
    hi = np.minimum(box[2:], others[:, 2:])
    lo = np.maximum(box[:2], others[:, :2])
    inter = np.prod(np.clip(hi - lo, 0, None), axis=1)
    area = np.prod(box[2:] - box[:2])
    areas = np.prod(others[:, 2:] - others[:, :2], axis=1)
    union = area + areas - inter
    ok = (inter > 0) & (area > 0) & (areas > 0) & (union > 0)
    return np.where(ok, inter / np.where(ok, union, 1), 0.0)


def _nms(node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    boxes, scores = ins[0], ins[1]
    extra = list(ins[2:]) + [None] * (5 - len(ins))
    limit = int(extra[0].reshape(-1)[0]) if extra[0] is not None and extra[0].size else 0
    iou_max = float(extra[1].reshape(-1)[0]) if extra[1] is not None and extra[1].size else 0.0
    floor = extra[2].reshape(-1)[0] if extra[2] is not None and extra[2].size else None
    picked = []
    for b in range(boxes.shape[0]):
        corners = _corners(boxes[b], attrs.get("center_point_box", 0))
        for c in range(scores.shape[1]):
            s = scores[b, c]
            order = np.lexsort((np.arange(len(s)), -s))       # best first, then lower index
            if floor is not None:
                order = order[s[order] > floor]
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if not kept or not np.any(_iou(corners[i], corners[kept]) > iou_max):
                    kept.append(int(i))
            picked += [(b, c, i) for i in kept]
    return [np.array(picked, np.int64).reshape(-1, 3)]


@op("NonMaxSuppression", host=_nms)
def non_max_suppression(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                        ) -> list[Any]:
    return _nms(node, _host_inputs(ctx, node, ins), attrs)
