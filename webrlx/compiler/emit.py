"""EmitContext: the state of lowering one graph under one shape binding — virtual buffers, the
kernel calls emitted so far, and lazy values. Lowering rules (lower_*.py) call into it.

A value is either materialized (a Buf holding it contiguously) or lazy: an expression over
strided leaves, inlined into its single consumer. Elementwise chains, broadcasts, permutes,
expands and slices thus fuse into one generated kernel, and a permuted view can feed a
kernel that takes strides (attention) without a copy.
"""
from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import codegen
from .. import dtype as dt
from .. import kernels as kernel_files
from ..codegen import Expr, Strided, grid_1d, storage_type
from ..device_info import DeviceInfo
from ..graph import Graph
from ..kernels import Kernel, KernelArgumentError
from ..shape import broadcast_strides, strides_of
from . import split
from .fuse import Fusions
from .program import Buf, KernelCall, Variant

Leaf = tuple[Buf, dt.DType, int, tuple[int, ...]]   # buffer, dtype, offset, strides
MAX_FUSED_BUFFERS = 8   # storage bindings of one fused kernel (Chromium allows 10 per stage)
LAYOUT_COPIES = True    # bare copies of 4-byte elements: vec4 moves or transposing tiles


@dataclass
class Lazy:
    """An unmaterialized value: expr evaluated per element of `shape` over `leaves`."""
    expr: Expr
    leaves: list[Leaf]
    shape: tuple[int, ...]
    dtype: dt.DType

    def view(self) -> Leaf | None:
        """The single strided leaf this value is, if it is a pure view (no arithmetic)."""
        if self.expr.op == "load" and self.leaves[0][1] == self.dtype:
            return self.leaves[0]
        return None


def _shift(e: Expr, k: int) -> Expr:
    """Renumber an expression's loads by k (when leaves are appended to another list)."""
    if e.op == "load":
        return Expr("load", (e.args[0] + k,), e.dtype)
    return Expr(e.op, tuple(_shift(a, k) for a in e.args), e.dtype, e.attrs)


