"""Lowering: every graph node becomes kernel calls over virtual buffers (LOWERINGS, by op).

Values are always contiguous. reshape aliases its input's buffer; permute, expand, slice and
concat are strided copies through the elementwise emitter; reductions and row ops move their
axis last with one copy when it is not last already.
"""
from __future__ import annotations

import math
import struct
from typing import Callable, Mapping

import numpy as np

from .. import codegen
from .. import dtype as dt
from ..backends.base import DeviceInfo
from ..codegen import Expr, Strided, grid_1d, storage_type
from ..graph import Graph, Node
from ..kernels import render
from ..ops import BINARY, COMPARE, UNARY
from ..shape import strides_of
from .program import Buf, KernelCall, Output, Program
from .simplify import bind_shapes, fold_constants, live_nodes


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def storage_np(d: dt.DType, f16: bool) -> np.dtype:
    """numpy dtype of d's bytes on the device (bool as u32; f16 as f32 without shader-f16)."""
    if d == dt.bool_:
        return np.dtype(np.uint32)
    if d == dt.float16 and not f16:
        return np.dtype(np.float32)
    return d.np_dtype


class Lowerer:
    """Builds the kernel-call list for one graph under one shape binding."""

    def __init__(self, graph: Graph, shapes: Mapping[int, tuple[int, ...]], info: DeviceInfo
                 ) -> None:
        self.graph = graph
        self.shapes = shapes
        self.info = info
        self.f16 = info.has_f16
        self.max_dim = info.limit("max-compute-workgroups-per-dimension", 65535)
        self.calls: list[KernelCall] = []
        self.values: dict[int, Buf] = {}
        self.consts: list[Buf] = []
        self.node = -1
        self._dummies: list[Buf] = []

    # -- buffers ------------------------------------------------------------------------------
    def nbytes(self, shape: tuple[int, ...], d: dt.DType) -> int:
        return math.prod(shape) * storage_np(d, self.f16).itemsize

    def temp(self, shape: tuple[int, ...], d: dt.DType) -> Buf:
        return Buf(self.nbytes(shape, d), "temp")

    def const(self, value: np.ndarray, d: dt.DType) -> Buf:
        arr = np.ascontiguousarray(np.asarray(value).astype(storage_np(d, self.f16)))
        buf = Buf(arr.nbytes, "const", value=arr)
        self.consts.append(buf)
        return buf

    def dummy(self, slot: int) -> Buf:
        """A tiny unused buffer for an absent optional binding (distinct per slot: no aliasing)."""
        while len(self._dummies) <= slot:
            self._dummies.append(self.const(np.zeros(4, np.float32), dt.float32))
        return self._dummies[slot]

    def T(self, d: dt.DType) -> str:  # noqa: N802 - WGSL's name for the element type
        return storage_type(d, self.f16)

    # -- calls --------------------------------------------------------------------------------
    def emit(self, name: str, source: str, buffers: list[Buf], writes: Buf, params: list[int],
             grid: tuple[int, int, int], overrides: dict | None = None) -> None:
        if writes.nbytes == 0 or 0 in grid:
            return
        seen: set[int] = set()
        for i, b in enumerate(buffers):   # a buffer bound twice would alias: bind a copy
            if b.id in seen:
                buffers[i] = self.copy(b)
            seen.add(b.id)
        self.calls.append(KernelCall(name, source, list(buffers), writes, list(params), grid,
                                     dict(overrides or {}), self.node))

    def grid(self, n: int, wg: int = codegen.WORKGROUP) -> tuple[int, int, int]:
        return grid_1d(n, wg, self.max_dim)

    def copy(self, b: Buf) -> Buf:
        out = Buf(b.nbytes, "temp")
        n = max(b.nbytes // 4, 1)
        self.strided(Expr("load", (0,), dt.uint32), [(b, dt.uint32, 0, (1,))], out,
                     dt.uint32, 0, (1,), (n,), "copy")
        return out

    def strided(self, expr: Expr, reads: list[tuple[Buf, dt.DType, int, tuple[int, ...]]],
                out: Buf, out_dtype: dt.DType, out_offset: int, out_strides: tuple[int, ...],
                shape: tuple[int, ...], name: str) -> None:
        """Emit an elementwise kernel: expr over strided reads, written through out_strides."""
        bufs: list[Buf] = []
        dtypes: list[dt.DType] = []
        views = []
        for b, d, off, st in reads:
            if b not in bufs:
                bufs.append(b)
                dtypes.append(d)
            views.append(Strided(bufs.index(b), d, off, st))
        src, words = codegen.elementwise(expr, dtypes, views,
                                         Strided(len(bufs), out_dtype, out_offset, out_strides),
                                         shape, self.f16)
        self.emit(f"elementwise[{name}]", src, bufs + [out], out, words,
                  self.grid(math.prod(shape)))

    # -- helpers for lowerings ----------------------------------------------------------------
    def shape(self, node_id: int) -> tuple[int, ...]:
        return self.shapes[node_id]

    def broadcast_read(self, node_id: int, out_shape: tuple[int, ...]
                       ) -> tuple[Buf, dt.DType, int, tuple[int, ...]]:
        shape = self.shape(node_id)
        st = strides_of(shape)
        pad = len(out_shape) - len(shape)
        strides = tuple(0 if i < pad or shape[i - pad] == 1 else st[i - pad]
                        for i in range(len(out_shape)))
        return self.values[node_id], self.graph.nodes[node_id].dtype, 0, strides

    def permuted(self, node_id: int, perm: tuple[int, ...]) -> Buf:
        """Return a buffer holding node's value with axes permuted (no copy for identity)."""
        if perm == tuple(range(len(perm))):
            return self.values[node_id]
        shape = self.shape(node_id)
        st = strides_of(shape)
        out_shape = tuple(shape[a] for a in perm)
        d = self.graph.nodes[node_id].dtype
        out = self.temp(out_shape, d)
        self.strided(Expr("load", (0,), d), [(self.values[node_id], d, 0,
                                               tuple(st[a] for a in perm))],
                     out, d, 0, strides_of(out_shape), out_shape, "permute")
        return out

    def rows_last(self, node_id: int, axes: tuple[int, ...]
                  ) -> tuple[Buf, int, int, tuple[int, ...]]:
        """Move `axes` last; return (buffer, rows, row length, permutation used)."""
        shape = self.shape(node_id)
        keep = tuple(i for i in range(len(shape)) if i not in axes)
        perm = keep + tuple(axes)
        n = math.prod(shape[a] for a in axes)
        return self.permuted(node_id, perm), math.prod(shape[k] for k in keep), n, perm

    def unpermute(self, buf: Buf, perm: tuple[int, ...], permuted_shape: tuple[int, ...],
                  d: dt.DType) -> Buf:
        """Copy a buffer laid out as `permuted_shape` back to the original axis order."""
        if perm == tuple(range(len(perm))):
            return buf
        inv = tuple(int(i) for i in np.argsort(perm))
        st = strides_of(permuted_shape)
        shape = tuple(permuted_shape[i] for i in inv)
        out = self.temp(shape, d)
        self.strided(Expr("load", (0,), d), [(buf, d, 0, tuple(st[i] for i in inv))],
                     out, d, 0, strides_of(shape), shape, "permute")
        return out


Lowering = Callable[[Lowerer, Node], Buf]
LOWERINGS: dict[str, Lowering] = {}


def lowering(*ops: str) -> Callable[[Lowering], Lowering]:
    def register(fn: Lowering) -> Lowering:
        for op in ops:
            LOWERINGS[op] = fn
        return fn
    return register


@lowering(*BINARY, *COMPARE, *UNARY, "where", "cast")
def _elementwise(L: Lowerer, node: Node) -> Buf:
    shape = L.shape(node.id)
    reads = [L.broadcast_read(i, shape) for i in node.inputs]
    args = tuple(Expr("load", (k,), L.graph.nodes[i].dtype) for k, i in enumerate(node.inputs))
    attrs = tuple(sorted((k, v) for k, v in node.attrs.items() if k in ("approximate", "dtype")))
    out = L.temp(shape, node.dtype)
    L.strided(Expr(node.op, args, node.dtype, attrs), reads, out, node.dtype, 0,
              strides_of(shape), shape, node.op)
    return out


@lowering("reshape")
def _reshape(L: Lowerer, node: Node) -> Buf:
    return L.values[node.inputs[0]]


@lowering("permute")
def _permute(L: Lowerer, node: Node) -> Buf:
    return L.permuted(node.inputs[0], tuple(node.attrs["axes"]))


@lowering("expand")
def _expand(L: Lowerer, node: Node) -> Buf:
    shape = L.shape(node.id)
    out = L.temp(shape, node.dtype)
    L.strided(Expr("load", (0,), node.dtype), [L.broadcast_read(node.inputs[0], shape)], out,
              node.dtype, 0, strides_of(shape), shape, "expand")
    return out


@lowering("slice")
def _slice(L: Lowerer, node: Node) -> Buf:
    src = L.shape(node.inputs[0])
    st = strides_of(src)
    shape = L.shape(node.id)
    offset = sum(a * s for a, s in zip(node.attrs["starts"], st))
    out = L.temp(shape, node.dtype)
    L.strided(Expr("load", (0,), node.dtype), [(L.values[node.inputs[0]], node.dtype, offset,
                                                 st)],
              out, node.dtype, 0, strides_of(shape), shape, "slice")
    return out


@lowering("concat")
def _concat(L: Lowerer, node: Node) -> Buf:
    shape = L.shape(node.id)
    axis = node.attrs["axis"] % len(shape)
    ost = strides_of(shape)
    out = L.temp(shape, node.dtype)
    at = 0
    for i in node.inputs:
        part = L.shape(i)
        L.strided(Expr("load", (0,), node.dtype), [(L.values[i], node.dtype, 0,
                                                     strides_of(part))],
                  out, node.dtype, at * ost[axis], ost, part, "concat")
        at += part[axis]
    return out


_REDUCE_OP = {"sum": 0, "mean": 0, "max": 1, "min": 2, "prod": 3, "argmax": 4}
_LIMITS = {"f32": ("-3.4028234663852886e38", "3.4028234663852886e38"),
           "i32": ("(-2147483647i - 1i)", "2147483647i"), "u32": ("0u", "0xffffffffu")}


@lowering("sum", "mean", "max", "min", "prod", "argmax")
def _reduce(L: Lowerer, node: Node) -> Buf:
    x = L.graph.nodes[node.inputs[0]]
    rank = len(L.shape(x.id))
    if node.op == "argmax":
        axes: tuple[int, ...] = (node.attrs["axis"] % max(rank, 1),)
    else:
        axes = tuple(range(rank)) if node.attrs["axes"] is None else \
            tuple(sorted(a % rank for a in node.attrs["axes"]))
    buf, rows, n, _ = L.rows_last(x.id, axes)
    acc = "f32" if x.dtype.is_float else x.dtype.wgsl
    out_t = "i32" if node.op == "argmax" else L.T(node.dtype)
    scale = "vals[0] * bitcast<f32>(p.scale)" if acc == "f32" else "vals[0]"
    lo, hi = _LIMITS[acc]
    src = render("reduce/reduce", T=L.T(x.dtype), OUT=out_t, ACC=acc, LOWEST=lo, HIGHEST=hi,
                 SCALE=scale)
    out = L.temp(L.shape(node.id), node.dtype)
    mult = 1.0 / n if node.op == "mean" and n else 1.0
    L.emit(f"reduce[{node.op}]", src, [buf, out], out, [rows, n, 0, f32_bits(mult)],
           L.grid(rows, 1), {"OP": _REDUCE_OP[node.op]})
    return out


def _row_op(L: Lowerer, node: Node, shader: str, name: str, overrides: dict,
            extra: list[Buf] = (), words: list[int] = ()) -> Buf:
    """Run a [rows, n] kernel over node.attrs['axis'] (moved last and back when needed)."""
    shape = L.shape(node.id)
    axis = node.attrs.get("axis", -1) % len(shape)
    buf, rows, n, perm = L.rows_last(node.inputs[0], (axis,))
    out = L.temp(shape, node.dtype)
    src = render(shader, T=L.T(node.dtype), ACC="f32" if node.dtype.is_float else
                 node.dtype.wgsl)
    bufs = [buf, *extra, out]
    grid = L.grid(rows) if shader == "scan/cumsum" else L.grid(rows, 1)
    L.emit(name, src, bufs, out, [rows, n, *words], grid, overrides)
    return L.unpermute(out, perm, tuple(shape[a] for a in perm), node.dtype)


@lowering("softmax", "log_softmax")
def _softmax(L: Lowerer, node: Node) -> Buf:
    return _row_op(L, node, "reduce/softmax", node.op, {"LOG": node.op == "log_softmax"})


@lowering("cumsum")
def _cumsum(L: Lowerer, node: Node) -> Buf:
    return _row_op(L, node, "scan/cumsum", "cumsum", {})


@lowering("layer_norm", "rms_norm")
def _norm(L: Lowerer, node: Node) -> Buf:
    shape = L.shape(node.id)
    x = L.values[node.inputs[0]]
    wb = [L.values[i] for i in node.inputs[1:]]
    w = wb[0] if len(wb) > 0 else L.dummy(0)
    b = wb[1] if len(wb) > 1 else L.dummy(1)
    out = L.temp(shape, node.dtype)
    rows, n = math.prod(shape[:-1]), shape[-1]
    L.emit(node.op, render("norm/layer_norm", T=L.T(node.dtype)), [x, w, b, out], out,
           [rows, n, f32_bits(node.attrs["eps"])], L.grid(rows, 1),
           {"RMS": node.op == "rms_norm", "HAS_W": len(wb) > 0, "HAS_B": len(wb) > 1})
    return out


@lowering("argtopk")
def _argtopk(L: Lowerer, node: Node) -> Buf:
    shape = L.shape(node.id)
    axis = node.attrs["axis"] % len(shape)
    x = L.graph.nodes[node.inputs[0]]
    buf, rows, n, perm = L.rows_last(x.id, (axis,))
    k = node.attrs["k"]
    out = L.temp(shape, node.dtype)
    L.emit("argtopk", render("index/topk", T=L.T(x.dtype)), [buf, out], out, [rows, n, k],
           L.grid(rows, 1))
    return L.unpermute(out, perm, tuple(shape[a] for a in perm), node.dtype)


@lowering("gather", "take_along_axis")
def _gather(L: Lowerer, node: Node) -> Buf:
    xs, ids = L.shape(node.inputs[0]), L.shape(node.inputs[1])
    axis = node.attrs["axis"] % len(xs)
    along = node.op == "take_along_axis"
    outer, inner, d = math.prod(xs[:axis]), math.prod(xs[axis + 1:]), xs[axis]
    nj = ids[axis] if along else math.prod(ids)
    out = L.temp(L.shape(node.id), node.dtype)
    total = outer * nj * inner
    L.emit(node.op, render("index/gather", T=L.T(node.dtype)),
           [L.values[node.inputs[0]], L.values[node.inputs[1]], out], out,
           [total, nj, inner, d, 0], L.grid(total), {"TAKE_ALONG": along})
    return out


_ACT = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4, "sigmoid": 5, "tanh": 6}


