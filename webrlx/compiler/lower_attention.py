"""Attention lowerings, picked by shape and adapter in attention_path: fused flash-style kernels
that read q/k/v as strided views (query rows sharing K/V tiles; or a workgroup per query row
for a few rows over many keys on a GPU), or, for many rows with a score matrix that fits a
binding, two tiled matmuls around a masked softmax, which run at matmul speed."""
from __future__ import annotations

import math
from typing import Any

from .. import dtype as dt
from ..graph import Node
from ..kernels import kernel, raw_shader
from ..shape import strides_of
from . import smat
from .emit import EmitContext
from .lower_matmul import emit_matmul
from .lower_rows import softmax_rows_kernel
from .program import Buf
from .registry import lowering


def rows_kt(software: bool) -> int:
    """Keys per tile of attention_rows.wgsl: 16 on software adapters (half the workgroup
    memory, which Chromium's SwiftShader compiles at ~75 ms per KB), else 32."""
    return 16 if software else 32


def rows_attention_storage(d: int, kt: int = 32) -> int:
    """Workgroup bytes of attention_rows at head dim d: K, V tiles, keep, m, l."""
    return 2 * kt * -(-d // 4) * 16 + kt * 4 + 2 * 64 * 4


def flash_attention_storage(d: int) -> int:
    """Workgroup bytes of attention_flash at head dim d: Q and V tiles of 64 x d, and K/P."""
    return 2 * 64 * d * 4 + 16384


def flash_fits(L: EmitContext, d: int) -> bool:
    """attention_flash takes head dims 4, 8, 16, 32 and 64 (16 threads cover a row's column
    quads, split over keys) whose tiles fit the adapter's workgroup memory."""
    return d % 4 == 0 and 16 % (d // 4) == 0 and L.info.limit(
        "max-compute-workgroup-storage-size", 16384) >= flash_attention_storage(d)


ATTENTION_THREADS = 8192   # split a row's keys over threads until about this many run (few rows)
MATMUL_ATTENTION_ROWS = 64  # q and kv lengths from which the two-matmul form is used
SOFTWARE_ROWS_MIN_HEADS = 48  # on CPU adapters, batch x heads from which "rows" beats matmul
SOFTWARE_REGS_MAX_ROWS = 4 * 12 * 128  # on CPU adapters, "regs" below this many query rows
# attention_flash's row max and sum over subgroup shuffles where the device's subgroups were
# checked to be runs of 16+ consecutive threads (else through workgroup memory); tests turn it
# off or force a probed size
FLASH_SUBGROUPS = True
# GPUs: attention_flash where queries and keys are at most FLASH_MAX_KEYS at head dim 64
# (twice as many at 32: the bound is on keys x head dim), and at least MATMUL_ATTENTION_ROWS;
# longer ones take the two matmuls, which run faster there, unless the rule below holds.
# H200, GPU ms by timestamps, matmul path / flash (bench/probes/attention_paths_probe.py,
# bench/results/2026-11-26-h200-attention-flash-*.json), since its vec4 loads
# (2026-11-26-h200-attention-flash-v4.json): 32x12x128x32 masked 0.090 /
# 0.055; 1x12x128x64 masked 0.031 / 0.018; 1x12x512x64 0.065 / 0.049; 1x12x1024x64 0.173 /
# 0.173; 4x12x1024x64 0.524 / 0.542; 1x12x2048x64 0.530 / 0.499 (wall: a tie); 2x12x2048x64
# 0.991 / 1.037; 8x12x1024x64 0.999 / 1.060; 1x12x4096x64 1.931 / 2.026.
# With key chunks (below), up to FLASH_LONG_MAX_KEYS while the query tiles (batch x heads x
# tiles) are at most FLASH_LONG_MAX_WGS: wall ms 1x12x1024x64 0.171 / 0.154 (2 chunks),
# 1x12x2048x64 0.568 / 0.565, but 4x12x1024x64 0.575 / 0.639, 2x12x2048x64 1.042 / 1.116
# (2026-11-26-h200-attention-flash-splits.json).
FLASH_MAX_KEYS = 512
FLASH_LONG_MAX_KEYS = 2048
FLASH_LONG_MAX_WGS = 384
# attention_flash's key chunks (SPLITS): doubled while the workgroups (batch x heads x query
# tiles x chunks) stay under FLASH_SPLIT_WGS and each chunk keeps FLASH_SPLIT_MIN_KEYS keys.
# FLASH_SPLITS forces a count (probes, tests).
FLASH_SPLIT_WGS = 256      # 1x12x1024x64: 192 query tiles, 2 chunks 0.172 -> 0.145 ms GPU;
                           # 1x12x2048x64: 384, 2 chunks 0.496 -> 0.546 (so none)
FLASH_SPLIT_MIN_KEYS = 512
FLASH_SPLITS: int | None = None


def flash_splits(b: int, h: int, lq: int, lk: int) -> int:
    """Key chunks of attention_flash for this shape (1: none)."""
    if FLASH_SPLITS is not None:
        return max(1, FLASH_SPLITS)
    wgs, splits = b * h * -(-lq // 64), 1
    while wgs * splits < FLASH_SPLIT_WGS and lk // (splits * 2) >= FLASH_SPLIT_MIN_KEYS \
            and splits < 8:
        splits *= 2
    return splits


# "row", "rows", "regs", "flash" or "matmul": probes, tests; "smat": flash on subgroup matrices
# (f16 attention; an error where the adapter lacks them)
FORCE_PATH: str | None = None


def attention_path(L: EmitContext, b: int, h: int, lq: int, lk: int, d: int,
                   flash_ok: bool = True) -> str:
    """Which attention kernel runs: "matmul" (two tiled matmuls around a softmax), "rows"
    (attention_rows.wgsl: query rows share K/V tiles), "regs" (attention_regs.wgsl: a thread
    per query row, no workgroup memory), "row" (attention.wgsl: a 256-thread workgroup per
    query row, for a few query rows over many keys on a GPU) or "flash" (attention_flash.wgsl:
    register-tiled 64-row query tiles over 64-key tiles, GPUs, up to FLASH_MAX_KEYS; flash_ok
    False leaves it out).

    Measured with bench/probes/attention_probe.py (masked, head dim 32, ms; lavapipe / SwiftShader),
    after the register-only matmuls (matmul_regs) came to CPU adapters:
      3x12x12:   rows 3.1 / 9.8    regs 2.4 / 2.2    matmul 4.0 / 34
      1x12x128:  rows 19 / 73      regs 8.4 / 42     matmul 11.3 / 64
      4x12x128:  rows 37 / 173     regs 36 / 178     matmul 43 / 251
      8x12x128:  rows 63 / 313     regs 72 / 408     matmul 83 / 546
      1x12x4x512 (lq x lk): rows 3.3 / 10.1   regs 1.9 / 5.5   matmul 12.6 / 60
    (before them, "row" 16 / 130 at 3x12x12 and 789 / 3745 at 8x12x128: it loses everywhere
    on CPU adapters). So CPU adapters take "regs" below SOFTWARE_REGS_MAX_ROWS query rows in
    all (batch x heads x rows) and "rows" from there. On GPUs the matmul form keeps the large
    shapes (tensor of scores in one binding), and "row" the few-query, many-key ones (its 256
    threads split the keys; "rows" gives a row at most 8)."""
    software = L.info.software
    rows_ok = d <= 64 and L.info.limit("max-compute-workgroup-storage-size", 16384) >= \
        rows_attention_storage(d, rows_kt(software))
    if FORCE_PATH is not None:
        if FORCE_PATH == "rows" and not rows_ok:
            raise ValueError("attention: the rows kernel does not fit this shape or adapter")
        if FORCE_PATH == "flash" and not flash_fits(L, d):
            raise ValueError("attention: the flash kernel does not fit this shape or adapter")
        if FORCE_PATH == "smat":             # the flash path, on subgroup matrices (f16)
            if not smat.attention_ok(L.info, d):
                smat.check_forced(L.info, "attention_smat")
                raise smat.SubgroupMatrixUnavailable(
                    f"attention_smat: head dim {d} (supported: {smat.ATTENTION_DIMS}) or "
                    f"adapter {L.info.name!r} (32-lane subgroups, "
                    f"{smat.attention_workgroup_bytes(d)} bytes of workgroup memory) does not fit")
            return "flash"
        return FORCE_PATH
    if software and (b * h * lq < SOFTWARE_REGS_MAX_ROWS or not rows_ok):
        return "regs"
    keys = max(lq, lk) * d // 64               # (keys at head dim 64)
    short = keys <= FLASH_MAX_KEYS or (keys <= FLASH_LONG_MAX_KEYS
                                       and b * h * -(-lq // 64) <= FLASH_LONG_MAX_WGS)
    if flash_ok and short and not software and MATMUL_ATTENTION_ROWS <= min(lq, lk) \
            and flash_fits(L, d):
        return "flash"
    if min(lq, lk) >= MATMUL_ATTENTION_ROWS and b * h * lq * lk * 4 <= L.info.max_binding_size \
            and (not software or not rows_ok or b * h < SOFTWARE_ROWS_MIN_HEADS):
        return "matmul"
    if not rows_ok or (not software and lq < 4 and lk >= 256):
        return "row"
    return "rows"


def _head_view(L: EmitContext, node_id: int) -> Any:
    """The lazy view of a (B, H, L, D) operand that the fused kernels can read in place (dim
    stride 1): (buffer, ..., element offset, strides), or None."""
    lz = L.lazy.get(node_id)
    view = lz.view() if lz else None
    return view if view is not None and view[3][3] == 1 else None


def _bhd_strides(L: EmitContext, node_id: int, taken: dict[int, str], name: str
                 ) -> tuple[Buf, int, tuple[int, int, int], str | None]:
    """(buffer, element offset, (batch, head, row) strides, in) of a (B, H, L, D) operand named
    `name`; views (dim stride 1) need no copy. `in` names the earlier operand ("q" or "k")
    whose binding already holds the view's buffer (`taken`: buffer id -> operand): the kernel
    reads this operand through that binding (attention_io's K_IN_Q / V_IN), since one buffer
    in several bindings of a dispatch that also writes it is an error in WebGPU (Dawn)."""
    view = _head_view(L, node_id)
    if view is not None:
        del L.lazy[node_id]
        holder = taken.setdefault(view[0].id, name)
        return view[0], view[2], view[3][:3], (holder if holder != name else None)
    st = strides_of(L.shape(node_id))
    return L.buf(node_id), 0, (st[0], st[1], st[2]), None


def _vec4_view(L: EmitContext, node_id: int) -> bool:
    """Whether _bhd_strides would give node_id's operand at an offset and (batch, head, row)
    strides that are all multiples of 4 (a view read in place, or a compact buffer of a head
    dim that is a multiple of 4); looks without taking the view."""
    view = _head_view(L, node_id)
    if view is None:
        return L.shape(node_id)[3] % 4 == 0
    return view[2] % 4 == 0 and all(x % 4 == 0 for x in view[3][:3])


@lowering("attention", inlines=True)
def _attention(L: EmitContext, node: Node) -> Buf:
    b, h, lq, d = L.shape(node.inputs[0])
    lk = L.shape(node.inputs[1])[2]
    if d > 256:
        raise ValueError(f"attention: head dim {d} > 256 is not supported")
    path = attention_path(L, b, h, lq, lk, d)
    if path == "flash" and FORCE_PATH is None \
            and not all(_vec4_view(L, i) for i in node.inputs[:3]):
        path = attention_path(L, b, h, lq, lk, d, flash_ok=False)   # (flash reads vec4s)
    if path == "matmul":
        return _attention_by_matmul(L, node, (b, h, lq, lk, d))
    taken: dict[int, str] = {}
    (qb, qo, qs, _), (kb, ko, ks, k_in), (vb, vo, vs, v_in) = (
        _bhd_strides(L, i, taken, t) for i, t in zip(node.inputs[:3], "qkv"))
    has_mask = len(node.inputs) == 4
    mask = L.buf(node.inputs[3]) if has_mask else L.dummy(0)
    if k_in is not None:             # read through q's binding (attention_io.wgsl)
        kb = L.dummy(1)
    if v_in is not None:
        vb = L.dummy(2)
    out = L.temp((b, h, lq, d), node.dtype)
    permute = L.fusions.bshd_attention.get(node.id)
    if permute is not None:          # write (B, L, H, D): the consumer's permute is free
        os_ = (lq * h * d, d, h * d)
        L.prelowered[permute] = out
    else:
        os_ = (h * lq * d, lq * d, d)
    strides = {f"{t}_{s}": v for t, st in zip("qkvo", (qs, ks, vs, os_))
               for s, v in zip("bhi", st)}
    strides.update(q_o=qo, k_o=ko, v_o=vo)
    # what every fused kernel takes: q, k, v, mask, out; shapes, scale and strides; masking
    qkv = {"q": qb, "k": kb, "v": vb, "mask": mask}
    args = {"Lq": lq, "Lk": lk, "D": d, "scale": node.attrs["scale"], **strides}
    masking = {"HAS_MASK": has_mask, "CAUSAL": bool(node.attrs.get("causal", False)),
               "K_IN_Q": k_in is not None, "V_IN": {None: 0, "q": 1, "k": 2}[v_in]}
    if path == "flash":              # register-tiled Q x K/V tiles, online softmax (GPUs)
        sg = L.info.subgroup_size
        row_tiles = raw_shader("common/flash_rows_subgroup" if FLASH_SUBGROUPS and sg >= 16
                               else "common/flash_rows")
        if any(x % 4 for x in strides.values()):
            raise ValueError("attention: the flash kernel reads q, k and v as vec4: their "
                             f"offsets and strides must be multiples of 4 (got {strides})")
        if FORCE_PATH == "smat" and node.dtype != dt.float16:
            raise ValueError(f"attention: FORCE_PATH 'smat' needs float16 q, k, v (got "
                             f"{node.dtype.name})")
        if node.dtype == dt.float16 and smat.MODE != "off" and smat.attention_ok(L.info, d):
            # tensor cores (attention_smat.wgsl): f16 q, k, v with f32 products and softmax
            L.emit(kernel("attention/attention_smat", T="f16", QKV="vec4<f16>",
                          **smat.attention_slots(d, smat.SGID_BUILTIN)),
                   {**qkv, "out": out}, args, (-(-lq // 64), h, b), masking,
                   name="attention_smat", read_only=("q", "k", "v"))
            return out
        splits = flash_splits(b, h, lq, lk) if node.dtype == dt.float32 else 1
        part = L.temp((splits * b * h * lq * (d // 4 + 1) * 4,), dt.float32) \
            if splits > 1 else out
        L.emit(kernel("attention/attention_flash", T=L.T(node.dtype), D=str(d), ROW_TILES=row_tiles,
                      QKV=f"vec4<{L.T(node.dtype)}>"),
               {**qkv, "out": part}, args, (-(-lq // 64) * splits, h, b),
               {**masking, "SPLITS": splits},
               name="attention_flash" + (f"[{splits} key chunks]" if splits > 1 else ""),
               read_only=("q", "k", "v"))
        if splits > 1:
            rows_n = b * h * lq
            L.emit(kernel("attention/flash_combine", T=L.T(node.dtype)),
                   {"part": part, "out": out},
                   {"rows": rows_n, "Lq": lq, "H": h, "D4": d // 4, "splits": splits,
                    "o_b": os_[0], "o_h": os_[1], "o_i": os_[2]},
                   L.grid(rows_n * (d // 4), 256), {"WG": 256}, name="flash_combine")
        return out
    if path == "regs":               # a thread per row, no workgroup memory (CPU adapters)
        L.emit(kernel("attention/attention_regs", T=L.T(node.dtype), D4=str(-(-d // 4))),
               {**qkv, "out": out}, args, (-(-lq // L.wg), h, b),
               {**masking, "WG": L.wg, "FULL": d % 4 == 0}, name="attention_regs",
               read_only=("q", "k", "v"))
        return out
    rows = path == "rows"            # threads per row sharing K/V tiles (rows_attention_storage)
    shader = "attention/attention_rows" if rows else "attention/attention"
    # split each row's keys over more threads until ~128K threads are in flight
    split = min(8, 1 << max(0, math.ceil(math.log2(max(1, ATTENTION_THREADS / (b * h * lq))))))
    grid = (-(-lq // (64 // split)), h, b) if rows else (lq, h, b)
    kt = rows_kt(L.info.software)
    slots = {"D4": str(-(-d // 4)), "KT": str(kt), "KD": str(kt * -(-d // 4))} if rows else {}
    L.emit(kernel(shader, T=L.T(node.dtype), **slots), {**qkv, "out": out}, args, grid,
           {**masking, **({"DV4": -(-d // 4), "SPLIT": split} if rows else {})},
           name="attention_rows" if rows else "attention", read_only=("q", "k", "v"))
    return out


def _attention_by_matmul(L: EmitContext, node: Node, dims: tuple[int, int, int, int, int]) -> Buf:
    """S = q k^T (tiled matmul), P = masked softmax(S * scale), out = P v (tiled matmul)."""
    b, h, lq, lk, d = dims
    q_id, k_id, v_id = node.inputs[:3]
    dtype = node.dtype
    q = L.buf(q_id)                                  # (b, h, lq, d), a view is copied once
    # k transposed by 32x32 tiles (10 us at 12x2048x64 on an H200): reading it as B^T inside
    # matmul_tiled_db's tile loads instead (tried) made q k^T 0.218 ms against 0.209 + 0.0105
    kt = L.permuted(k_id, (0, 1, 3, 2))              # (b, h, d, lk)
    v = L.buf(v_id)                                  # (b, h, lk, d)
    scores = L.temp((b * h, lq, lk), dtype)
    emit_matmul(L, q, kt, None, scores, (lq, lk, d, b * h), (lq * d, d * lk), dtype, "f32")
    has_mask = len(node.inputs) == 4
    mask = L.buf(node.inputs[3]) if has_mask else L.dummy(1)
    probs = L.temp((b * h, lq, lk), dtype)
    rows = b * h * lq
    k, rpw = softmax_rows_kernel(L, dtype, lk)
    L.emit(k, {"x": scores, "mask": mask, "out": probs},
           {"rows": rows, "n": lk, "per_batch": h * lq, "lq": lq, "q_off": lk - lq,
            "scale": node.attrs["scale"]},
           L.grid(-(-rows // rpw), 1), {"LOG": False, "HAS_MASK": has_mask, "RPW": rpw,
                                        "CAUSAL": bool(node.attrs.get("causal", False))},
           name="softmax[attention]")
    out = L.temp((b, h, lq, d), dtype)
    emit_matmul(L, probs, v, None, out, (lq, d, lk, b * h), (lq * lk, lk * d), dtype, "f32")
    return out
