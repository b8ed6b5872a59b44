"""Training-loss rows: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (class weights,
ignore_index, reductions none/sum/mean, N-d inputs (N, C, d1, ...), the log_prob output),
composed from log_softmax, take_along_axis, gather, where and sums."""
from __future__ import annotations

from typing import Any

from ... import tensor as wt
from ...tensor import Tensor
from ..context import Context, OnnxImportError
from .common import lift
from .registry import op


def _nll(ctx: Context, node: Any, logp: Tensor, target: Tensor, weight: Any,
         attrs: dict[str, Any]) -> Tensor:
    """The loss of log-probabilities logp (N, C, d...) at class indices target (N, d...)."""
    if logp.ndim < 2 or target.ndim != logp.ndim - 1:
        raise OnnxImportError(f"{node.op_type}: input (N, C, d...) and target (N, d...) "
                              f"expected, got {logp.shape} and {target.shape}")
    reduction = attrs.get("reduction", b"mean").decode()
    ii = attrs.get("ignore_index")
    target = target.cast("int32")
    keep = None if ii is None else target != int(ii)
    # ignored targets may be out of [0, C): read class 0 there, then weigh it 0
    safe = target if keep is None else wt.where(keep, target, 0)
    picked = logp.take_along_axis(safe.unsqueeze(1), axis=1).reshape(target.shape)
    w = None
    if weight is not None:
        w = ctx.tensor(weight).cast(logp.dtype).gather(safe, axis=0)
        if keep is not None:
            w = wt.where(keep, w, 0.0)
    elif keep is not None:
        w = keep.cast(logp.dtype)
    loss = -picked if w is None else -(picked * w)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction != "mean":
        raise OnnxImportError(f"{node.op_type}: unknown reduction {reduction!r}")
    return loss.mean() if w is None else loss.sum() / w.sum()


@op("NegativeLogLikelihoodLoss", since=12)
def nll_loss(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]) -> list[Tensor]:
    x, target = lift(ctx, ins[0], ins[1])
    weight = ins[2] if len(ins) > 2 else None
    return [_nll(ctx, node, x, target, weight, attrs)]


@op("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy(ctx: Context, node: Any, ins: list[Any], attrs: dict[str, Any]
                          ) -> list[Tensor]:
    x, target = lift(ctx, ins[0], ins[1])
    weight = ins[2] if len(ins) > 2 else None
    logp = x.log_softmax(1)
    outs = [_nll(ctx, node, logp, target, weight, attrs)]
    return outs + [logp] if len(node.outputs) > 1 else outs
