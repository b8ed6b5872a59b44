"""Lowering rules of quantized ops (GGUF blocks dequantized inside the kernels): qmatmul as a
split-K GEMV for decode rows or a block-tiled matmul for prefill, and qgather. Every kernel
reads the weight's row of quant.FORMATS through the overrides of common/qformats.wgsl."""
from __future__ import annotations

import math
from typing import Any

from .. import dtype as dt
from .. import quant
from ..device_info import DeviceInfo
from ..graph import Node
from ..kernels import Kernel, kernel, raw_shader
from . import fuse, int8_decode, int8_scope, lower_int8_decode, lower_int8_prefill, smat
from .emit import EmitContext
from .fuse import QGemv
from .lower_decoder import cpu_adapter, rope_freq
from .lower_matmul import BIG_GRID, emit_matmul, sum_parts
from .program import Buf, Variant
from .registry import lowering

GEMV_ROWS = 4       # up to this many rows: bandwidth-bound, split K across threads
# GEMV_MAX_M (fuse.py): up to this many rows by default the GEMV over row groups of 4 (the
# tiled kernel's 64-row tiles would be mostly empty; both are variants)
GEMV_RPW = 8        # weight rows per GEMV workgroup (RPW in quant/qgemv.wgsl)
GEMV_TPR = (2, 4, 8, 16, 32)   # threads per weight row (TPR) the autotuner tries on GPUs
# and weight rows per thread (RPT): one thread over 4 or 8 rows shares each unit's x loads,
# the shape for CPU adapters
GEMV_CPU = ((1, 4), (1, 8))
GEMV_SHAPES = tuple((t, 1) for t in GEMV_TPR) + GEMV_CPU      # (TPR, RPT) variants
GEMV_RQ = (2, 4)    # prefills on GPUs: 4 * RQ x rows per workgroup (RQ row quads), RPT = 1
# batched decodes on GPUs (GEMV_ROWS < M <= GEMV_RPT_RQ_MAX_M): also 2 weight rows a thread
# over RQ row quads, each unit of x loaded once for both rows (variants "_16x2q2"). H200,
# natively, 1B-shaped Q4_K_M, 8 sequences (bench/device_dawn.sh rptab, 2026-11-28): the head
# (Q6_K 128256x2048) 0.62 -> 0.52 ms as qgemv_16x2q2, the step 4.35 -> 4.22 GPU ms; the
# fused GEMVs kept their strided / WIDE picks (x loads are not what bounds those)
GEMV_RPT_RQ = True
GEMV_RPT_RQ_MAX_M = 16
GEMV_UNROLL = (2, 4)   # GPU variants of the fused GEMVs loading UN units a thread at once
# (strided by TPR, or WIDE: neighbours of one block whose scales are decoded once)
GEMV_THREADS = 1 << 19         # default TPR: at most this many threads in all, and K / 16
# fused prefills: quant/qmatmul_fused.wgsl's row quads per 64-column tile (RG; K split 16 / RG
# ways inside the workgroup), all variants of the fused GEMV for more than GEMV_ROWS rows;
# the default on GPUs from TILE_MIN_M rows (CPU adapters keep the GEMV: loads are their cost)
TILE_RG = (1, 2, 4, 8)
TILE_MIN_M = 16


def format_overrides(fmt: str) -> dict[str, Any]:
    """common/qformats.wgsl's overrides for block format `fmt` (a row of quant.FORMATS)."""
    f = quant.block_format(fmt)
    return {"FMT": f.ggml, "QK": f.block, "QBYTES": f.nbytes, "OWN": f.own_path}


def gemv_shape(n: int, k: int, cpu: bool = False) -> tuple[int, int, int]:
    """The default (threads per weight row, weight rows per thread, x row quads per
    workgroup), where the autotuner
    cannot time (e.g. in the browser). On GPUs enough threads to fill one, but per-thread
    costs dominate past that (on an H100, N = 49152 ran 2x slower with TPR 32 than with 8,
    while N = 576 ran best with 16 or 32). On a CPU adapter (lavapipe, SwiftShader) loads
    are the cost: one thread per 8 rows, each unit's x loaded once for all of them."""
    if cpu:
        return (*GEMV_CPU[-1], 1)
    fit = [t for t in GEMV_TPR if n * t <= GEMV_THREADS and 2 * 8 * t <= k]
    return max(fit, default=GEMV_TPR[0]), 1, 1


# K pieces of the quantized subgroup-matrix matmul (its KSPLIT; a sum of the pieces after):
# doubled while its tiles' workgroups x pieces stay within QSMAT_SPLIT_WGS and each piece keeps
# QSMAT_SPLIT_MIN_K of K. A 512-token prefill of the Llama-3.2-1B layout has q / o / down
# projections of 64 128x128 tiles (and k / v of 64 64x64 ones) for a GPU of 132 SMs, while
# gate / up have 256. QSMAT_SPLIT forces a count (probes, tests; 1: none).
QSMAT_SPLIT_WGS = 256
QSMAT_SPLIT_MIN_K = 512
QSMAT_SPLIT: int | None = None