def transpose_tiles(view: Strided, out: Strided, shape: tuple[int, ...]
                    ) -> tuple[dict[str, int], tuple[int, int, int]] | None:
    """(params, grid) of index/transpose_tiles for a bare copy whose out rows walk the input
    contiguously and whose out columns do not (a transposing permute such as attention's K
    transposed), written into contiguous out rows, with at most two batch dims left after
    merging; None otherwise (the per-element kernel takes it)."""
    if len(shape) < 2 or min(shape[-2:]) < 8 or view.strides[-2] != 1 or \
            view.strides[-1] == 1 or out.strides[-1] != 1 or out.strides[-2] != shape[-1]:
        return None
    lead, (vs, os_) = codegen.merge_dims(shape[:-2], [view.strides[:-2], out.strides[:-2]])
    if len(lead) > 2:
        return None
    if len(lead) == 1:
        lead, vs, os_ = (1, lead[0]), (0, vs[0]), (0, os_[0])
    rows, cols = shape[-2], shape[-1]
    params = {"R": rows, "C": cols, "nb1": lead[1], "sc": view.strides[-1],
              "sb0": vs[0], "sb1": vs[1], "x_off": view.offset, "ob0": os_[0], "ob1": os_[1],
              "o_off": out.offset}
    return params, (-(-cols // 32), -(-rows // 32), lead[0] * lead[1])


@dataclass(frozen=True)
class PartsSum:
    """A split-K matmul's value left as its stacked partial products (lower_matmul._split_k):
    value = sum over q < pieces of parts[q * stride :][: stride], the bias in part 0. The
    value is also in `EmitContext.lazy`, so any reader but the norm that sums the parts itself
    (lower_rows._norm) materializes it with the same sum kernel as before."""
    parts: Buf
    pieces: int
    stride: int                 # elements between parts


class EmitContext:
    """Builds the kernel-call list for one graph under one shape binding."""

    def __init__(self, graph: Graph, shapes: Mapping[int, tuple[int, ...]], info: DeviceInfo,
                 consumers: Mapping[int, list[int]], outputs: set[int], fusions: Fusions,
                 fuse_ops: bool = True, inlines: Collection[str] = frozenset()) -> None:
        self.graph = graph
        self.shapes = shapes
        self.info = info
        self.f16 = info.has_f16
        self.max_dim = info.limit("max-compute-workgroups-per-dimension", 65535)
        # threads per workgroup of the one-thread-per-element kernels (their WG override)
        self.wg = min(codegen.WORKGROUP, info.max_workgroup_invocations,
                      info.limit("max-compute-workgroup-size-x", codegen.WORKGROUP))
        # the most bytes one binding may bind, and where a window of a bigger buffer may start
        self.limit = info.max_binding_size
        self.align = max(info.storage_alignment, 16)
        self.consumers = consumers
        self.outputs = outputs
        self.fusions = fusions                   # pattern fusions found on the graph
        self.fuse_ops = fuse_ops                 # False: no value stays lazy
        self.inlines = inlines                   # ops whose lowering reads lazy inputs
        self.prelowered: dict[int, Buf] = {}     # node id -> value another lowering produced
        self.calls: list[KernelCall] = []
        self.values: dict[int, Buf] = {}
        self.lazy: dict[int, Lazy] = {}
        self.consts: list[Buf] = []
        self.tables: dict[tuple, Buf] = {}       # read-only consts shared by calls (rope)
        # (x's buffer id, K, group) -> x's rows as int8 and their scales, shared by the int8
        # prefills that read the same x (q, k, v; gate, up: lower_quant._mmq)
        self.rows_i8: dict[tuple[Any, ...], tuple[Buf, Buf]] = {}
        # buffer id -> its rows as int8 x of the int8 decode GEMVs (words, scales), where the
        # kernel that made the value wrote them that way (compiler/lower_int8_decode.py)
        self.x8: dict[int, tuple[Buf, Buf]] = {}
        # cached_attention id -> (its per-chunk partials, its params) where the consumer GEMV
        # merges them (fuse._attention_combine) instead of an attn_combine dispatch
        self.attn_partials: dict[int, tuple[Buf, dict[str, Any]]] = {}
        # node id -> its value as a split-K matmul's partial products, where the norm reading
        # it sums them (lower_matmul._split_k, lower_rows._norm); the value is lazy meanwhile
        self.parts_sums: dict[int, PartsSum] = {}
        self.node = -1
        self._dummies: list[Buf] = []

    # -- buffers ------------------------------------------------------------------------------
    def nbytes(self, shape: tuple[int, ...], d: dt.DType) -> int:
        return math.prod(shape) * dt.storage_np(d, self.f16).itemsize

    def temp(self, shape: tuple[int, ...], d: dt.DType) -> Buf:
        return Buf(self.nbytes(shape, d), "temp")

    def const(self, value: np.ndarray, d: dt.DType) -> Buf:
        arr = np.asarray(np.asarray(value).astype(dt.storage_np(d, self.f16)), order="C")
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

    # -- values -------------------------------------------------------------------------------
    def shape(self, node_id: int) -> tuple[int, ...]:
        return self.shapes[node_id]

    def dtype(self, node_id: int) -> dt.DType:
        return self.graph.nodes[node_id].dtype

    def buf(self, node_id: int) -> Buf:
        """Return the buffer holding node's value, materializing a lazy value first."""
        if node_id in self.lazy:
            lz = self.lazy.pop(node_id)
            view = lz.view()
            if view is not None and view[2] == 0 and view[3] == strides_of(lz.shape):
                self.values[node_id] = view[0]          # already contiguous: no copy
            else:
                out = self.temp(lz.shape, lz.dtype)
                self.strided(lz.expr, lz.leaves, out, lz.dtype, 0, strides_of(lz.shape),
                             lz.shape, self.graph.nodes[node_id].op)
                self.values[node_id] = out
        return self.values[node_id]

    def as_lazy(self, node_id: int) -> Lazy:
        """Return node's value as an expression (a single contiguous leaf if materialized)."""
        if node_id in self.lazy:
            return self.lazy[node_id]
        shape, d = self.shape(node_id), self.dtype(node_id)
        return Lazy(Expr("load", (0,), d), [(self.values[node_id], d, 0, strides_of(shape))],
                    shape, d)

    def fusable(self, node_id: int) -> bool:
        """True when node's value may stay lazy: one consumer that can inline it."""
        users = self.consumers.get(node_id, [])
        if not self.fuse_ops or node_id in self.outputs or len(users) != 1:
            return False
        return self.graph.nodes[users[0]].op in self.inlines

    def settle(self, node_id: int, lz: Lazy) -> Buf | None:
        """Keep lz lazy when the node is fusable; otherwise materialize it now."""
        self.lazy[node_id] = lz
        if self.fusable(node_id):
            return None
        return self.buf(node_id)

    def leaves_into(self, node_id: int, out_shape: tuple[int, ...], leaves: list[Leaf]
                    ) -> Expr:
        """Append node's leaves (broadcast to out_shape) to `leaves`; return its expression."""
        lz = self.as_lazy(node_id)
        if node_id in self.lazy:
            bufs = {b.id for b, *_ in leaves} | {b.id for b, *_ in lz.leaves}
            if len(bufs) > MAX_FUSED_BUFFERS:     # too many bindings: materialize this input
                self.buf(node_id)
                lz = self.as_lazy(node_id)
            else:
                del self.lazy[node_id]
        k = len(leaves)
        for b, d, off, st in lz.leaves:
            leaves.append((b, d, off, broadcast_strides(lz.shape, st, out_shape)))
        return _shift(lz.expr, k)

    # -- calls --------------------------------------------------------------------------------
    def emit(self, kernel: Kernel, bindings: Mapping[str, Buf], params: Mapping[str, Any],
             grid: tuple[int, int, int], overrides: Mapping[str, Any] | None = None, *,
             name: str | None = None, variants: Sequence[Variant] = (),
             tune_key: str = "", windows: Mapping[str, split.Window] | None = None,
             read_only: Sequence[str] = ()) -> None:
        """Append a call of kernel with named bindings and params (checked against what the
        shader declares); the last declared storage binding is the one it writes.

        Variants (other kernels with the same signature) let the autotuner pick by tune_key.
        windows: binding name -> the window of its buffer bound instead of the whole (split.py).
        read_only: bindings the kernel only reads, which may share one buffer where the device
        allows it (DeviceInfo.shared_read_bindings; e.g. attention's q, k and v heads of one
        fused projection); any other buffer bound twice is copied.
        """
        overrides = dict(overrides or {})
        if "WG" in dict(kernel.sig.overrides) and "WG" not in overrides:
            overrides["WG"] = self.wg        # threads per workgroup, from the adapter's limits
        kernel.check_overrides(overrides)
        buffers, words = kernel.pack(bindings, params)
        for v in variants:      # same bindings and uniform; overrides are each variant's own
            if v.signature is None or (v.signature.bindings, v.signature.params) != \
                    (kernel.sig.bindings, kernel.sig.params):
                raise KernelArgumentError(f"kernel {kernel.name!r}: variant {v.name!r} "
                                          "declares other bindings or params")
        writes = buffers[-1]
        if writes.nbytes == 0 or 0 in grid:
            return
        names = kernel.sig.bindings
        seen: dict[int, str] = {}
        for i, b in enumerate(buffers):   # a buffer bound twice would alias: bind a copy
            if b.id in seen and not (names[i] in read_only and seen[b.id] in read_only
                                     and self.info.shared_read_bindings):
                buffers[i] = self.copy(b)
            seen.setdefault(b.id, names[i])
        self.calls.append(KernelCall(name or kernel.name, kernel.source, buffers, writes, words,
                                     grid, overrides, self.node, list(variants), tune_key,
                                     shader=kernel.name, args=dict(params),
                                     binding_names=names,
                                     windows={names.index(k): (w.start, w.size)
                                              for k, w in (windows or {}).items()}))

    def over_limit(self, *bufs: Buf | None) -> bool:
        """True when a buffer is bigger than one binding may be (kernels must bind windows)."""
        return any(b is not None and b.nbytes > self.limit for b in bufs)

    def place(self, spans: Mapping[str, tuple[str, Buf, int, int, int]]
              ) -> tuple[dict[str, split.Window], dict[str, int]]:
        """Windows and offset params of one piece of a split kernel (split.py).

        spans: binding -> (its offset param, buffer, first element, end element, item size).
        A buffer over the binding limit gets a window holding [first, end) and its offset
        param counts from the window's start; the others are bound whole at `first`."""
        wins: dict[str, split.Window] = {}
        offs: dict[str, int] = {}
        for binding, (param, buf, lo, hi, isz) in spans.items():
            offs[param] = lo
            if self.over_limit(buf):
                wins[binding] = split.window(buf.nbytes, lo * isz, hi * isz, self.align)
                offs[param] -= wins[binding].shift(isz)
        return wins, offs

    def check_loop(self, node: Any, iterations: int) -> None:
        """Refuse a kernel whose threads would loop more often than the driver allows (it
        would end the loop early and give a wrong result without a word)."""
        cap = self.info.loop_cap
        if cap is not None and iterations > cap:
            raise ValueError(f"{node.op}: its kernel would loop {iterations} times per thread "
                             f"here; {self.info.name} silently stops a loop after {cap}. "
                             f"Use shorter rows on this device")

    def itemsize(self, d: dt.DType) -> int:
        return dt.storage_np(d, self.f16).itemsize

    def grid(self, n: int, wg: int | None = None) -> tuple[int, int, int]:
        """Workgroups covering n items at wg per workgroup (default: the adapter's WG)."""
        return grid_1d(n, wg or self.wg, self.max_dim)

    def copy(self, b: Buf) -> Buf:
        out = Buf(b.nbytes, "temp")
        n = max(b.nbytes // 4, 1)
        self.strided(Expr("load", (0,), dt.uint32), [(b, dt.uint32, 0, (1,))], out,
                     dt.uint32, 0, (1,), (n,), "copy")
        return out

    def strided(self, expr: Expr, reads: list[Leaf], out: Buf, out_dtype: dt.DType,
                out_offset: int, out_strides: tuple[int, ...], shape: tuple[int, ...],
                name: str) -> None:
        """Emit an elementwise kernel: expr over strided reads, written through out_strides."""
        bufs: list[Buf] = []
        dtypes: list[dt.DType] = []
        views = []
        for b, d, off, st in reads:
            if b not in bufs:
                bufs.append(b)
                dtypes.append(d)
            views.append(Strided(bufs.index(b), d, off, st))
        ov = Strided(len(bufs), out_dtype, out_offset, out_strides)
        bindings = {f"b{k}": b for k, b in enumerate(bufs + [out])}
        if not self.over_limit(*bufs, out):
            # a bare copy of 4-byte elements: vec4 moves where the last dim stays contiguous,
            # 32x32 tiles where the copy transposes it
            bare = (LAYOUT_COPIES and expr.op == "load" and len(views) == 1
                    and views[0].dtype == out_dtype and self.itemsize(out_dtype) == 4)
            vec = codegen.copy_vec4(views[0], ov, shape) if bare else None
            if vec is not None:
                self.emit(vec[0], bindings, vec[1], self.grid(math.prod(shape) // 4),
                          name=f"copy_vec4[{name}]")
                return
            tiles = transpose_tiles(views[0], ov, shape) if bare else None
            if tiles is not None and tiles[1][2] <= self.max_dim:
                self.emit(kernel_files.kernel("index/transpose_tiles"), {"x": bufs[0], "out": out},
                          tiles[0], tiles[1], name=f"transpose[{name}]")
                return
            kernel, params = codegen.elementwise(expr, dtypes, views, ov, shape, self.f16)
            self.emit(kernel, bindings, params, self.grid(math.prod(shape)),
                      name=f"elementwise[{name}]")
            return
        every = views + [ov]                    # over the binding limit: one call per piece
        pieces = split.elementwise_pieces(
            shape, [split.View(v.binding, self.itemsize(v.dtype), v.offset, v.strides)
                    for v in every], [b.nbytes for b in bufs + [out]], self.limit, self.align,
            f"elementwise[{name}] (node {self.node})")
        for pc in pieces:
            pv = [Strided(v.binding, v.dtype, off, st)
                  for v, off, st in zip(every, pc.offsets, pc.strides)]
            kernel, params = codegen.elementwise(expr, dtypes, pv[:-1], pv[-1], pc.shape,
                                                 self.f16)
            self.emit(kernel, bindings, params, self.grid(math.prod(pc.shape)),
                      name=f"elementwise[{name}]",
                      windows={f"b{k}": w for k, w in pc.windows.items()})

    # -- row layouts --------------------------------------------------------------------------
    def permuted(self, node_id: int, perm: tuple[int, ...]) -> Buf:
        """Return a buffer holding node's value with axes permuted (no copy for identity)."""
        if perm == tuple(range(len(perm))):
            return self.buf(node_id)
        lz = self.as_lazy(node_id)
        self.lazy.pop(node_id, None)
        out_shape = tuple(lz.shape[a] for a in perm)
        leaves = [(b, d, off, tuple(st[a] for a in perm)) for b, d, off, st in lz.leaves]
        out = self.temp(out_shape, lz.dtype)
        self.strided(lz.expr, leaves, out, lz.dtype, 0, strides_of(out_shape), out_shape,
                     "permute")
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
