"""Lowering rule of matmul (batched, broadcast, with fused bias + activation epilogues), and
`emit_matmul`, which picks GEMV, register-tiled vec4 (autotuned) or scalar tiled kernels by
shape; attention's two-matmul form uses it too."""
from __future__ import annotations

import math
from typing import Any

from .. import dtype as dt
from ..activations import ACTIVATIONS
from ..codegen import Expr
from ..graph import Node
from ..kernels import kernel
from ..shape import strides_of
from . import smat, split
from .emit import MAX_FUSED_BUFFERS, EmitContext, Lazy, Leaf, PartsSum
from .program import Buf, Variant
from .registry import lowering

BIG_GRID = 128   # 128x128 tiles only when they still give this many workgroups
GEMV_ROWS = 4    # up to this many rows: bandwidth-bound, split K across threads


@lowering("matmul")
def _matmul(L: EmitContext, node: Node) -> Buf | None:
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
    act = ep.activation if ep else node.attrs.get("activation", "none")
    out = L.temp(out_shape, node.dtype)
    acc_t = "f32" if node.attrs.get("accumulate") == "float32" else L.T(node.dtype)
    value = ep.last if ep else node.id
    lazy_sum = value if act == "none" and _read_by_residual_norm(L, value) else None
    emit_matmul(L, a_buf, b_buf, L.buf(bias_id) if bias_id is not None else None, out,
                (m, n, k, batch), (a_bs, b_bs), node.dtype, acc_t, act, lazy_sum)
    if value in L.parts_sums:              # K pieces the norm after it sums (_split_k)
        return None
    if ep:
        L.values[ep.last] = out
    return out


# (probe) False: every split-K product runs its own sum kernel, as before 2026-11-28
# (bench/probes/minilm_submit_probe.py --sum-in-norm on,off). Tried and taken out: the next
# f32 matmul summing its A's pieces (and GELU) as its tiles load them, 6 more of MiniLM 1x128's
# dispatches: slower natively, 0.511 against 0.493 ms a run on an H200 (the down projection
# re-reads its A's 4 pieces for every column tile; bench/results/
# 2026-11-28-h200-dawn-split-k-sum-in-reader.json).
SUM_IN_NORM = True


def _read_by_residual_norm(L: EmitContext, value: int) -> bool:
    """True when the value's one reader is the residual add a norm absorbed (fuse.
    _residual_norm) and the add's other operand is another value: that norm sums a split-K
    product's pieces itself (lower_rows._norm), so no sum kernel runs between them."""
    users = L.consumers.get(value, [])
    if not SUM_IN_NORM or value in L.outputs or len(users) != 1 or \
            users[0] not in L.fusions.absorbed:
        return False
    norms = L.consumers.get(users[0], [])
    return len(norms) == 1 and L.fusions.residuals.get(norms[0], ()).count(value) == 1


def emit_matmul(L: EmitContext, a: Buf, b: Buf, bias: Buf | None, out: Buf,
                mnkb: tuple[int, int, int, int], batch_strides: tuple[int, int],
                dtype: dt.DType, acc_t: str, act: str = "none",
                lazy_sum: int | None = None) -> None:
    """Emit out[z] = act(a[z] @ b[z] + bias) for z < batch: a [m, k], b [k, n] contiguous,
    batch z at element offsets z * batch_strides.

    lazy_sum: the node whose value this is, where a norm reads it and can sum K pieces itself:
    a split-K product then leaves its parts in L.parts_sums (and L.lazy) instead of `out`.

    Over the binding limit (split.py), an unbatched product runs per range of A's rows, each
    binding windows of A and C; a weight over the limit is cut along K into partial products
    summed by one elementwise kernel that adds the bias and applies the activation."""
    m, n, k, batch = mnkb
    if batch != 1 or not L.over_limit(a, b, out):
        _emit_kernel(L, a, b, bias, out, mnkb, batch_strides, dtype, acc_t, act, {}, {},
                     lazy_sum)
        return
    if not L.over_limit(b):
        _row_pieces(L, a, b, bias, out, (m, n, k), dtype, acc_t, act, 0, None)
        return
    isz = L.itemsize(dtype)
    ranges = split.row_ranges(k, [n * isz], L.limit, L.align, exact=False, multiple=4)
    if ranges is None:               # one row of the weight is too big: the check names it
        _emit_kernel(L, a, b, bias, out, mnkb, batch_strides, dtype, acc_t, act, {}, {})
        return
    parts = []
    for k0, k1 in ranges:
        kc = k1 - k0
        a_cols = L.temp((m, kc), dtype)          # A[:, k0:k1], contiguous
        L.strided(Expr("load", (0,), dtype), [(a, dtype, k0, (k, 1))], a_cols, dtype, 0,
                  (kc, 1), (m, kc), "matmul K piece")
        part = L.temp((m, n), dtype)
        w = split.window(b.nbytes, k0 * n * isz, k1 * n * isz, L.align)
        _row_pieces(L, a_cols, b, None, part, (m, n, kc), dtype, acc_t, "none",
                    k0 * n - w.shift(isz), w)
        parts.append(part)
    sum_parts(L, [(p, 0) for p in parts], bias, out, (m, n), dtype, act, "matmul K pieces")