def qsmat_pieces(m: int, n: int, k: int, sh: smat.SmatShape) -> int:
    """K pieces for the quantized smat matmul of shape sh on an m x n x k problem (1: none);
    every piece a whole number of sh's k steps."""
    if QSMAT_SPLIT is not None:
        if QSMAT_SPLIT < 1 or k % (QSMAT_SPLIT * sh.bk):
            raise ValueError(f"QSMAT_SPLIT={QSMAT_SPLIT}: K {k} is not {QSMAT_SPLIT} pieces of "
                             f"whole {sh.bk}-long steps")
        return QSMAT_SPLIT
    wgs, pieces = -(-n // sh.bn) * -(-m // sh.bm), 1
    while (wgs * pieces * 2 <= QSMAT_SPLIT_WGS and k % (pieces * 2 * sh.bk) == 0
           and k // (pieces * 2) >= QSMAT_SPLIT_MIN_K and pieces < 8):
        pieces *= 2
    return pieces


# Prefills of big products on GPUs without subgroup matrices: the weight dequantized once into
# an f32 temp (quant/qdequant_t.wgsl, K x N), then lower_matmul's f32 kernels (double-buffered
# tiles, split-K, autotuned) instead of the fused GEMVs / row tiles (up to fuse.GEMV_MAX_M
# rows) or quant/qmatmul_tiled.wgsl (past them); such a qmatmul fuses nothing (fuse.py asks
# this rule). H200, natively, the 1B-shaped Q4_K_M file, prompt to first token, wall ms, fused
# / tiled against every weight decoded first (bench/device_dawn.sh dqab / dqrows, 2026-11-28):
# 128 tokens 40.1 -> 13.1, 256 77.4 -> 17.7, 512 46.2 -> 31.5; with the k / v projections
# (1M weights) left fused: 14.3, 20.1, 33.9. At 16 rows decoding first lost (8.6 -> 11.1: the
# decodes alone take 1.85 ms), at 32 it won (13.1 -> 11.1), at 64 22.1 -> 11.3. The
# SmolLM2-shaped file (weights of <= 0.9M values, 30 layers) gained nothing with every weight
# decoded first at 256 rows and lost at 128 (6.85 -> 7.91 GPU ms): its calls are
# latency-bound and the unfused norms, ropes and cache writes add dispatches. Hence both
# bounds: DEQUANT_MIN_M rows, and DEQUANT_MIN_WORK multiply-adds (m x n x k) a call: the 1B's
# q / o from 32 rows, its k / v from 128, SmolLM2's biggest from 256.
# The temp holds K x N floats (the memory plan reuses it across layers); a weight whose floats
# would pass DEQUANT_MAX_BYTES or the binding limit keeps the tiles.
DEQUANT_FIRST = True
DEQUANT_MIN_M = 32
DEQUANT_MIN_WORK = 1 << 27
DEQUANT_MAX_BYTES = 1 << 28


def dequant_first(info: DeviceInfo, m: int, n: int, k: int, x_dtype: str) -> bool:
    """Whether an m x n x k qmatmul with x of dtype x_dtype decodes its weight once first:
    f32 x, a GPU (not a software adapter) without subgroup matrices in use, enough rows and
    work, and a weight whose floats fit one binding."""
    floats = 4 * n * k
    return (DEQUANT_FIRST and x_dtype == "float32" and not info.software
            and not (smat.available(info) and smat.MODE != "off")
            and m >= DEQUANT_MIN_M and m * n * k >= DEQUANT_MIN_WORK and k % 32 == 0
            and n % 4 == 0 and floats <= min(DEQUANT_MAX_BYTES, info.max_binding_size))


# The int8 prefill (opt-in, smat.INT8; quant/qmatmul_mmq.wgsl): x's rows and the weight's
# rows quantized to int8 in groups of MMQ_GROUP k (or the biggest power-of-two group from 32
# that divides K), then i8 x i8 -> i32 products on tensor cores, each group's sums scaled in
# f32. From MMQ_MIN_M rows (fewer stay GEMVs), where the weight's int8 copy fits a binding.
# Opt-in, not the default: on the 1B-shaped Q4_K_M prefill under Dawn on an H200 it is 1.05x
# the f16 tensor-core kernels (16.5 against 17.3 ms), with the last logits 4e-2 x max|logit|
# off native f32 against 2.8e-3 (quant/qmatmul_mmq.wgsl's header). Groups of 2048 ran
# fastest there (32: 53.2 ms, 256: 20.4, 1024: 17.3, 2048: 16.5) at the same accuracy.
# Not for batched decodes: decoding every weight to int8 each step (~2.5 ms for the 1B)
# would cost more than the whole GEMV step.
MMQ_GROUP = 2048
MMQ_MIN_M = 32


def mmq_group(k: int) -> int:
    """The int8 prefill's group along K for a weight of k columns: MMQ_GROUP (at most 2048),
    halved until it divides k (at least 32; mmq_ok asks k % 32 == 0)."""
    g = MMQ_GROUP
    while k % g and g > 32:
        g //= 2
    return g


def mmq_ok(info: DeviceInfo, m: int, n: int, k: int, x_dtype: str) -> bool:
    """Whether an m x n x k qmatmul runs as the int8 prefill: smat.INT8, the compile's
    int8="prefill" (compiler/int8_scope.py) or MMQ_FORCE asked for it, the adapter has i8
    subgroup matrices, x is f32, m >= MMQ_MIN_M, K % 32 == 0, N % 8 == 0 and the weight's
    int8 copy fits one binding."""
    return ((smat.INT8 or int8_scope.asked("prefill") or smat.MMQ_FORCE is not None)
            and smat.available_i8(info)
            and x_dtype == "float32"
            and m >= MMQ_MIN_M and k % 32 == 0 and n % 8 == 0
            and n * k <= info.max_binding_size and m * k <= info.max_binding_size)


def decoded_first(info: DeviceInfo, m: int, n: int, k: int, x_dtype: str) -> bool:
    """Whether a qmatmul decodes its weight in a pass of its own (the f32 or the int8 path):
    then fuse.find_fusions leaves it unfused."""
    return (dequant_first(info, m, n, k, x_dtype) or mmq_ok(info, m, n, k, x_dtype)
            or lower_int8_prefill.ok(info, m, n, k, x_dtype))


def _rows_i8(L: EmitContext, src: Buf, weight: bool, rows: int, k: int, group: int,
             fmt: str, name: str) -> tuple[Buf, Buf]:
    """quant/qrows_i8.wgsl over `rows` rows of k (x's f32 rows, or a GGUF weight's rows):
    (the int8 words, the scales K/group x rows)."""
    return lower_int8_prefill.rows_to_int8(
        L, "quant/qrows_i8", src, _weight(fmt, rows, k) if weight else None, rows, k, group,
        (k // group, rows), name)


def _weight(fmt: str, n: int, k: int) -> dict[str, Any]:
    """An (n, k) weight of format fmt as the int8 row kernels take it: its format overrides
    and word count."""
    return {**format_overrides(fmt), "nw": quant.nwords(fmt, n, k)}


def _mmq(L: EmitContext, bindings: dict[str, Buf], has_bias: bool, fmt: str,
         m: int, n: int, k: int) -> None:
    """The int8 prefill: x's and the weight's rows to int8, then qmatmul_mmq (its tile shapes
    as autotuned variants, the first leading)."""
    group = mmq_group(k)
    x = bindings["x"]
    key = (x.id, k, group)
    if x.kind != "temp" or key not in L.rows_i8:   # (a temp is written once: share it)
        L.rows_i8[key] = _rows_i8(L, x, False, m, k, group, fmt, "qrows_i8[x]")
    xq, xs = L.rows_i8[key]
    wq, ws = _rows_i8(L, bindings["w"], True, n, k, group, fmt, f"qrows_i8[{fmt}]")
    room = L.info.limit("max-compute-workgroup-storage-size", 16384)
    shapes = [sh for sh in smat.MMQ_SHAPES if group % sh.bk == 0 and
              smat.mmq_workgroup_bytes(sh) <= room and
              sh.threads <= L.info.max_workgroup_invocations]
    shapes.sort(key=lambda sh: smat.mmq_rank(sh, m, n))
    if smat.MMQ_FORCE is not None:      # tests and probes: one shape
        shapes = [sh for sh in shapes if smat.mmq_name(sh) == smat.MMQ_FORCE]
        if not shapes:
            raise ValueError(f"smat.MMQ_FORCE: {smat.MMQ_FORCE!r} is not a qmatmul_mmq shape "
                             f"that fits this call (K group {group}) and adapter; shapes: "
                             f"{[smat.mmq_name(sh) for sh in smat.MMQ_SHAPES]}")
    made = []
    for sh in shapes:                   # (one kernel a shape: the lead's is the call's own)
        kern = kernel("quant/qmatmul_mmq", **smat.mmq_slots(sh, smat.SGID_BUILTIN))
        made.append((kern, Variant.of(smat.mmq_name(sh), kern,
                                      (-(-n // sh.bn), -(-m // sh.bm), 1),
                                      {"HAS_BIAS": has_bias, "G": group})))
    lead_kernel, lead = made[0]
    L.emit(lead_kernel, {"xq": xq, "xs": xs, "wq": wq, "ws": ws, "bias": bindings["bias"],
                         "out": bindings["out"]}, {"M": m, "N": n, "K": k}, lead.grid,
           lead.overrides, name=lead.name, variants=[v for _, v in made[1:]],
           tune_key=f"qmatmul_mmq {m}x{n}x{k}")


@lowering("qmatmul")
def _qmatmul(L: EmitContext, node: Node) -> Buf:
    smat.check_forced_i8(L.info)        # (smat.MMQ_FORCE where the adapter cannot run it)
    x_id, w_id = node.inputs[0], node.inputs[1]
    fmt, n, k = node.attrs["format"], node.attrs["n"], node.attrs["k"]
    m = math.prod(L.shape(x_id)[:-1])
    fused, prologue = L.fusions.qgemv.get(node.id), L.fusions.norm_prologue.get(x_id)
    group = L.fusions.qkv.get(node.id)
    if group is not None:
        return _qkv_gemv(L, node, group, prologue, m)
    if fused is not None or prologue is not None or node.id in L.fusions.attn_combine:
        return _fused_gemv(L, node, fused, prologue, m)
    out = L.temp(L.shape(node.id), node.dtype)
    has_bias = len(node.inputs) == 3
    bindings = {"x": L.buf(x_id), "w": L.buf(w_id),
                "bias": L.buf(node.inputs[2]) if has_bias else L.dummy(0), "out": out}
    params = {"M": m, "N": n, "K": k, "nw": quant.nwords(fmt, n, k)}
    if int8_decode.applies(m, fmt, n, k, L.dtype(x_id).name, has_bias):   # opt-in int8 x
        lower_int8_decode.emit(L, bindings["x"], None, bindings["w"], None, None, out, fmt,
                               format_overrides(fmt), m, n, k, "")
        return out
    if lower_int8_prefill.ok(L.info, m, n, k, L.dtype(x_id).name):   # opt-in: int8 products
        lower_int8_prefill.emit(L, bindings, has_bias, fmt, _weight(fmt, n, k), m, n, k)
        return out
    if dequant_first(L.info, m, n, k, L.dtype(x_id).name):   # decoded once, the f32 matmul
        wt = L.temp((k, n), dt.float32)
        L.emit(kernel("quant/qdequant_t"), {"w": bindings["w"], "out": wt},
               {"N": n, "K": k, "nw": params["nw"]}, (-(-n // 64), k // 32, 1),
               format_overrides(fmt), name=f"qdequant_t[{fmt}]")
        emit_matmul(L, bindings["x"], wt, bindings["bias"] if has_bias else None, out,
                    (m, n, k, 1), (0, 0), dt.float32, "f32")
        return out
    if mmq_ok(L.info, m, n, k, L.dtype(x_id).name):         # int8 on tensor cores
        _mmq(L, bindings, has_bias, fmt, m, n, k)
        return out
    overrides = {**format_overrides(fmt), "HAS_BIAS": has_bias}
    t = L.T(L.dtype(x_id))
    # 128x128 or 64x64 tiles (quant/qmatmul_tiled.wgsl's R = 2 or 1)
    tiles = {r: Variant.of(f"qmatmul_{64 * r}", kernel("quant/qmatmul_tiled", T=t, R=str(r)),
                           (-(-n // (64 * r)), -(-m // (64 * r)), 1), overrides)
             for r in (2, 1)}
    smats = qsmat_variants(L, m, n, t, overrides) if m > GEMV_ROWS else []
    forced = smat.MODE not in (None, "off")
    if m <= fuse.GEMV_MAX_M and not (forced and smats):   # GEMVs, 4 rows a group
        _emit_gemv(L, kernel("quant/qgemv", T=t), "qgemv", bindings, params, overrides,
                   [tiles[1], tiles[2], *(v for _, _, v in smats)] if m > GEMV_ROWS else [],
                   f"qgemv {fmt}/{t}")
    elif smats:                         # tensor cores (compiler/smat.py): they lead
        (shape, lead_kernel, lead), rest = smats[0], [v for _, _, v in smats[1:]]
        pieces = qsmat_pieces(m, n, k, shape)
        if pieces > 1:                  # K pieces stacked in a temp, then summed (+ bias)
            parts = L.temp((pieces, m, n), node.dtype)
            L.emit(lead_kernel, {**bindings, "bias": L.dummy(0), "out": parts}, params,
                   (lead.grid[0], lead.grid[1], pieces),
                   {**lead.overrides, "HAS_BIAS": False, "KSPLIT": pieces},
                   name=f"{lead.name}[split-k {pieces}]")
            sum_parts(L, [(parts, z * m * n) for z in range(pieces)],
                       bindings["bias"] if has_bias else None, out, (m, n), node.dtype, "none",
                       "qmatmul split-K sum")
        else:
            L.emit(lead_kernel, bindings, params, lead.grid, lead.overrides, name=lead.name,
                   variants=[*rest, tiles[1], tiles[2]],
                   tune_key=f"qmatmul {fmt}/{t} {m}x{n}x{k}")
    else:
        first = 2 if -(-m // 128) * -(-n // 128) >= BIG_GRID else 1
        pick, other = tiles[first], tiles[3 - first]
        L.emit(kernel("quant/qmatmul_tiled", T=t, R=str(first)), bindings, params, pick.grid,
               overrides, name=pick.name, variants=[other],
               tune_key=f"qmatmul {fmt}/{t} {m}x{n}x{k}")
    return out


def qsmat_variants(L: EmitContext, m: int, n: int, t: str, overrides: dict[str, Any]
                   ) -> list[tuple[smat.SmatShape, Kernel, Variant]]:
    """quant/qmatmul_smat.wgsl's tile shapes, as (shape, kernel, variant), for an unfused
    qmatmul of m > GEMV_ROWS rows where the adapter has f16 subgroup matrices (N % 8 == 0),
    the default first (as lower_matmul.smat_variants orders them); [] elsewhere or with
    smat.MODE "off".
    They lead past fuse.GEMV_MAX_M rows, where the tiled kernels would run, and are the GEMV's
    variants below it: on an H200 under Dawn a SmolLM2-shaped 128-token prefill took 29.3 ms
    with every projection on them, unfused, against 11.1 ms through the fused GEMVs (its
    64x64 tiles too few for the GPU at N = 576). smat.MODE naming a shape forces it, at any
    row count (SubgroupMatrixUnavailable where the adapter lacks the feature)."""
    forced = smat.MODE if smat.MODE not in (None, "off") else None
    if forced is not None:
        smat.check_forced(L.info, forced)
    if smat.MODE == "off" or not smat.available(L.info) or n % 8:
        return []
    shapes = [sh for sh in smat.SHAPES if smat.fits(L.info, sh, b_by_n=True) and
              (forced is None or sh.name == forced)]
    shapes.sort(key=lambda sh: smat.default_rank(sh, m, n, 1))
    return [(sh, kern, Variant.of(f"q{sh.name}", kern, (-(-n // sh.bn), -(-m // sh.bm), 1),
                              overrides))
            for sh in shapes
            for kern in [kernel("quant/qmatmul_smat", T=t,
                                **smat.slots(sh, smat.SGID_BUILTIN, b_by_n=True))]]


FUSED_SMAT_WORKGROUPS = 64      # the default: the biggest tiles that still give this many


def fused_smat_rank(shape: smat.SmatShape, m: int, n: int) -> tuple[int, int, int, int]:
    """Sort key of smat.FUSED_SHAPES for an m x n call (the first is the default): the biggest
    tiles with at least FUSED_SMAT_WORKGROUPS workgroups, else the most workgroups; a k step of
    64 first (the K loop waits on each step's loads: a SmolLM2-shaped 128-token prefill under
    Dawn on an H100 took 4.99 GPU ms with every projection at 32x32 k64, 7.01 at k32 and 5.57
    at k96, bench/results/2026-11-28-h100-dawn-fused-smat-prefill.json), then the shorter;
    smat.FUSED_TUNED_ONLY last (offered to the autotuner, never the default)."""
    wgs = -(-m // shape.bm) * -(-n // shape.bn)
    if shape in smat.FUSED_TUNED_ONLY:
        return (2, -wgs, shape.bk != 64, shape.bk)
    if wgs >= FUSED_SMAT_WORKGROUPS:
        return (0, -shape.bm * shape.bn, shape.bk != 64, shape.bk)
    return (1, -wgs, shape.bk != 64, shape.bk)


def _fused_smat(L: EmitContext, shader: str, m: int, cols: list[int], k: int, what: str,
                overrides: dict[str, Any], w2: bool, slots: dict[str, str]
                ) -> list[tuple[Kernel, Variant]]:
    """`shader` (quant/qmatmul_smat_fused or quant/qmatmul_smat_qkv: common/qsmat_body.wgsl)
    as (kernel, variant) per smat.FUSED_SHAPES shape for an m-row call over weights of `cols`
    rows each (their column tiles side by side along x), the default first: where the adapter
    has f16 subgroup matrices, every weight's rows are a multiple of 8 and K a whole number of
    the shape's k steps; [] elsewhere or with smat.MODE "off". smat.MODE naming a shape
    ("matmul_smat_32x32_s2x2_k32") keeps only it (SubgroupMatrixUnavailable where the adapter
    lacks the feature). w2: SwiGLU's second weight tiles; slots: the shader's own (T, and
    quant/qgemv_qkv.wgsl's segment-format slots for the q/k/v kernel, its variant)."""
    forced = smat.MODE if smat.MODE not in (None, "off") else None
    if forced is not None:
        smat.check_forced(L.info, forced)
    if smat.MODE == "off" or not smat.available(L.info) or any(c % 8 for c in cols):
        return []
    room = L.info.limit("max-compute-workgroup-storage-size", 16384)
    shapes = [sh for sh in smat.FUSED_SHAPES
              if k % sh.bk == 0 and sh.threads <= L.info.max_workgroup_invocations and
              smat.fused_workgroup_bytes(sh, w2) <= room and
              (forced is None or sh.name == forced)]
    shapes.sort(key=lambda sh: fused_smat_rank(sh, m, sum(cols)))
    out = []
    for sh in shapes:
        kern = kernel(shader, **slots, **smat.fused_slots(sh, w2))
        grid = (sum(-(-c // sh.bn) for c in cols), -(-m // sh.bm), 1)
        out.append((kern, Variant.of(f"qgemv[{what}]_smat_{sh.bm}x{sh.bn}_k{sh.bk}", kern, grid,
                                     overrides)))
    return out


def _fused_gemv(L: EmitContext, node: Node, fused: QGemv | None,
                prologue: tuple[int, int, float] | None, m: int) -> Buf:
    """The GEMV with its layer neighbours (fuse.py): quant/qgemv_fused.wgsl."""
    x_id, w_id = node.inputs[0], node.inputs[1]
    fmt, n, k = node.attrs["format"], node.attrs["n"], node.attrs["k"]
    q = fused or QGemv(last=node.id)
    nodes = L.graph.nodes
    cache = nodes[q.cache] if q.cache is not None else None
    rope = nodes[q.rope] if q.rope is not None else None
    # the result in place in the KV cache (the cache_write's value), or a new buffer
    out = L.buf(cache.inputs[0]) if cache else L.temp(L.shape(q.last), node.dtype)
    # (B, S, heads, hd): the reshaped result the rope / cache_write read
    heads = L.shape(rope.id) if rope else L.shape(cache.inputs[1]) if cache else (1, m, 1, n)
    pos = rope.inputs[1] if rope else cache.inputs[2] if cache else None
    att = L.fusions.attn_combine.get(node.id)
    partials = L.attn_partials.get(att) if att is not None else None
    if att is not None:                 # x is the attention's output (reshape absorbed)
        x_id = att
        pos = nodes[att].inputs[3] if partials else pos
    what = "+".join(["combine"] * bool(partials) + ["rms_norm"] * bool(prologue) +
                    ["swiglu"] * (q.up is not None) +
                    ["res"] * (q.res is not None) + ["rope"] * (rope is not None) +
                    ["cache"] * (cache is not None))
    if (not partials and rope is None and cache is None and len(node.inputs) == 2
            and (q.up is None or nodes[q.up].attrs["format"] == fmt)
            and int8_decode.applies(m, fmt, n, k, L.dtype(x_id).name)):
        lower_int8_decode.emit(L, L.buf(prologue[0] if prologue else x_id),
                               (L.buf(prologue[1]), prologue[2]) if prologue else None,
                               L.buf(w_id),
                               L.buf(nodes[q.up].inputs[1]) if q.up is not None else None,
                               L.buf(q.res) if q.res is not None else None, out, fmt,
                               format_overrides(fmt), m, n, k, what)
        L.values[q.last] = out
        return out
    bindings = {"x": partials[0] if partials else L.buf(prologue[0] if prologue else x_id),
                "w": L.buf(w_id),
                "w2": L.buf(nodes[q.up].inputs[1]) if q.up is not None else L.dummy(1),
                "g": L.buf(prologue[1]) if prologue else L.dummy(2),
                "res": L.buf(q.res) if q.res is not None else L.dummy(3),
                "pos": L.buf(pos) if pos is not None else L.dummy(4),
                "freq": rope_freq(L, heads[-1], rope.attrs["base"], rope.attrs.get("factors", ()))
                if rope else L.dummy(5),
                "out": out}
    params = {"M": m, "N": n, "K": k, "nw": quant.nwords(fmt, n, k),
              "eps": prologue[2] if prologue else 0.0, "hd": heads[-1], "S": heads[1],
              "T": L.shape(cache.id)[2] if cache else 1, "G": 1, "nsplit": 1, "gran": 1}
    if partials:                        # COMBINE: the attention's chunk cut and layout
        a = partials[1]
        params.update({"hd": 4 * a["D4"], "S": a["S"], "T": a["T"], "G": a["G"],
                       "nsplit": a["nsplit"], "gran": a["gran"]})
    overrides = {**format_overrides(fmt), "NORM": prologue is not None,
                 "COMBINE": partials is not None, "XS": k // 4 if partials else 1,
                 "SWIGLU": q.up is not None, "RES": q.res is not None, "ROPE": rope is not None,
                 "CACHE": cache is not None,
                 "KV_ROWS": pos is not None and len(L.shape(pos)) == 2}
    t = L.T(L.dtype(x_id))
    tiles: list[Variant] = []
    lead = None
    if m > GEMV_ROWS:                   # prefills: the tiled kernel, K split in a workgroup
        tiled = kernel("quant/qmatmul_fused", T=t)
        tiles = [Variant.of(f"qgemv[{what}]_tile{rg}", tiled, (-(-n // 64), -(-m // (4 * rg)), 1),
                            {**overrides, "RG": rg, "KS": 16 // rg}) for rg in TILE_RG]
        smats = [] if partials else _fused_smat(L, "quant/qmatmul_smat_fused", m, [n], k, what,
                                                overrides, q.up is not None, {"T": t})
        if smats and m >= TILE_MIN_M:   # tensor cores lead (compiler/smat.py)
            lead, tiles = smats[0], [*(v for _, v in smats[1:]), *tiles]
        elif m >= TILE_MIN_M and not cpu_adapter(L):
            lead = (tiled, tiles.pop(TILE_RG.index(tile_rg(m, n))))
        else:
            tiles += [v for _, v in smats]
    _emit_gemv(L, kernel("quant/qgemv_fused", T=t), f"qgemv[{what}]", bindings, params,
               overrides, tiles, f"qgemv_fused {what} {fmt}/{t}", lead)
    L.values[q.last] = out
    return out


def _qkv_gemv(L: EmitContext, node: Node, group: tuple[int, int, int],
              prologue: tuple[int, int, float] | None, m: int) -> Buf:
    """A layer's q, k and v GEMVs (those of `group` that are not -1) in one dispatch
    (fuse._qkv_group): quant/qgemv_qkv.wgsl, with a format a segment where they differ. q's
    result goes to a new buffer (rotated where its rope was fused), k's and v's into their KV
    caches. Returns node's value."""
    nodes = L.graph.nodes
    k_id = group[1]
    fused = {i: L.fusions.qgemv.get(i) or QGemv(last=i) for i in group if i >= 0}
    fq, fk = fused.get(group[0]), fused[k_id]
    fv = fused.get(group[2])
    fmt, k = nodes[k_id].attrs["format"], nodes[k_id].attrs["k"]
    ns = [nodes[i].attrs["n"] if i >= 0 else 0 for i in group]
    fmts = [nodes[i].attrs["format"] if i >= 0 else fmt for i in group]
    assert fk.cache is not None
    kc = nodes[fk.cache]
    vc = nodes[fv.cache] if fv is not None and fv.cache is not None else None
    rope = nodes[fq.rope] if fq is not None and fq.rope is not None else \
        nodes[fk.rope] if fk.rope is not None else None
    heads = L.shape(kc.inputs[1])                               # (B, S, kv heads, hd)
    out = L.temp(L.shape(fq.last), nodes[group[0]].dtype) if fq is not None else L.dummy(7)
    x_id = nodes[k_id].inputs[0]
    bindings = {"x": L.buf(prologue[0] if prologue else x_id),
                "wq": L.buf(nodes[group[0]].inputs[1]) if fq is not None else L.dummy(1),
                "wk": L.buf(nodes[k_id].inputs[1]),
                "wv": L.buf(nodes[group[2]].inputs[1]) if vc is not None else L.dummy(3),
                "g": L.buf(prologue[1]) if prologue else L.dummy(2),
                "pos": L.buf(kc.inputs[2]),
                "freq": rope_freq(L, heads[-1], rope.attrs["base"],
                                  rope.attrs.get("factors", ())) if rope else L.dummy(5),
                "kc": L.buf(kc.inputs[0]),
                "vc": L.buf(vc.inputs[0]) if vc is not None else L.dummy(6), "out": out}
    params = {"M": m, "K": k, "eps": prologue[2] if prologue else 0.0, "hd": heads[-1],
              "S": heads[1], "T": L.shape(kc.id)[2], "nq": ns[0], "nk": ns[1], "nv": ns[2],
              "nwq": quant.nwords(fmts[0], ns[0], k) if ns[0] else 0,
              "nwk": quant.nwords(fmts[1], ns[1], k),
              "nwv": quant.nwords(fmts[2], ns[2], k) if ns[2] else 0,
              "rq": int(fq is not None and fq.rope is not None), "rk": int(fk.rope is not None)}
    overrides: dict[str, Any] = {"NORM": prologue is not None,
                                 "KV_ROWS": len(L.shape(kc.inputs[2])) == 2}
    slots: dict[str, str] = {}
    if len(set(fmts)) == 1:
        overrides.update(format_overrides(fmt))
    else:                               # a format a segment (common/qformat_segments.wgsl)
        slots = {"SEGMENT_FORMAT": "set_format(seg);",
                 "QFORMAT_DECLS": raw_shader("common/qformat_segments")}
        for name, f in zip("QKV", fmts):
            overrides.update({f"{key}_{name}": v for key, v in format_overrides(f).items()})
    what = "+".join(w for w, i in zip("qkv", group) if i >= 0)
    t = L.T(L.dtype(x_id))
    if all(int8_decode.applies(m, f, sum(ns), k, L.dtype(x_id).name) for f in fmts):
        lower_int8_decode.emit_qkv(L, (bindings["g"], params["eps"]) if prologue else None,
                                   bindings, params, [format_overrides(f) for f in fmts], ns,
                                   overrides["KV_ROWS"], what)
    else:
        # prefills (fuse groups their q, k and v where smat.fused_prefills)
        smats = _fused_smat(L, "quant/qmatmul_smat_qkv", m, ns, k, what, overrides, False,
                            {"T": t, **slots}) if m >= TILE_MIN_M else []
        _emit_gemv(L, kernel("quant/qgemv_qkv", T=t, **slots), f"qgemv[{what}]", bindings,
                   {**params, "N": sum(ns)}, overrides, [v for _, v in smats[1:]],
                   f"qgemv_qkv {what} {fmt}/{t}", smats[0] if smats else None, segments=ns)
    if fq is not None:
        L.values[fq.last] = out
    L.values[fk.last] = L.buf(kc.inputs[0])
    if fv is not None and vc is not None:
        L.values[fv.last] = L.buf(vc.inputs[0])
    return L.values[fused[node.id].last]


def tile_rg(m: int, n: int) -> int:
    """quant/qmatmul_fused.wgsl's default row quads per tile: the tallest tile that still
    gives >= 256 workgroups (of 256 threads), else the smallest. On an H100 at M = 128
    (bench/probes/qmatmul_fused_probe.py, us, tile1 / tile2 / tile4): q 576x576 26 / 30 / 40,
    gate+up 2x1536x576 67 / 62 / 64, down 576x1536 41 / 58 / -, o 21 / 27 / 40."""
    fit = [rg for rg in TILE_RG if -(-n // 64) * -(-m // (4 * rg)) >= 256]
    return max(fit, default=TILE_RG[0])


def _emit_gemv(L: EmitContext, gemv: Kernel, name: str, bindings: dict[str, Buf],
               params: dict[str, Any], overrides: dict[str, Any], extra: list[Variant],
               tune: str, lead: tuple[Kernel, Variant] | None = None,
               segments: list[int] | None = None) -> None:
    """Emit a quantized GEMV (params M, N, K) over row groups of up to GEMV_ROWS rows, the
    default threads per weight row first and the other TPRs (and `extra`) as variants; or
    `lead` (another kernel, as its variant) first, and every GEMV shape a variant.
    `segments`: the weights' row counts of a kernel that runs several along x (their
    workgroups side by side; N = their sum)."""
    m, n, k = params["M"], params["N"], params["K"]
    if segments is not None:            # (the shader reads each segment's N instead)
        params = {key: v for key, v in params.items() if key != "N"}
    rows = min(m, GEMV_ROWS)
    first = gemv_shape(n, k, cpu_adapter(L))

    def width(rpt: int) -> int:         # workgroups along x
        return sum(-(-s // (GEMV_RPW * rpt)) for s in (segments or [n]))

    def shape(tpr: int, rpt: int, rq: int) -> tuple[str, tuple[int, int, int], dict[str, Any]]:
        return (f"{name}_{tpr}" + (f"x{rpt}" if rpt > 1 else "") + (f"q{rq}" if rq > 1 else ""),
                (width(rpt), -(-m // (rows * rq)), 1),
                {**overrides, "ROWS": rows, "TPR": tpr, "RPT": rpt, "RQ": rq})

    shapes = [(t, r, 1) for t, r in GEMV_SHAPES]
    if m > GEMV_ROWS:                   # prefills: a unit of weight meets more x rows
        shapes += [(t, 1, q) for t in GEMV_TPR for q in GEMV_RQ if q * GEMV_ROWS < 2 * m]
        if GEMV_RPT_RQ and m <= GEMV_RPT_RQ_MAX_M and not cpu_adapter(L):
            shapes += [(t, 2, q) for t in GEMV_TPR for q in GEMV_RQ if q * GEMV_ROWS < 2 * m]
    others = [Variant.of(label, gemv, grid, consts)
              for label, grid, consts in (shape(*s) for s in shapes if s != first)]
    if "UN" in dict(gemv.sig.overrides) and not cpu_adapter(L):
        for tpr in GEMV_TPR:            # several units in flight per thread (GPUs): UN
            for un in GEMV_UNROLL:      # units TPR apart (u), or UN neighbours (w: WIDE)
                label, grid, consts = shape(tpr, 1, 1)
                others.append(Variant.of(f"{label}u{un}", gemv, grid, {**consts, "UN": un}))
                others.append(Variant.of(f"{label}w{un}", gemv, grid,
                                         {**consts, "UN": un, "WIDE": True}))
    label, grid, consts = shape(*first)
    if lead is not None:                # another kernel runs by default
        first_kernel, v = lead
        L.emit(first_kernel, bindings, params, v.grid, v.overrides, name=v.name,
               variants=[Variant.of(label, gemv, grid, consts), *others, *extra],
               tune_key=f"{tune} {m}x{n}x{k}")
        return
    L.emit(gemv, bindings, params, grid, consts, name=label, variants=others + extra,
           tune_key=f"{tune} {m}x{n}x{k}")


@lowering("qgather")
def _qgather(L: EmitContext, node: Node) -> Buf:
    w_id, ids_id = node.inputs
    fmt, n, k = node.attrs["format"], node.attrs["n"], node.attrs["k"]
    units = math.prod(L.shape(ids_id)) * k // 8
    out = L.temp(L.shape(node.id), node.dtype)
    L.emit(kernel("quant/qgather"), {"w": L.buf(w_id), "ids": L.buf(ids_id), "out": out},
           {"units": units, "N": n, "K": k, "nw": quant.nwords(fmt, n, k)}, L.grid(units),
           format_overrides(fmt), name=f"qgather[{fmt}]")
    return out