@lowering("matmul")
def _matmul(L: Lowerer, node: Node) -> Buf:
    a_id, b_id = node.inputs[0], node.inputs[1]
    a_shape, b_shape = L.shape(a_id), L.shape(b_id)
    a2 = a_shape if len(a_shape) > 1 else (1,) + a_shape
    b2 = b_shape if len(b_shape) > 1 else b_shape + (1,)
    m, k, n = a2[-2], a2[-1], b2[-1]
    a_batch, b_batch = a2[:-2], b2[:-2]
    out_shape = L.shape(node.id)
    batch = math.prod(out_shape) // max(m * n, 1) if m * n else 0
    a_buf, b_buf = L.values[a_id], L.values[b_id]
    if math.prod(b_batch) == 1:            # weight-like B: fold A's batch into M
        m, batch, a_bs, b_bs = m * math.prod(a_batch), 1, 0, 0
    elif math.prod(a_batch) == 1:          # A broadcast over B's batch
        a_bs, b_bs = 0, k * n
    else:
        full = tuple(max(x, y) for x, y in zip((1,) * (len(b_batch) - len(a_batch)) + a_batch,
                                               (1,) * (len(a_batch) - len(b_batch)) + b_batch))
        if (1,) * (len(full) - len(a_batch)) + a_batch != full:
            a_buf = _expand_buf(L, a_id, full + (m, k))
        if (1,) * (len(full) - len(b_batch)) + b_batch != full:
            b_buf = _expand_buf(L, b_id, full + (k, n))
        a_bs, b_bs = m * k, k * n
    has_bias = len(node.inputs) == 3
    bias = L.values[node.inputs[2]] if has_bias else L.dummy(0)
    out = L.temp(out_shape, node.dtype)
    if n % 4 == 0 and m <= 4:           # few rows: bandwidth-bound, split K across threads
        src = render("matmul/gemv", T=L.T(node.dtype))
        name, tile, grid = "gemv", 0, (-(-n // 32), 1, batch)
    elif k % 4 == 0 and n % 4 == 0:     # register-tiled vec4 kernel: 128x128 tiles
        src = render("matmul/matmul_vec4", T=L.T(node.dtype), C=L.T(node.dtype))
        name, tile = "matmul_vec4", 128
    else:
        src, name, tile = render("matmul/matmul", T=L.T(node.dtype)), "matmul", 64
    if tile:
        grid = (-(-n // tile), -(-m // tile), batch)
    L.emit(name, src, [a_buf, b_buf, bias, out], out, [m, n, k, 0, 0, a_bs, b_bs, 0, 0], grid,
           {"HAS_BIAS": has_bias, "ACT": _ACT[node.attrs.get("activation", "none")]})
    return out


def _expand_buf(L: Lowerer, node_id: int, shape: tuple[int, ...]) -> Buf:
    d = L.graph.nodes[node_id].dtype
    out = L.temp(shape, d)
    L.strided(Expr("load", (0,), d), [L.broadcast_read(node_id, shape)], out, d, 0,
              strides_of(shape), shape, "expand")
    return out


@lowering("conv2d")
def _conv2d(L: Lowerer, node: Node) -> Buf:
    (n, c, h, w), (o, _, kh, kw) = L.shape(node.inputs[0]), L.shape(node.inputs[1])
    _, _, oh, ow = shape = L.shape(node.id)
    has_bias = len(node.inputs) == 3
    bias = L.values[node.inputs[2]] if has_bias else L.dummy(0)
    out = L.temp(shape, node.dtype)
    (sh, sw), (ph, pw), (dh, dw) = (node.attrs[k] for k in ("stride", "padding", "dilation"))
    total = math.prod(shape)
    L.emit("conv2d", render("conv/conv2d", T=L.T(node.dtype)),
           [L.values[node.inputs[0]], L.values[node.inputs[1]], bias, out], out,
           [total, c, h, w, o, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, node.attrs["groups"]],
           L.grid(total), {"HAS_BIAS": has_bias})
    return out


@lowering("max_pool2d", "avg_pool2d")
def _pool2d(L: Lowerer, node: Node) -> Buf:
    _, _, h, w = L.shape(node.inputs[0])
    _, _, oh, ow = shape = L.shape(node.id)
    (kh, kw), (sh, sw), (ph, pw) = (node.attrs[k] for k in ("kernel", "stride", "padding"))
    out = L.temp(shape, node.dtype)
    total = math.prod(shape)
    L.emit(node.op, render("conv/pool2d", T=L.T(node.dtype)), [L.values[node.inputs[0]], out],
           out, [total, h, w, oh, ow, kh, kw, sh, sw, ph, pw], L.grid(total),
           {"MAX": node.op == "max_pool2d"})
    return out


@lowering("attention")
def _attention(L: Lowerer, node: Node) -> Buf:
    b, h, lq, d = L.shape(node.inputs[0])
    lk = L.shape(node.inputs[1])[2]
    if d > 256:
        raise ValueError(f"attention: head dim {d} > 256 is not supported")
    has_mask = len(node.inputs) == 4
    mask = L.values[node.inputs[3]] if has_mask else L.dummy(0)
    out = L.temp((b, h, lq, d), node.dtype)
    qs, ks = (h * lq * d, lq * d, d), (h * lk * d, lk * d, d)
    L.emit("attention", render("attention/attention", T=L.T(node.dtype)),
           [*(L.values[i] for i in node.inputs[:3]), mask, out], out,
           [lq, lk, d, f32_bits(node.attrs["scale"]), *qs, *ks, *ks, *qs], (lq, h, b),
           {"HAS_MASK": has_mask, "CAUSAL": bool(node.attrs.get("causal", False))})
    return out


def lower(graph: Graph, outputs: list[int], env: Mapping[str, int], info: DeviceInfo
          ) -> Program:
    """Compile the graph for one symbol binding into a Program (memory not yet planned)."""
    graph.verify()
    live = live_nodes(graph, outputs)
    shapes = bind_shapes(graph, env, live)
    folded = fold_constants(graph, live, shapes)
    # a folded value needs a buffer only where a kernel (or the caller) reads it
    used = set(outputs) | {i for n in graph.nodes if n.id in live and n.id not in folded
                           for i in n.inputs}
    L = Lowerer(graph, shapes, info)
    inputs, params = {}, {}
    for node in graph.nodes:
        if node.id not in live or (node.id in folded and node.id not in used):
            continue
        L.node = node.id
        shape = shapes[node.id]
        if node.op == "input":
            buf = Buf(L.nbytes(shape, node.dtype), "input", name=node.name)
            inputs[node.name] = (buf, shape, node.dtype)
        elif node.op == "param":
            buf = Buf(L.nbytes(shape, node.dtype), "param", name=node.name)
            params[node.name] = buf
        elif node.id in folded:
            buf = L.const(folded[node.id], node.dtype)
        else:
            buf = LOWERINGS[node.op](L, node)
        L.values[node.id] = buf
    outs = [Output(L.values[i], shapes[i], graph.nodes[i].dtype) for i in outputs]
    return Program(L.calls, outs, inputs, params, L.consts)