def _row_pieces(L: EmitContext, a: Buf, b: Buf, bias: Buf | None, out: Buf,
                mnk: tuple[int, int, int], dtype: dt.DType, acc_t: str, act: str, b_off: int,
                b_win: split.Window | None) -> None:
    """C = A @ B[window] over ranges of A's rows whose A and C bytes fit a binding."""
    m, n, k = mnk
    isz = L.itemsize(dtype)
    ranges = split.row_ranges(m, [k * isz, n * isz], L.limit, L.align, exact=False) \
        if L.over_limit(a, out) else None
    for r0, r1 in ranges or [(0, m)]:      # (None: one row is too big; the check says so)
        wins, offs = L.place({"A": ("a_off", a, r0 * k, r1 * k, isz),
                              "C": ("c_off", out, r0 * n, r1 * n, isz)})
        if b_win is not None:
            wins["B"] = b_win
        _emit_kernel(L, a, b, bias, out, (r1 - r0, n, k, 1), (0, 0), dtype, acc_t, act,
                     {**offs, "b_off": b_off}, wins)


def sum_parts(L: EmitContext, parts: list[tuple[Buf, int]], bias: Buf | None, out: Buf,
               mn: tuple[int, int], dtype: dt.DType, act: str, what: str,
               stride: int | None = None) -> None:
    """out = act(sum(parts) + bias); parts are (buffer, element offset) of [m, n] products
    whose rows lie `stride` elements apart (n: contiguous), at most MAX_FUSED_BUFFERS - 2
    distinct buffers per kernel (several parts may share one)."""
    m, n = mn
    stride = n if stride is None else stride
    group = MAX_FUSED_BUFFERS - 2
    acc: Buf | None = None
    parts = list(parts)
    while parts:
        take: list[tuple[Buf, int]] = []
        held = {acc} if acc is not None else set()
        while parts and len(held | {parts[0][0]}) <= group:
            held.add(parts[0][0])
            take.append(parts.pop(0))
        reads = ([(acc, 0)] if acc is not None else []) + take
        leaves: list[tuple[Buf, dt.DType, int, tuple[int, ...]]] = [
            (p, dtype, off, (n if p is acc else stride, 1)) for p, off in reads]
        expr = Expr("load", (0,), dtype)
        for i in range(1, len(leaves)):
            expr = Expr("add", (expr, Expr("load", (i,), dtype)), dtype)
        last = not parts
        if last and bias is not None:
            leaves.append((bias, dtype, 0, (0, 1)))
            expr = Expr("add", (expr, Expr("load", (len(leaves) - 1,), dtype)), dtype)
        if last and act != "none":
            a = ACTIVATIONS[act]
            assert a.op is not None              # only "none" has no op
            expr = Expr(a.op, (expr,), dtype, a.attrs)
        dst = out if last else L.temp((m, n), dtype)
        L.strided(expr, leaves, dst, dtype, 0, (n, 1), (m, n), what)
        acc = dst


