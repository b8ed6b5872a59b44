"""Lowering rules of NCHW convolution and pooling: one thread per output element."""
from __future__ import annotations

import math

from ..graph import Node
from ..kernels import kernel
from .emit import EmitContext
from .program import Buf
from .registry import lowering


def _geometry(L: EmitContext, node: Node) -> dict[str, int]:
    """The window fields conv2d and pool2d share: sizes, stride and padding."""
    _, _, h, w = L.shape(node.inputs[0])
    _, _, oh, ow = shape = L.shape(node.id)
    (sh, sw), (ph, pw) = node.attrs["stride"], node.attrs["padding"]
    return {"total": math.prod(shape), "H": h, "W": w, "OH": oh, "OW": ow, "sh": sh, "sw": sw,
            "ph": ph, "pw": pw}


@lowering("conv2d")
def _conv2d(L: EmitContext, node: Node) -> Buf:
    c = L.shape(node.inputs[0])[1]
    o, _, kh, kw = L.shape(node.inputs[1])
    has_bias = len(node.inputs) == 3
    out = L.temp(L.shape(node.id), node.dtype)
    dh, dw = node.attrs["dilation"]
    geo = _geometry(L, node)
    L.emit(kernel("conv/conv2d", T=L.T(node.dtype)),
           {"x": L.buf(node.inputs[0]), "w": L.buf(node.inputs[1]),
            "bias": L.buf(node.inputs[2]) if has_bias else L.dummy(0), "out": out},
           {**geo, "C": c, "O": o, "KH": kh, "KW": kw, "dh": dh, "dw": dw,
            "groups": node.attrs["groups"]},
           L.grid(geo["total"]), {"HAS_BIAS": has_bias}, name="conv2d")
    return out


@lowering("max_pool2d", "avg_pool2d")
def _pool2d(L: EmitContext, node: Node) -> Buf:
    kh, kw = node.attrs["kernel"]
    out = L.temp(L.shape(node.id), node.dtype)
    geo = _geometry(L, node)
    L.emit(kernel("conv/pool2d", T=L.T(node.dtype)), {"x": L.buf(node.inputs[0]), "out": out},
           {**geo, "KH": kh, "KW": kw}, L.grid(geo["total"]),
           {"MAX": node.op == "max_pool2d"}, name=node.op)
    return out
