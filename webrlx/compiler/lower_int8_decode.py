"""Emitting the int8 decode GEMVs (the rule: compiler/int8_decode.py): quant/qx8.wgsl, then
quant/qgemv_i8.wgsl (one weight, SwiGLU and residual epilogues) or quant/qgemv_i8_qkv.wgsl
(a layer's q / k / v with rope and KV-cache writes), the threads a weight row as autotuned
variants."""
from __future__ import annotations

from typing import Any

from .. import dtype as dt
from .. import quant
from ..kernels import kernel, raw_shader
from .emit import EmitContext
from .int8_decode import GEMV_VARIANTS, applies, default_tpr
from .program import Buf, Variant

# how each format's weight is bound (the element type, the word readers' snippet)
WORDS = {"q4_k": ("vec4<u32>", "common/qi8_words_vec4"),
         "q6_k": ("u32", "common/qi8_words_u32"), "q4_1": ("u32", "common/qi8_words_u32"),
         "q8_0": ("u32", "common/qi8_words_u32")}


def only_int8_reader(L: EmitContext, value: int, m: int, n: int) -> bool:
    """Whether node `value` (m rows of n) is read only by a qmatmul (through a reshape at most)
    that runs on int8 x without a norm prologue: then the kernel making it may also write it
    as that int8 x (L.x8), n % 32 == 0."""
    users = L.consumers.get(value, [])
    if len(users) == 1 and L.graph.nodes[users[0]].op == "reshape" and value not in L.outputs:
        value, users = users[0], L.consumers.get(users[0], [])
    if len(users) != 1 or value in L.outputs or n % 32 or value in L.fusions.norm_prologue:
        return False
    u = L.graph.nodes[users[0]]
    return (u.op == "qmatmul" and u.inputs[0] == value and len(u.inputs) == 2
            and u.id not in L.fusions.qkv and u.id not in L.fusions.attn_combine
            and u.attrs["k"] == n
            and applies(m, u.attrs["format"], u.attrs["n"], u.attrs["k"], L.dtype(value).name))


