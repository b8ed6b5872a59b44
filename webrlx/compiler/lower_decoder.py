"""Lowerings of the decoder ops: rope, cache_write (in place into a KV cache) and
cached_attention (GQA attention over a cache whose valid length is read from the `pos` buffer
at run time, so a decode graph is the same at every step).

cached_attention has three kernels that write the same per-chunk partials, merged by
attn_combine: attn_decode (few query rows per kv head: threads over keys, then over output
columns; flash-decoding across workgroups), attn_prefill (many rows: threads per query row,
K/V tiles in workgroup memory) and attn_flash (many rows on GPUs: register-tiled items x
keys). All take head dims up to 256; the two many-rows ones where the adapter's workgroup
memory holds them (prefill_storage, FLASH_STORAGE), else attn_decode runs. All cut the
valid keys [0, pos + S) into at most `nsplit` chunks at run time, so their work follows
pos + S, not the capacity T. On a CPU adapter (lavapipe, SwiftShader) fewer chunks are cut
and attn_prefill runs for any S (both measured faster there); a discrete GPU gets
attn_decode below PREFILL_FROM_ITEMS items and chunks enough for ~WORKGROUP_TARGET
workgroups.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtype as dt
from ..graph import Node
from ..kernels import kernel
from ..ops_decoder import rope_inv_freq
from . import lower_int8_decode
from .emit import EmitContext
from .program import Buf
from .registry import lowering

DECODE_ITEMS = 8             # RMAX of attn_decode.wgsl: (row, head) items per workgroup
DECODE_THREADS = 128         # its WG: a thread per (item, vec4 column) in the p.v phase
PREFILL_FROM_ITEMS = 24      # items per kv head (S * G) from which attn_prefill runs
PREFILL_PAD = 1              # attn_prefill's PAD: K/V tile rows padded (bank conflicts)
FLASH_STORAGE = (544 + 544 + 512) * 16 + 1056 * 4 + 4   # attn_flash's workgroup memory, any D
FLASH_ITEMS = 32             # attn_flash's items per workgroup (BI) = its keys per tile (BK)
# attn_flash on GPUs up to this head dim; past it attn_prefill. H200, us for a whole prompt
# (bench/probes/prefill_attention_probe.py --d D; bench/results/2026-11-27-h200-prefill-
# attention-wide-heads.json), flash / prefill / decode: D 64 (9/3 heads) S 2048 674 / 744 /
# 1326; D 128 (32/8) S 512 810 / 338 / 763, S 2048 10753 / 3888 / 11156; D 256 (16/8) S 2048
# 11632 / 5582 / 19717. Past 64 attn_flash re-stages Q per key tile and chunk of the head dim.
FLASH_MAX_D = 64
# the prefill kernel: None picks by adapter and head dim (attn_flash on GPUs up to
# FLASH_MAX_D, attn_prefill on CPU adapters and past it); "flash", "prefill" or "decode"
# force one (tests, probes)
PREFILL_KERNEL: str | None = None
WORKGROUP_TARGET = 256       # the split forms add key chunks until about this many workgroups
CPU_WORKGROUP_TARGET = 16    # on a CPU adapter (lavapipe): early-exit workgroups are not free
CHUNK_GRANULE = 64           # keys: a chunk's length is a multiple of this (and of every KT)
# attn_decode on GPUs: chunks of this many of its KT-key tiles at the least. One tile: at
# SmolLM2's lengths (pos < 300, capacity 512) twice the workgroups share the keys, each with
# half the serial tile loop (its combine is merged by the o projection, fuse.py)
DECODE_CHUNK_TILES = 1
ROW_THREADS = 8192           # attn_prefill splits an item's keys until about this many threads
CPU_ROW_THREADS = 128        # the same on a CPU adapter: 8 threads a row for 1-2 rows, then 1


def prefill_shape(d: int) -> tuple[int, int]:
    """attn_prefill's (DS, KT) at head dim d: threads sharing an item's head dim (each holds at
    most 16 vec4 of q and of acc) and keys per tile (a tile of KT x ROW vec4 within 544)."""
    d4 = d // 4
    ds = 1 if d4 <= 16 else 2 if d4 <= 32 else 4
    row = max(16, d4) + PREFILL_PAD
    kt = next(k for k in (32, 16, 8) if k * row <= 544)
    return ds, kt


def prefill_storage(d: int) -> int:
    """Workgroup bytes of attn_prefill at head dim d: K/V tiles, m / l, the partial scores
    (KT x 64 floats when DS > 1, else 1), pos."""
    ds, kt = prefill_shape(d)
    return 2 * 544 * 16 + 2 * 64 * 4 + 4 * (kt * 64 if ds > 1 else 1) + 4


def flash_chunk(d: int) -> int:
    """attn_flash's CW at head dim d: vec4 of a head-dim chunk, <= 16 (16 = one chunk <= 64)."""
    d4 = d // 4
    return 16 if d4 <= 16 else -(-d4 // -(-d4 // 16))


def rope_table(d: int, base: float, factors: tuple[float, ...] = ()) -> np.ndarray:
    """theta_i / (2 pi) for i < d/2 (theta_i = rope_inv_freq(d, base, factors), float64) as
    64-bit fixed-point fractions of a turn: [hi_0, lo_0, hi_1, lo_1, ...] uint32 words."""
    out = np.zeros(d, np.uint32)
    for i, theta in enumerate(rope_inv_freq(d, base, factors)):
        f = float(theta) / (2.0 * math.pi)
        fx = int(round((f - math.floor(f)) * 2.0 ** 64)) % (1 << 64)
        out[2 * i], out[2 * i + 1] = fx >> 32, fx & 0xFFFFFFFF
    return out


def rope_freq(L: EmitContext, d: int, base: float, factors: tuple[float, ...] = ()) -> Buf:
    """rope_table(d, base, factors) as a const buffer, one per plan (every q/k rope of a
    model reads the same one)."""
    key = ("rope", d, float(base), tuple(factors))
    if key not in L.tables:
        L.tables[key] = L.const(rope_table(d, base, factors), dt.uint32)
    return L.tables[key]


def cpu_adapter(L: EmitContext) -> bool:
    """True on a software adapter (DeviceInfo.software); a function so tests can pretend."""
    return L.info.software


def _rows(L: EmitContext, pos: int) -> int:
    """The kernels' nb: 0 for pos (1,) (every batch row alike), B for pos (2, B) (per batch
    row: [positions; KV slots])."""
    shape = L.shape(pos)
    return int(shape[1]) if len(shape) == 2 else 0


@lowering("rope")
def _rope(L: EmitContext, node: Node) -> Buf:
    b, s, h, d = L.shape(node.inputs[0])
    n = b * s * h * (d // 2)
    out = L.temp((b, s, h, d), node.dtype)
    freq = rope_freq(L, d, node.attrs["base"], node.attrs.get("factors", ()))
    L.emit(kernel("decoder/rope"), {"x": L.buf(node.inputs[0]), "pos": L.buf(node.inputs[1]),
                                    "freq": freq, "out": out},
           {"n": n, "S": s, "H": h, "D": d, "nb": _rows(L, node.inputs[1])}, L.grid(n),
           {"INTERLEAVED": bool(node.attrs["interleaved"])}, name="rope")
    return out


@lowering("cache_write")
def _cache_write(L: EmitContext, node: Node) -> Buf:
    """In place: the node's value is the cache buffer, its rows pos..pos+S-1 overwritten."""
    cache = L.buf(node.inputs[0])
    _, t, d = L.shape(node.inputs[0])[1:]
    b, s, hkv, _ = L.shape(node.inputs[1])
    n = b * s * hkv * d
    L.emit(kernel("decoder/cache_write"), {"new_rows": L.buf(node.inputs[1]),
                                           "pos": L.buf(node.inputs[2]), "cache": cache},
           {"n": n, "S": s, "Hkv": hkv, "D": d, "T": t, "nb": _rows(L, node.inputs[2])},
           L.grid(n), name="cache_write")
    return cache


@lowering("cached_attention")
def _cached_attention(L: EmitContext, node: Node) -> Buf:
    b, s, h, d = L.shape(node.inputs[0])
    hkv, t = L.shape(node.inputs[1])[1:3]
    if d % 4 or d > 256:
        raise ValueError(f"cached_attention: head dim {d} must be a multiple of 4, <= 256")
    g = h // hkv
    items = s * g                                   # (row, head) pairs per kv head
    d4 = d // 4
    cpu = cpu_adapter(L)
    # on a CPU adapter the row kernel wins from one row on (~20% on lavapipe, fewer lanes; at
    # pos 500, one row: D 128 (32 / 8 heads) 15.0 vs 18.6 ms, D 256 (16 / 8) 13.3 vs 24.9)
    storage = L.info.limit("max-compute-workgroup-storage-size", 16384)
    prefill = (items >= PREFILL_FROM_ITEMS or cpu) and storage >= prefill_storage(d)
    flash = prefill and not cpu and d <= FLASH_MAX_D and storage >= FLASH_STORAGE
    if PREFILL_KERNEL is not None:
        prefill = PREFILL_KERNEL in ("flash", "prefill")
        flash = PREFILL_KERNEL == "flash"
    gran = CHUNK_GRANULE
    overrides: dict[str, object]
    if flash:                                       # GPUs: tiles of items x keys
        tiles = -(-items // FLASH_ITEMS)
        shader, overrides = "decoder/attn_flash", {"DV4": d4}
        if d4 > 16:                                 # head-dim chunks (D <= 64: one, as before)
            overrides["CW"] = flash_chunk(d)
        gran = FLASH_ITEMS                          # key chunks of one tile at the least
    elif prefill:
        threads = CPU_ROW_THREADS if cpu else ROW_THREADS
        split = min(8, 1 << max(0, math.ceil(math.log2(max(1, threads / (b * h * s))))))
        ds, kt = prefill_shape(d)
        split = max(1, split // ds)                 # ds threads an item already
        tiles = -(-items // (64 // (split * ds)))
        shader, overrides = "decoder/attn_prefill", {"SPLIT": split, "DV4": d4,
                                                      "PAD": PREFILL_PAD}
        if ds > 1:                                  # D > 64 (D <= 64: the old constants)
            overrides.update(DS=ds, KT=kt)
    else:
        per_wg = min(DECODE_ITEMS, DECODE_THREADS // d4)
        tiles = -(-items // per_wg)
        parts = max(1, DECODE_THREADS // (min(per_wg, items) * d4))   # idle threads take keys
        kt = 32 if d4 <= 16 else 16 if d4 <= 32 else 8   # attn_decode's K tile <= 576 vec4
        shader, overrides = "decoder/attn_decode", {"KT": kt, "RW": per_wg, "KP": parts}
        if not cpu:
            gran = kt * DECODE_CHUNK_TILES
    base = tiles * hkv * b
    target = CPU_WORKGROUP_TARGET if cpu else WORKGROUP_TARGET
    nsplit = max(1, min(-(-target // base), -(-t // gran)))
    out = L.temp((b, s, h, d), node.dtype)
    pos = L.buf(node.inputs[3])
    args = {"S": s, "H": h, "G": g, "Hkv": hkv, "D4": d4, "T": t, "nsplit": nsplit,
            "gran": gran, "nb": _rows(L, node.inputs[3])}
    dst = out if nsplit == 1 else L.temp((b, hkv, nsplit, items, d4 + 1, 4), node.dtype)
    L.emit(kernel(shader), {"q": L.buf(node.inputs[0]), "kc": L.buf(node.inputs[1]),
                            "vc": L.buf(node.inputs[2]), "pos": pos, "dst": dst},
           {**args, "direct": int(nsplit == 1), "scale": node.attrs["scale"],
            "window": node.attrs.get("window", 0), "softcap": node.attrs.get("softcap", 0.0)},
           (nsplit, tiles * hkv, b), overrides,
           name="cached_attention[flash]" if flash else
           "cached_attention[prefill]" if prefill else "cached_attention[decode]")
    if nsplit > 1 and node.id in L.fusions.attn_combine.values():
        L.attn_partials[node.id] = (dst, args)      # the GEMV reading it merges them
        return dst
    if nsplit > 1:
        n = b * s * h * d4
        qout = lower_int8_decode.only_int8_reader(L, node.id, b * s, h * d)
        q8, s8 = lower_int8_decode.int8_out(L, out, b * s, h * d) if qout else \
            (L.dummy(0), L.dummy(1))
        L.emit(kernel("decoder/attn_combine"), {"pos": pos, "part": dst, "q8": q8, "s8": s8,
                                                "out": out},
               {"n": n, **args}, L.grid(n), {"QOUT": qout},
               name="cached_attention[combine" + ("+q8]" if qout else "]"))
    return out
