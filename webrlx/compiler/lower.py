"""Lowering: every graph node becomes kernel calls over virtual buffers (LOWERINGS, by op).

Elementwise ops and views (permute, expand, slice) stay lazy while they have one consumer
that inlines them (INLINES), so chains fuse into one generated kernel. reshape aliases a
contiguous buffer; reductions and row ops move their axis last with one copy when needed.
Pattern fusions (fuse.py): matmul + bias + activation epilogues, residual add + norm, and
attention writing straight into the (batch, seq, heads, dim) layout its consumer wants.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping

from ..backends.base import DeviceInfo
from ..codegen import Expr
from .. import dtype as dt
from ..graph import SOURCES, Graph, Node
from ..kernels import render
from ..ops import BINARY, COMPARE, UNARY
from ..shape import strides_of
from . import fuse
from .lowerer import Lazy, Lowerer, f32_bits, storage_np
from .program import Buf, Output, Program, Variant
from .simplify import bind_shapes, fold_constants, live_nodes

__all__ = ["LOWERINGS", "lower", "storage_np", "f32_bits"]
ELEMENTWISE = (*BINARY, *COMPARE, *UNARY, "where", "cast")
# ops whose lowering reads a lazy input (inlining it); others materialize their inputs
INLINES = frozenset((*ELEMENTWISE, "permute", "expand", "slice", "concat", "attention"))


Lowering = Callable[[Lowerer, Node], "Buf | None"]   # None: the value stays lazy
LOWERINGS: dict[str, Lowering] = {}


def lowering(*ops: str) -> Callable[[Lowering], Lowering]:
    def register(fn: Lowering) -> Lowering:
        for op in ops:
            LOWERINGS[op] = fn
        return fn
    return register


@lowering(*ELEMENTWISE)
def _elementwise(L: Lowerer, node: Node) -> Buf | None:
    shape = L.shape(node.id)
    leaves: list = []
    args = tuple(L.leaves_into(i, shape, leaves) for i in node.inputs)
    attrs = tuple(sorted((k, v) for k, v in node.attrs.items() if k in ("approximate", "dtype")))
    return L.settle(node.id, Lazy(Expr(node.op, args, node.dtype, attrs), leaves, shape,
                                  node.dtype))


@lowering("reshape")
def _reshape(L: Lowerer, node: Node) -> Buf:
    return L.buf(node.inputs[0])


def _restrided(L: Lowerer, node: Node, fn: Callable) -> Buf | None:
    """A view op: the input's leaves get new (offset, strides) over this node's shape."""
    src = node.inputs[0]
    lz = L.as_lazy(src)
    L.lazy.pop(src, None)
    leaves = [(b, d, *fn(off, st)) for b, d, off, st in lz.leaves]
    return L.settle(node.id, Lazy(lz.expr, leaves, L.shape(node.id), node.dtype))


@lowering("permute")
def _permute(L: Lowerer, node: Node) -> Buf | None:
    if node.id in L.prelowered:
        return L.prelowered.pop(node.id)
    axes = tuple(node.attrs["axes"])
    return _restrided(L, node, lambda off, st: (off, tuple(st[a] for a in axes)))


@lowering("expand")
def _expand(L: Lowerer, node: Node) -> Buf | None:
    src_shape, shape = L.shape(node.inputs[0]), L.shape(node.id)
    return _restrided(L, node, lambda off, st: (off, fuse.broadcast(src_shape, st, shape)))


@lowering("slice")
def _slice(L: Lowerer, node: Node) -> Buf | None:
    starts = node.attrs["starts"]
    return _restrided(L, node, lambda off, st: (off + sum(a * s for a, s in zip(starts, st)),
                                                st))


@lowering("concat")
def _concat(L: Lowerer, node: Node) -> Buf:
    shape = L.shape(node.id)
    axis = node.attrs["axis"] % len(shape)
    ost = strides_of(shape)
    out = L.temp(shape, node.dtype)
    at = 0
    for i in node.inputs:
        lz = L.as_lazy(i)
        L.lazy.pop(i, None)
        L.strided(lz.expr, lz.leaves, out, node.dtype, at * ost[axis], ost, lz.shape, "concat")
        at += lz.shape[axis]
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


def rows_per_workgroup(n: int) -> int:
    """Rows a ROW_REDUCE kernel handles per 256-thread workgroup: 8 (32 threads each) for
    rows of up to 1024 elements, else 1."""
    return 8 if n <= 1024 else 1


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
    if shader == "scan/cumsum":         # one thread per row
        grid = L.grid(rows)
    else:                               # ROW_REDUCE kernels: RPW rows per workgroup
        rpw = rows_per_workgroup(n)
        grid, overrides = L.grid(-(-rows // rpw), 1), {**overrides, "RPW": rpw}
    L.emit(name, src, bufs, out, [rows, n, *words], grid, overrides)
    return L.unpermute(out, perm, tuple(shape[a] for a in perm), node.dtype)


@lowering("softmax", "log_softmax")
def _softmax(L: Lowerer, node: Node) -> Buf:
    return _row_op(L, node, "reduce/softmax", node.op, {"LOG": node.op == "log_softmax"},
                   extra=[L.dummy(0)], words=[0, 0, 0, f32_bits(1.0)])


@lowering("cumsum")
def _cumsum(L: Lowerer, node: Node) -> Buf:
    return _row_op(L, node, "scan/cumsum", "cumsum", {})


@lowering("layer_norm", "rms_norm")
def _norm(L: Lowerer, node: Node) -> Buf:
    shape = L.shape(node.id)
    residual = L.fusions.residuals.get(node.id)
    x, r = (L.buf(i) for i in residual) if residual else (L.buf(node.inputs[0]), L.dummy(0))
    wb = [L.buf(i) for i in node.inputs[1:]]
    w = wb[0] if len(wb) > 0 else L.dummy(1)
    b = wb[1] if len(wb) > 1 else L.dummy(2)
    out = L.temp(shape, node.dtype)
    rows, n = math.prod(shape[:-1]), shape[-1]
    name = f"{'add+' if residual else ''}{node.op}"
    rpw = rows_per_workgroup(n)
    L.emit(name, render("norm/layer_norm", T=L.T(node.dtype)), [x, r, w, b, out], out,
           [rows, n, f32_bits(node.attrs["eps"])], L.grid(-(-rows // rpw), 1),
           {"RMS": node.op == "rms_norm", "HAS_W": len(wb) > 0, "HAS_B": len(wb) > 1,
            "HAS_RES": residual is not None, "RPW": rpw})
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
           [L.buf(node.inputs[0]), L.buf(node.inputs[1]), out], out,
           [total, nj, inner, d, 0], L.grid(total), {"TAKE_ALONG": along})
    return out


BIG_GRID = 128   # 128x128 tiles only when they still give this many workgroups
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
    a_buf, b_buf = L.buf(a_id), L.buf(b_id)
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
    ep = L.fusions.epilogues.get(node.id)
    bias_id = node.inputs[2] if len(node.inputs) == 3 else ep.bias if ep else None
    has_bias = bias_id is not None
    bias = L.buf(bias_id) if has_bias else L.dummy(0)
    act = ep.activation if ep else node.attrs.get("activation", "none")
    out = L.temp(out_shape, node.dtype)
    acc_t = "f32" if node.attrs.get("accumulate") == "float32" else L.T(node.dtype)
    if ep:
        L.values[ep.last] = out
    emit_matmul(L, a_buf, b_buf, bias if has_bias else None, out, (m, n, k, batch),
                (a_bs, b_bs), node.dtype, acc_t, act)
    return out


def emit_matmul(L: Lowerer, a: Buf, b: Buf, bias: Buf | None, out: Buf,
                mnkb: tuple[int, int, int, int], batch_strides: tuple[int, int],
                dtype: dt.DType, acc_t: str, act: str = "none") -> None:
    """Emit out[z] = act(a[z] @ b[z] + bias) for z < batch: a [m, k], b [k, n] contiguous,
    batch z at element offsets z * batch_strides; picks gemv, tiled vec4 (autotuned) or
    scalar kernels by shape."""
    m, n, k, batch = mnkb
    a_bs, b_bs = batch_strides
    t = L.T(dtype)
    overrides = {"HAS_BIAS": bias is not None, "ACT": _ACT[act]}
    words = [m, n, k, 0, 0, a_bs, b_bs, 0, 0]
    bufs = [a, b, bias if bias is not None else L.dummy(0), out]
    if n % 4 == 0 and m <= 4:           # few rows: bandwidth-bound, split K across threads
        L.emit("gemv", render("matmul/gemv", T=t), bufs, out, words,
               (-(-n // 32), 1, batch), {**overrides, "ROWS": m})
    elif k % 4 == 0 and n % 4 == 0:     # register-tiled vec4 kernels: 128 or 64 square tiles
        tiles = {s: Variant(f"matmul_vec4{'' if s == 128 else '_64'}",
                            render(f"matmul/matmul_vec4{'' if s == 128 else '_64'}", T=t,
                                   C=acc_t),
                            (-(-n // s), -(-m // s), batch), overrides) for s in (128, 64)}
        # default: 128x128 (8x8 per thread) only when it still gives enough workgroups
        first = 128 if -(-m // 128) * -(-n // 128) * batch >= BIG_GRID else 64
        pick, other = tiles[first], tiles[192 - first]
        L.emit(pick.name, pick.source, bufs, out, words, pick.grid, overrides)
        if L.calls and L.calls[-1].writes is out:
            L.calls[-1].variants = [other]
            L.calls[-1].tune_key = f"matmul {acc_t}/{t} {m}x{n}x{k}x{batch}"
    else:
        L.emit("matmul", render("matmul/matmul", T=t), bufs, out, words,
               (-(-n // 64), -(-m // 64), batch), overrides)


def _expand_buf(L: Lowerer, node_id: int, shape: tuple[int, ...]) -> Buf:
    leaves: list = []
    expr = L.leaves_into(node_id, shape, leaves)
    out = L.temp(shape, L.dtype(node_id))
    L.strided(expr, leaves, out, L.dtype(node_id), 0, strides_of(shape), shape, "expand")
    return out


@lowering("conv2d")
def _conv2d(L: Lowerer, node: Node) -> Buf:
    (_, c, h, w), (o, _, kh, kw) = L.shape(node.inputs[0]), L.shape(node.inputs[1])
    _, _, oh, ow = shape = L.shape(node.id)
    has_bias = len(node.inputs) == 3
    bias = L.buf(node.inputs[2]) if has_bias else L.dummy(0)
    out = L.temp(shape, node.dtype)
    (sh, sw), (ph, pw), (dh, dw) = (node.attrs[k] for k in ("stride", "padding", "dilation"))
    total = math.prod(shape)
    L.emit("conv2d", render("conv/conv2d", T=L.T(node.dtype)),
           [L.buf(node.inputs[0]), L.buf(node.inputs[1]), bias, out], out,
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
    L.emit(node.op, render("conv/pool2d", T=L.T(node.dtype)), [L.buf(node.inputs[0]), out],
           out, [total, h, w, oh, ow, kh, kw, sh, sw, ph, pw], L.grid(total),
           {"MAX": node.op == "max_pool2d"})
    return out


def lower(graph: Graph, outputs: list[int], env: Mapping[str, int], info: DeviceInfo,
          fuse_ops: bool = True) -> Program:
    """Compile the graph for one symbol binding into a Program (memory not yet planned).

    fuse_ops=False lowers every node to its own kernel(s): the baseline fusion is measured
    against, and a debugging aid.
    """
    graph.verify()
    live = live_nodes(graph, outputs)
    shapes = bind_shapes(graph, env, live)
    folded = fold_constants(graph, live, shapes)
    # a folded value needs a buffer only where a kernel (or the caller) reads it
    used = set(outputs) | {i for n in graph.nodes if n.id in live and n.id not in folded
                           for i in n.inputs}
    skip = {i for i in folded if i not in used}
    users = fuse.consumers_of(graph, live, skip)
    outs_set = set(outputs)
    fusions = fuse.find_fusions(graph, live, users, outs_set, shapes) if fuse_ops else \
        fuse.Fusions()
    L = Lowerer(graph, shapes, info, users, outs_set, fusions, fuse_ops)
    inputs, params = {}, {}
    # sources first: a fused epilogue may read a param declared after its matmul
    order = sorted(graph.nodes, key=lambda n: (n.op not in SOURCES and n.id not in folded, n.id))
    for node in order:
        if node.id not in live or node.id in skip or node.id in fusions.absorbed:
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
        if buf is not None:
            L.values[node.id] = buf
    outs = [Output(L.buf(i), shapes[i], graph.nodes[i].dtype) for i in outputs]
    return Program(L.calls, outs, inputs, params, L.consts)


from . import lower_attention  # noqa: E402,F401 - registers the attention lowering