def int8_out(L: EmitContext, out: Buf, m: int, n: int) -> tuple[Buf, Buf]:
    """New int8 x buffers (words, scales) for value buffer `out` (m x n), registered in L.x8
    for the GEMV that reads it."""
    q8, s8 = L.temp((m, n // 4), dt.uint32), L.temp((m, n // 8), dt.float32)
    L.x8[out.id] = (q8, s8)
    return q8, s8


def quantize_x(L: EmitContext, x: Buf, norm: tuple[Buf, float] | None, m: int, k: int
               ) -> tuple[Buf, Buf]:
    """quant/qx8.wgsl: x (m, k) f32 (RMS-normalized first by norm = (g, eps)) as int8 words
    (m, k / 4) and their per-16 (scale, scaled sum) pairs (m, k / 16, 2)."""
    if norm is None and x.id in L.x8:  # its producer wrote it as int8 (attn_combine's QOUT),
        return L.x8[x.id]              # or another reader had it quantized
    xq, xs = L.temp((m, k // 4), dt.uint32), L.temp((m, k // 8), dt.float32)
    L.emit(kernel("quant/qx8"), {"x": x, "g": norm[0] if norm else L.dummy(1), "q": xq, "s": xs},
           {"R": m, "K": k, "eps": norm[1] if norm else 0.0}, (m, 1, 1),
           {"NORM": norm is not None}, name="qx8" + ("[rms_norm]" if norm else ""))
    if norm is None:                   # (x is written once: its other readers share this)
        L.x8[x.id] = (xq, xs)
    return xq, xs


def software(L: EmitContext) -> bool:
    """True on a CPU adapter (lower_decoder.cpu_adapter's rule; a function tests replace)."""
    return L.info.software


def _shapes(L: EmitContext, n: int) -> list[tuple[int, int, bool]]:
    """(TPR, weight rows a thread, tree) of the variants, the default first: on CPU adapters
    the default alone."""
    lead = (default_tpr(n), 1, False)
    return [lead, *([] if software(L) else [v for v in GEMV_VARIANTS if v != lead])]


def _variant_name(label: str, tpr: int, rpt: int, tree: bool) -> str:
    return f"{label}_{tpr}" + ("x2" if rpt == 2 else "") + ("t" if tree else "")


def emit(L: EmitContext, x: Buf, norm: tuple[Buf, float] | None, w: Buf, w2: Buf | None,
         res: Buf | None, out: Buf, fmt: str, fmt_overrides: dict[str, Any], m: int, n: int,
         k: int, what: str) -> None:
    """x (m, k) f32 (RMS-normalized first by norm = (g, eps)) to int8, then out (m, n) =
    x8 @ w^T, silu'd and times x8 @ w2^T where w2 is given, plus res where given
    (fmt_overrides: lower_quant.format_overrides(fmt))."""
    xq, xs = quantize_x(L, x, norm, m, k)
    wtype, words = WORDS[fmt]

    def gemv(rpt: int) -> Any:
        return kernel("quant/qgemv_i8", MR=str(m), RPT=str(rpt), W=wtype,
                      WORDS=raw_shader(words), QI8_PIECES=raw_shader("common/qi8_pieces"))
    overrides = {**fmt_overrides, "SWIGLU": w2 is not None, "RES": res is not None}
    label = f"qgemv_i8[{what}]" if what else "qgemv_i8"
    shapes = _shapes(L, n)
    made = [Variant.of(_variant_name(label, t, rpt, tree), gemv(rpt),
                       (-(-n // (256 // t * rpt)), 1, 1), {**overrides, "TPR": t, "TREE": tree})
            for t, rpt, tree in shapes]
    L.emit(gemv(shapes[0][1]), {"xq": xq, "xs": xs, "w": w, "w2": w2 or L.dummy(2),
                           "res": res or L.dummy(3), "out": out},
           {"N": n, "K": k, "nw": quant.nwords(fmt, n, k)}, made[0].grid,
           made[0].overrides, name=made[0].name, variants=made[1:],
           tune_key=f"qgemv_i8 {what} {fmt} {m}x{n}x{k}")


def emit_qkv(L: EmitContext, norm: tuple[Buf, float] | None, bindings: dict[str, Buf],
             params: dict[str, Any], fmt_overrides: list[dict[str, Any]], ns: list[int],
             kv_rows: bool, what: str) -> None:
    """A layer's q / k / v (quant/qgemv_i8_qkv.wgsl) from lower_quant._qkv_gemv's bindings
    (x, wq, wk, wv, pos, freq, kc, vc, out) and params (M, K, hd, S, T, nq.., nwq.., rq, rk);
    fmt_overrides: lower_quant.format_overrides of each of q, k and v (a format a segment:
    common/qformat_segments.wgsl)."""
    m, k = params["M"], params["K"]
    xq, xs = quantize_x(L, bindings["x"], norm, m, k)

    def gemv(rpt: int) -> Any:
        return kernel("quant/qgemv_i8_qkv", MR=str(m), RPT=str(rpt),
                      QI8_PIECES=raw_shader("common/qi8_pieces"),
                      QFORMAT_DECLS=raw_shader("common/qformat_segments"))
    overrides = {**{f"{key}_{c}": v for c, f in zip("QKV", fmt_overrides) for key, v in f.items()},
                 "KV_ROWS": kv_rows}
    shapes = _shapes(L, max(ns))
    made = [Variant.of(_variant_name(f"qgemv_i8[{what}]", t, rpt, tree), gemv(rpt),
                       (sum(-(-n // (256 // t * rpt)) for n in ns), 1, 1),
                       {**overrides, "TPR": t, "TREE": tree})
            for t, rpt, tree in shapes]
    keys = ("K", "hd", "S", "T", "M", "nq", "nk", "nv", "nwq", "nwk", "nwv", "rq", "rk")
    L.emit(gemv(shapes[0][1]), {"xq": xq, "xs": xs, **{b: bindings[b] for b in
                                         ("wq", "wk", "wv", "pos", "freq", "kc", "vc", "out")}},
           {key: params[key] for key in keys}, made[0].grid, made[0].overrides,
           name=made[0].name, variants=made[1:],
           tune_key=f"qgemv_i8_qkv {what} {'/'.join(str(f['FMT']) for f in fmt_overrides)} "
                    f"{m}x{sum(ns)}x{k}")
