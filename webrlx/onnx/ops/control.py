"""Control-flow rows: If (a host-known condition inlines the taken branch, so If on shapes
costs nothing; a device condition runs both branches and selects with where)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import tensor as wt
from ..context import Context, OnnxImportError
from .common import same_dtype
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
    c = cond.reshape(())
    outs = []
    for a, b in zip(then, other):
        ta, tb = same_dtype(ctx.tensor(a), ctx.tensor(b))
        if tuple(ta.shape) != tuple(tb.shape):
            raise OnnxImportError(f"If: branches give shapes {ta.shape} and {tb.shape} on a "
                                  "condition computed on the device")
        outs.append(wt.where(c, ta, tb))
    return outs