def _emit_kernel(L: EmitContext, a: Buf, b: Buf, bias: Buf | None, out: Buf,
                 mnkb: tuple[int, int, int, int], batch_strides: tuple[int, int],
                 dtype: dt.DType, acc_t: str, act: str, offsets: dict[str, int],
                 windows: dict[str, split.Window], lazy_sum: int | None = None) -> None:
    """One matmul dispatch (GEMV, register-tiled or scalar tiled, by shape); K pieces and
    their sum where split_k* pick them (lazy_sum: see emit_matmul)."""
    m, n, k, batch = mnkb
    if smat.MODE not in (None, "off") and dtype == dt.float16:
        smat.check_forced(L.info, smat.MODE)   # a forced tensor-core kernel it cannot run
    t = L.T(dtype)
    overrides = {"HAS_BIAS": bias is not None, "ACT": ACTIVATIONS[act].code}
    params = {"M": m, "N": n, "K": k, "a_off": 0, "b_off": 0, "a_bs": batch_strides[0],
              "b_bs": batch_strides[1], "c_off": 0, "bias_off": 0, **offsets}
    bindings = {"A": a, "B": b, "bias": bias if bias is not None else L.dummy(0), "C": out}
    if n % 4 == 0 and m <= GEMV_ROWS:
        L.emit(kernel("matmul/gemv", T=t), bindings, params,
               (-(-n // (4 * gemv_quads(k, L.info.software))), 1, batch),
               {**overrides, "ROWS": m, "QUADS": gemv_quads(k, L.info.software),
                "UNROLL": gemv_unroll(L.info.software)},
               name="gemv", windows=windows)
    elif k % 4 == 0 and n % 4 == 0:     # register-tiled vec4: 128 or 64 square tiles
        params.update(act=overrides["ACT"], has_bias=int(overrides["HAS_BIAS"]), KL=k, ZS=1)
        # K pieces (GPUs, f32, whole buffers): 64x64 tiles for thin shapes, else 128x128 ones
        pieces, r = 1, 1
        if not L.info.software and dtype == dt.float32 and not windows and not offsets:
            pieces = split_k(m, n, k, batch, L.limit)
            if pieces == 1:
                pieces, r = split_k_big(m, n, k, batch, L.limit), 2
            if pieces == 1 and bias is None and act == "none":
                pieces, r = split_k_batched(m, n, k, batch, L.limit), 1
        if pieces > 1:
            _split_k(L, a, b, bias, out, (m, n, k, batch), batch_strides, pieces, dtype, acc_t,
                     act, r, lazy_sum)
            return
        if L.info.software:              # one pipeline per tile size (matmul_vec4_io.wgsl)
            overrides = {"RUNTIME_EPILOGUE": True}
        tiles = {r: Variant.of(*tile_kernel(t, acc_t, r, L.info.software),
                               (-(-n // (64 * r)), -(-m // (64 * r)), batch), overrides)
                 for r in (2, 1)}
        first = big_tile_first(m, n, batch, L.info.software)
        pick, other = tiles[first], tiles[3 - first]
        # 128x64 double-buffered tiles: more workgroups on mid-size shapes (GPUs)
        db64 = [Variant.of("matmul_vec4_db64", kernel("matmul/matmul_tiled_db", T=t, C=acc_t,
                                                      **tiled_db_slots(1)),
                           (-(-n // 64), -(-m // 128), batch), overrides)] \
            if db_tiles(L.info.software) else []
        # software adapters tune per row class (cpu_regs_shape's: under 64 rows, or more),
        # so every batch size of a class runs the same kernel: what
        # MiniLMEncoder.warm_up compiled for one sentence serves the rest
        rows = (f"m<{CPU_REGS_TALL}" if m < CPU_REGS_TALL else f"m>={CPU_REGS_TALL}") \
            if L.info.software else str(m)
        tuned = f"matmul {acc_t}/{t} {rows}x{n}x{k}x{batch}"
        # software adapters: register-only kernels first (matmul_regs.wgsl)
        if L.info.software:
            shapes = [(rr, cq) for rr, cq in CPU_REGS if (n // 4) % cq == 0]
            kernels = {sh: kernel("matmul/matmul_regs", T=t, C=acc_t, **regs_slots(*sh))
                       for sh in shapes}
            regs = {(rr, cq): Variant.of(f"matmul_regs_{rr}x{cq}", kernels[rr, cq],
                                         (-(-n // (4 * cq * L.wg)), -(-m // rr), batch),
                                         {**overrides, "WG": L.wg}) for rr, cq in shapes}
            first_shape = cpu_regs_shape(m, n)
            lead = regs[first_shape]
            L.emit(kernels[first_shape], bindings, params, lead.grid, lead.overrides,
                   name=lead.name,
                   variants=[pick, other, *db64,
                             *(v for v in regs.values() if v is not lead)],
                   tune_key=tuned, windows=windows)
            return
        variants = [other, *db64]
        # f16 math runs at the f32 rate on the H200 under Vulkan (bench/probes/f16_alu_probe.py: 65
        # TFLOP/s for f32 vec4, f16 vec4 and f16 vec2 fma alike; no paired HFMA2), so an f16
        # matmul gains only its halved loads: 1.2x webrlx's f32 at 4096^3. Explicit fma()
        # changed nothing, and f16 sums within a k step added into f32 ones cost 13%
        # (bench/probes/matmul_variants_probe.py, 2026-11-26-h200-matmul-variants-probe-f16.json).
        if acc_t == "f16":               # half math: wide tiles too (matmul_wide.wgsl)
            variants.append(Variant.of("matmul_wide", kernel("matmul/matmul_wide", T=t,
                                                             C=acc_t, **wide_slots()),
                                       (-(-n // 256), -(-m // 128), batch), overrides))
        smats = smat_variants(L, dtype, (m, n, k, batch), offsets, batch_strides, overrides)
        if smats:                        # tensor cores (compiler/smat.py): they lead
            lead_kernel, lead = smats[0]
            L.emit(lead_kernel, bindings, params, lead.grid, overrides, name=lead.name,
                   variants=[*(v for _, v in smats[1:]), pick, *variants], tune_key=tuned,
                   windows=windows)
            return
        L.emit(tile_kernel(t, acc_t, first, L.info.software)[1], bindings,
               params, pick.grid, overrides, name=pick.name, variants=variants,
               tune_key=tuned, windows=windows)
    else:
        L.emit(kernel("matmul/matmul", T=t), bindings, params,
               (-(-n // 64), -(-m // 64), batch), overrides, name="matmul", windows=windows)


def smat_variants(L: EmitContext, dtype: dt.DType, mnkb: tuple[int, int, int, int],
                  offsets: dict[str, int], batch_strides: tuple[int, int],
                  overrides: dict[str, Any]) -> list[tuple[Any, Variant]]:
    """The subgroup-matrix kernels for an f16 matmul where the adapter has them, the default
    first (128 x 128 tiles when they fill the GPU, else 64 x 64); [] elsewhere, or with
    smat.MODE "off". smat.MODE naming a shape forces it, and raises
    SubgroupMatrixUnavailable where the adapter lacks the feature."""
    m, n, k, batch = mnkb
    forced = smat.MODE if smat.MODE not in (None, "off") else None
    if smat.MODE == "off" or dtype != dt.float16 or not smat.available(L.info) or \
            not smat.eligible(m, n, k, offsets, batch_strides):
        return []
    shapes = [sh for sh in smat.SHAPES if smat.fits(L.info, sh)]
    if forced is not None:
        shapes = [sh for sh in shapes if sh.name == forced]
        if not shapes:
            raise ValueError(f"smat.MODE {forced!r}: no such subgroup-matrix shape that fits "
                             f"this adapter; shapes: {[sh.name for sh in smat.SHAPES]}")
    shapes.sort(key=lambda sh: smat.default_rank(sh, m, n, batch))
    out = []
    for sh in shapes:
        kern = kernel("matmul/matmul_smat", T="f16", **smat.slots(sh, smat.SGID_BUILTIN))
        out.append((kern, Variant.of(sh.name, kern, (-(-n // sh.bn), -(-m // sh.bm), batch),
                                     overrides)))
    return out


# matmul/matmul_regs's (rows, column quads) a thread, on software adapters: the default there
# (cpu_regs_shape), the tiled kernels its variants. SwiftShader / lavapipe ms, 2-core box,
# bench/probes/cpu_matmul_probe.py, tiled 64 / tiled 128 / regs 8x2 / 16x2:
#   36x384x1536:  47 / 61 / 14.5 / 16.6   and lavapipe 13.0 / 13.8 / 3.3 / 4.5
#   128x384x1536: 90 / 59 / 37.7 / 34.8   and lavapipe 25.5 / 14.1 / 8.4 / 6.9
# (4x1 / 8x1 / 4x2 / 8x4 / 12x2 / 16x1 measured within 15% of these, or slower; bounds checks
# inside the K loop had cost 1.5x)
CPU_REGS = ((8, 2), (16, 2), (8, 1), (16, 1), (4, 2))
CPU_REGS_TALL = 64         # rows from which the 16-row shapes are the default


def cpu_regs_shape(m: int, n: int) -> tuple[int, int]:
    """matmul_regs's default (rows, column quads) a thread: 16 rows from CPU_REGS_TALL rows,
    else 8; 2 column quads where N / 4 is even."""
    return (16 if m >= CPU_REGS_TALL else 8), (2 if (n // 4) % 2 == 0 else 1)
SPLIT_K_BELOW = 96     # split K when 64x64 tiles give fewer workgroups than this (GPUs)
SPLIT_K_MAX = 8
SPLIT_K_MIN_K = 256    # shorter K: nothing to gain from pieces


def split_k(m: int, n: int, k: int, batch: int, max_binding: int) -> int:
    """K pieces for a thin f32 matmul on a GPU (1 = none): the most, up to SPLIT_K_MAX, that
    keep 64x64 tiles' workgroups within 2 x SPLIT_K_BELOW, each piece a multiple of 16 long
    (the tile's K step), and the stacked partial products within one binding. MiniLM at 128
    tokens had 12-48 workgroups per matmul on an H100 (57 us each, 2.1 of its 2.5 ms)."""
    wgs = -(-n // 64) * -(-m // 64) * batch
    if batch != 1 or wgs >= SPLIT_K_BELOW or k < SPLIT_K_MIN_K:
        return 1
    return _double_pieces(k, m * n * 4, max_binding, lambda p: wgs * p * 2 <= 2 * SPLIT_K_BELOW)


def _double_pieces(k: int, part_bytes: int, max_binding: int, more: Any) -> int:
    """K pieces doubled from 1 while more(pieces) holds (the split rules' workgroup targets),
    up to SPLIT_K_MAX, each piece a multiple of 16 long (the tiles' K step), and the stacked
    partial products (part_bytes each) within one binding."""
    pieces = 1
    while (pieces * 2 <= SPLIT_K_MAX and more(pieces) and k % (pieces * 2 * 16) == 0
           and pieces * 2 * part_bytes <= max_binding):
        pieces *= 2
    return pieces


# K pieces for mid-size f32 matmuls on GPUs with 128x128 tiles (split_k_big): where those
# tiles give fewer than BIG_GRID workgroups (1024^3: 64 on an H100's 132 SMs) and 64x64 tiles
# are too many for split_k. H100, us per run for 64x64 tiles / 128 tiles in 2, 4, 8 pieces
# (bench/probes/split_k_probe.py): 1024^3 146 / 132 / 117 / 129; 4096x1536x384 (MxKxN, MiniLM's FFN
# down at 32x128) 285 / 301 / 251 / 258; 4096x384x384 85 / 95 / 117 / 107 (K too short: left
# alone); 2048^3 (256 big tiles, no split) 726 / 747 / 854 / 781. So: at least 2 x BIG_GRID
# workgroups, K of at least 2 x SPLIT_K_MIN_K.
# SPLIT_K_BIG forces a count (probes, tests); 0 or 1 turns it off.
SPLIT_K_BIG: int | None = None


def split_k_big(m: int, n: int, k: int, batch: int, max_binding: int) -> int:
    """K pieces for 128x128 tiles (1 = none) where they give under BIG_GRID workgroups:
    doubling until the workgroups reach 2 x BIG_GRID, each piece a multiple of 16 long, at
    most SPLIT_K_MAX, the stacked partial products within one binding."""
    wgs = -(-n // 128) * -(-m // 128) * batch
    if SPLIT_K_BIG is not None:
        ok = batch == 1 and k % (16 * max(SPLIT_K_BIG, 1)) == 0
        return SPLIT_K_BIG if ok and SPLIT_K_BIG > 1 else 1
    if batch != 1 or wgs >= BIG_GRID or k < 2 * SPLIT_K_MIN_K:
        return 1
    return _double_pieces(k, m * n * 4, max_binding, lambda p: wgs * p < 2 * BIG_GRID)


# K pieces for batched f32 matmuls with thin outputs and long K on GPUs (split_k_batched):
# attention's P V (2048 queries x 64 dims over 2048 keys, 12 heads) had 192 workgroups of
# 128x64 tiles, each summing all 2048 keys: 0.227 ms; in 2 pieces of the same tiles 0.190 +
# 0.010 for the sum (H200, 2026-11-26-h200-attention-split-pv.json; in 64x64 tiles the pieces
# gained nothing). SPLIT_K_BATCHED forces a count (probes, tests); 0 or 1 turns it off.
SPLIT_K_BATCHED: int | None = None
SPLIT_K_BATCHED_MIN_K = 1024      # K from which batched products are split
SPLIT_K_BATCHED_WGS = 512         # until 64x64 tiles give about this many workgroups


def split_k_batched(m: int, n: int, k: int, batch: int, max_binding: int) -> int:
    """K pieces for a batched matmul (1 = none): where K >= SPLIT_K_BATCHED_MIN_K and 64x64
    tiles give fewer than SPLIT_K_BATCHED_WGS workgroups, doubling while under that, each
    piece a multiple of 16 long, at most SPLIT_K_MAX, the stacked partial products within one
    binding."""
    if batch == 1:
        return 1
    if SPLIT_K_BATCHED is not None:
        ok = k % (16 * max(SPLIT_K_BATCHED, 1)) == 0 \
            and SPLIT_K_BATCHED * batch * m * n * 4 <= max_binding
        return SPLIT_K_BATCHED if ok and SPLIT_K_BATCHED > 1 else 1
    wgs = -(-n // 64) * -(-m // 64) * batch
    if k < SPLIT_K_BATCHED_MIN_K:
        return 1
    return _double_pieces(k, batch * m * n * 4, max_binding,
                          lambda p: wgs * p < SPLIT_K_BATCHED_WGS)


def _split_k(L: EmitContext, a: Buf, b: Buf, bias: Buf | None, out: Buf,
             mnkb: tuple[int, int, int, int], batch_strides: tuple[int, int], pieces: int,
             dtype: dt.DType, acc_t: str, act: str, r: int = 1,
             lazy_sum: int | None = None) -> None:
    """out[z] = act(sum_p A[z][:, p kc:(p+1) kc] @ B[z][p kc:(p+1) kc] + bias): one tiled
    dispatch over batch x pieces (grid z = batch * pieces + p: the kernel's ZS), partial
    products stacked in a temp, then sum_parts adding them, the bias and the activation in
    one elementwise kernel (batched: neither bias nor activation). With lazy_sum (unbatched,
    no activation) the bias goes into piece 0 and the sum is left to the norm that reads the
    value (_read_by_residual_norm): L.parts_sums[lazy_sum] holds the parts, and L.lazy the
    same sum for any other reader."""
    lazy_at = lazy_sum if mnkb[3] == 1 and act == "none" else None
    m, n, k, batch = mnkb
    kc = k // pieces
    t = L.T(dtype)
    parts = L.temp((batch * pieces, m, n), dtype)
    params = {"M": m, "N": n, "K": k, "KL": kc, "a_off": 0, "b_off": 0,
              "a_bs": batch_strides[0], "b_bs": batch_strides[1], "c_off": 0, "bias_off": 0,
              "act": 0, "has_bias": 0, "ZS": pieces}
    if batch > 1 and db_tiles(L.info.software):       # 128x64 double-buffered tiles
        name = "matmul_vec4_db64"
        k_tiled = kernel("matmul/matmul_tiled_db", T=t, C=acc_t, **tiled_db_slots(1))
        grid = (-(-n // 64), -(-m // 128), batch * pieces)
    else:
        name, k_tiled = tile_kernel(t, acc_t, r, L.info.software)
        grid = (-(-n // (64 * r)), -(-m // (64 * r)), batch * pieces)
    piece0_bias = bias if lazy_at is not None else None
    L.emit(k_tiled, {"A": a, "B": b, "bias": piece0_bias or L.dummy(0), "C": parts}, params,
           grid, {"HAS_BIAS": piece0_bias is not None, "ACT": 0},
           name=f"{name}[split-k {pieces}]")
    if lazy_at is not None:
        shape = L.shape(lazy_at)
        leaves: list[Leaf] = [(parts, dtype, z * m * n, strides_of(shape))
                              for z in range(pieces)]
        expr = Expr("load", (0,), dtype)
        for i in range(1, len(leaves)):
            expr = Expr("add", (expr, Expr("load", (i,), dtype)), dtype)
        L.lazy[lazy_at] = Lazy(expr, leaves, shape, dtype)
        L.parts_sums[lazy_at] = PartsSum(parts, pieces, m * n)
    elif batch == 1:
        sum_parts(L, [(parts, z * m * n) for z in range(pieces)], bias, out, (m, n), dtype,
                   act, "matmul split-K sum")
    else:                         # rows of the sum: batches; parts[z * pieces + p]
        sum_parts(L, [(parts, z * m * n) for z in range(pieces)], None, out,
                   (batch, m * n), dtype, "none", "matmul split-K sum", pieces * m * n)


# column quads per workgroup of matmul/gemv.wgsl (1, 2, 4 or 8; the rest of its 256 threads
# split K). H100, f32, us for quads 1 / 2 / 4 / 8 (bench/probes/gemv_probe.py): 1x4096x4096
# 82 / 65 / 61 / 88; 1x4096x16384 299 / 182 / 164 / 174; 1x384x1536 60 / 60 / 37 / 38 (torch 25,
# 89, 13). Fewer quads mean more workgroups but longer reductions.
GEMV_QUADS = 4


def gemv_quads(k: int, software: bool) -> int:
    """matmul/gemv's column quads a workgroup: GEMV_QUADS on GPUs. Software adapters run a
    workgroup's 256 threads on one CPU core, where the barriers of the reduction over K slices
    cost more than the loads: as many slices as give each thread ~16 steps of K (4 to 64
    quads). lavapipe, 2 busy cores, ms at quads 4 / 16 / 64: 1x64x51868 148 / 27 / 11;
    1x384x51868 317 / 73 / 113; 1x384x1536 16 / 1.5 / 3.5; 1x1536x384 1.9 / 3.3 / 2.6;
    1x4096x4096 167 / 388 / 336."""
    if not software:
        return GEMV_QUADS
    slices = 1 << max(0, min(6, (k // 16).bit_length() - 1))
    return max(GEMV_QUADS, min(64, 256 // slices))


# matmul/gemv's K loop four steps at a time, four loads of B in flight a thread (UNROLL): on
# GPUs. H100 1x4096x4096, GPU time (bench/probes/gemv_probe.py): 43.5 -> 29.5 us (1.5 -> 2.3 TB/s).
# Cutting K into pieces over more workgroups (up to 16x, a second kernel summing them) gave
# nothing without it (42-55 us) and little with it (36-42 us); at 1x384x1536 the extra
# dispatch doubled the wall time. None of those kept.
GEMV_UNROLL: bool | None = None     # None: on GPUs, off on software adapters; tests force it


def gemv_unroll(software: bool) -> bool:
    """Whether matmul/gemv runs its unrolled K loop (GEMV_UNROLL, else on GPUs only)."""
    return (not software) if GEMV_UNROLL is None else GEMV_UNROLL


def big_tile_first(m: int, n: int, batch: int, software: bool) -> int:
    """The default tile of the register-tiled matmul (the autotuner may override it): 2 for
    128x128 (8x8 per thread), 1 for 64x64. GPUs: 128 tiles only when they still give BIG_GRID
    workgroups. Software adapters (a few CPU cores): 128 tiles once m >= 96 and n >= 128, what
    the tuner picked on SwiftShader for all 19 MiniLM shapes timed and on llvmpipe for 15 of 19
    (the rest near ties; tools/make_tune_tables.py)."""
    if software:
        return 2 if m >= 96 and n >= 128 else 1
    return 2 if -(-m // 128) * -(-n // 128) * batch >= BIG_GRID else 1


# matmul/matmul_tiled_db (128x128 tiles, BK 16, double-buffered) in place of matmul_tiled's
# 128 tiles, and its 128x64 form as one more variant for the autotuner: on GPUs (H200 f32
# 4096^3 3.27 against 4.05 ms; the shader's header). None: GPUs only (SwiftShader compiles ~75
# ms per KB of its 32 KB of tiles); tests force it everywhere.
DB_TILES: bool | None = None


def db_tiles(software: bool) -> bool:
    """Whether the double-buffered matmul_tiled_db kernels run (DB_TILES; None: GPUs)."""
    return (not software) if DB_TILES is None else DB_TILES


def tile_kernel(t: str, acc_t: str, r: int, software: bool) -> tuple[str, Any]:
    """(variant name, kernel) of the register-tiled vec4 matmul with R = r: 64x64 tiles
    (matmul_vec4_64), or 128x128 ones: matmul_vec4_db where DB_TILES holds (by default on
    GPUs), else matmul_vec4. One signature for all: variants of one call."""
    if r == 1:
        return "matmul_vec4_64", kernel("matmul/matmul_tiled", T=t, C=acc_t, **tiled_slots(1))
    if db_tiles(software):
        return "matmul_vec4_db", kernel("matmul/matmul_tiled_db", T=t, C=acc_t,
                                        **tiled_db_slots())
    return "matmul_vec4", kernel("matmul/matmul_tiled", T=t, C=acc_t, **tiled_slots(2))


def _fma_block(ri: int, rj: int, a_at: Any, b_at: Any) -> list[str]:
    """One k of a register-tiled matmul for ri blocks of 4 rows x rj column quads a thread:
    a_i = As[a_at(i)], b_j = Bs[b_at(j)], acc[(i*4 + c)*rj + j] += a_i[c] * b_j."""
    lines = [f"            let a{i} = As[{a_at(i)}];" for i in range(ri)]
    lines += [f"            let b{j} = Bs[{b_at(j)}];" for j in range(rj)]
    lines += [f"            acc[{(i * 4 + c) * rj + j}] += a{i}.{'xyzw'[c]} * b{j};"
              for i in range(ri) for c in range(4) for j in range(rj)]
    return lines


def _store_block(ri: int, rj: int) -> str:
    """The stores of _fma_block's accumulators: acc[(i*4 + c)*rj + j] is row i*64 + ty*4 + c,
    column quad j*16 + tx of the tile."""
    return "\n".join(f"    store(wid.z, row0 + {64 * i + c}u + ty * 4u, col0 / 4u + {16 * j}u + "
                     f"tx, acc[{(i * 4 + c) * rj + j}]);"
                     for i in range(ri) for c in range(4) for j in range(rj))


def tiled_db_slots(rj: int = 2) -> dict[str, str]:
    """matmul_tiled_db's slots for 128 x 64 rj tiles: RJ, the B tiles' size (BS), the FMA
    block of a step with its 16 k written out (each in its own block: constant offsets into
    the tiles) and the store block."""
    fmas = []
    for k in range(16):
        fmas += ["        {", *_fma_block(2, rj, lambda i, k=k: f"ca + {k * 32 + 16 * i}u + ty",
                                          lambda j, k=k: f"cb + {k * 16 * rj + 16 * j}u + tx"),
                 "        }"]
    return {"RJ": str(rj), "BS": str(2 * 16 * 16 * rj), "FMAS": "\n".join(fmas),
            "STORES": _store_block(2, rj)}


def tiled_slots(r: int) -> dict[str, str]:
    """The unrolled FMA and store blocks of matmul_tiled for R x R blocks of 4x4 per thread."""
    fmas = _fma_block(r, r, lambda i: f"k * Q + {16 * i}u + ty",
                      lambda j: f"k * Q + {16 * j}u + tx")
    return {"R": str(r), "FMAS": "\n".join(fmas), "STORES": _store_block(r, r)}


def wide_slots() -> dict[str, str]:
    """The unrolled FMA and store blocks of matmul_wide (8 rows x 4 column quads a thread)."""
    fmas = _fma_block(2, 4, lambda i: f"k * QA + {16 * i}u + ty",
                      lambda j: f"k * QB + {16 * j}u + tx")
    return {"FMAS": "\n".join(fmas), "STORES": _store_block(2, 4)}


def regs_slots(rr: int, cq: int) -> dict[str, str]:
    """matmul_regs's named accumulators (acc<row>_<quad>), row offsets, FMA and store blocks
    for RR rows x CQ column quads a thread."""
    accs = [f"    var acc{i}_{j} = vec4<{{{{C}}}}>(0);" for i in range(rr) for j in range(cq)]
    rows = [f"    let ra{i} = a_base + min(row0 + {i}u, p.M - 1u) * K4;" for i in range(rr)]
    fmas = [f"            let b{j}_{c} = vec4<{{{{C}}}}>(B[kb + {c}u * N4 + {j}u]);"
            for j in range(cq) for c in range(4)]
    for i in range(rr):
        fmas.append(f"            let a{i} = vec4<{{{{C}}}}>(A[ra{i} + k / 4u]);")
        fmas += [f"            acc{i}_{j} += a{i}.x * b{j}_0 + a{i}.y * b{j}_1 + "
                 f"a{i}.z * b{j}_2 + a{i}.w * b{j}_3;" for j in range(cq)]
    # one store() in the code, in a loop over the accumulators gathered into an array:
    # written out per accumulator, Chromium's SwiftShader took 0.5 / 1.6 / 3.9 s to compile
    # 8 / 16 / 32 of them (with RUNTIME_EPILOGUE's bias + activation switch inlined in each;
    # 0.5 / 1.5 s at 16 / 32 with a constant epilogue), the loop 0.1 / 0.2 / 0.3 s
    names = ", ".join(f"acc{i}_{j}" for i in range(rr) for j in range(cq))
    stores = [f"    let accs = array<vec4<{{{{C}}}}>, {rr * cq}>({names});",
              f"    for (var s = 0u; s < {rr * cq}u; s++) {{",
              f"        store(wid.z, row0 + s / {cq}u, c4 + s % {cq}u, accs[s]);",
              "    }"]
    return {"RR": str(rr), "CQ": str(cq), "ACCS": "\n".join(accs), "ROWS": "\n".join(rows),
            "FMAS": "\n".join(fmas), "STORES": "\n".join(stores)}


def _expand_buf(L: EmitContext, node_id: int, shape: tuple[int, ...]) -> Buf:
    leaves: list = []
    expr = L.leaves_into(node_id, shape, leaves)
    out = L.temp(shape, L.dtype(node_id))
    L.strided(expr, leaves, out, L.dtype(node_id), 0, strides_of(shape), shape, "expand")
    return out
