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


def _conv_fields(node: Node, dy: tuple[int, ...], x_hw: tuple[int, ...], c: int,
                 k: tuple[int, ...]) -> dict[str, int]:
    _, o, oh, ow = dy
    (sh, sw), (ph, pw), (dh, dw) = (node.attrs["stride"], node.attrs["padding"],
                                    node.attrs["dilation"])
    return {"C": c, "H": x_hw[0], "W": x_hw[1], "O": o, "OH": oh, "OW": ow, "KH": k[0],
            "KW": k[1], "sh": sh, "sw": sw, "ph": ph, "pw": pw, "dh": dh, "dw": dw,
            "groups": node.attrs["groups"]}


@lowering("conv2d_grad_input")
def _conv2d_grad_input(L: EmitContext, node: Node) -> Buf:
    dy, w = L.shape(node.inputs[0]), L.shape(node.inputs[1])
    shape = L.shape(node.id)
    out = L.temp(shape, node.dtype)
    total = math.prod(shape)
    L.emit(kernel("conv/conv2d_grad_input"), {"dy": L.buf(node.inputs[0]),
                                              "w": L.buf(node.inputs[1]), "dx": out},
           {"total": total, **_conv_fields(node, dy, shape[2:], shape[1], w[2:])},
           L.grid(total), name="conv2d_grad_input")
    return out


@lowering("conv2d_grad_weight")
def _conv2d_grad_weight(L: EmitContext, node: Node) -> Buf:
    dy, x = L.shape(node.inputs[0]), L.shape(node.inputs[1])
    shape = L.shape(node.id)
    out = L.temp(shape, node.dtype)
    total = math.prod(shape)
    L.check_loop(node, dy[0] * dy[2] * dy[3])
    L.emit(kernel("conv/conv2d_grad_weight"), {"dy": L.buf(node.inputs[0]),
                                               "x": L.buf(node.inputs[1]), "dwt": out},
           {"total": total, "N": dy[0], **_conv_fields(node, dy, x[2:], x[1], shape[2:])},
           L.grid(total), name="conv2d_grad_weight")
    return out


@lowering("max_pool2d_grad", "avg_pool2d_grad")
def _pool2d_grad(L: EmitContext, node: Node) -> Buf:
    dy, x = L.shape(node.inputs[0]), L.shape(node.inputs[1])
    out = L.temp(x, node.dtype)
    (kh, kw), (sh, sw), (ph, pw) = (node.attrs["kernel"], node.attrs["stride"],
                                    node.attrs["padding"])
    total = math.prod(x)
    L.emit(kernel("conv/pool2d_grad"), {"dy": L.buf(node.inputs[0]),
                                        "x": L.buf(node.inputs[1]), "dx": out},
           {"total": total, "H": x[2], "W": x[3], "OH": dy[2], "OW": dy[3], "KH": kh, "KW": kw,
            "sh": sh, "sw": sw, "ph": ph, "pw": pw}, L.grid(total),
           {"MAX": node.op == "max_pool2d_grad"}, name=node.op)
    return out
