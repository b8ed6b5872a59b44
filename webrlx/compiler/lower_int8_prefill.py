"""Emitting the int8 prefills' row quantizers and the int8 prefill without tensor cores (the
rule: compiler/int8_prefill.py): quant/qw8.wgsl for x's and the weight's rows, then
quant/qmatmul_i8.wgsl, its tiles as autotuned variants. `rows_to_int8` also emits
quant/qrows_i8.wgsl for the tensor-core form (lower_quant._mmq). Format overrides come from
the caller (lower_quant.format_overrides), as for compiler/lower_int8_decode.py."""
from __future__ import annotations

from typing import Any

from .. import dtype as dt
from ..device_info import DeviceInfo
from ..kernels import kernel
from . import int8_prefill, smat
from .emit import EmitContext
from .program import Buf, Variant


def ok(info: DeviceInfo, m: int, n: int, k: int, x_dtype: str) -> bool:
    """Whether an m x n x k qmatmul runs as the int8 prefill without tensor cores
    (int8_prefill.applies), and the adapter's subgroup matrices (Dawn on NVIDIA) are not in
    use: there the tensor-core kernels (f16, or smat.INT8's) run instead."""
    return (int8_prefill.applies(info, m, n, k, x_dtype)
            and not (smat.available(info) and smat.MODE != "off"))


def rows_to_int8(L: EmitContext, shader: str, src: Buf, weight: dict[str, Any] | None,
                 rows: int, k: int, group: int, scales: tuple[int, int], name: str
                 ) -> tuple[Buf, Buf]:
    """quant/qrows_i8.wgsl or quant/qw8.wgsl (`shader`) over `rows` rows of k: x's f32 rows
    (weight None: the format overrides keep their defaults, never read) or a GGUF weight's
    (weight: its format overrides and word count "nw"): (the int8 words rows x k/4, the scales
    in the shader's layout `scales`)."""
    q, s = L.temp((rows, k // 4), dt.uint32), L.temp(scales, dt.float32)
    wgs = -(-rows * (k // 8) // 256)
    wx = min(wgs, 65535)
    overrides = {key: v for key, v in (weight or {}).items() if key != "nw"}
    L.emit(kernel(shader), {"x": L.dummy(0) if weight else src,
                            "w": src if weight else L.dummy(1), "q": q, "s": s},
           {"R": rows, "K": k, "nw": weight["nw"] if weight else 0, "wx": wx},
           (wx, -(-wgs // wx), 1),
           {**overrides, "WEIGHT": weight is not None, "G8": group // 8}, name=name)
    return q, s


def emit(L: EmitContext, bindings: dict[str, Buf], has_bias: bool, fmt: str,
         weight: dict[str, Any], m: int, n: int, k: int) -> None:
    """x's rows and the weight's (format fmt; weight: its format overrides and "nw") to int8
    in groups (quant/qw8.wgsl; x's shared by the products that read the same x), then
    quant/qmatmul_i8.wgsl into bindings["out"] (+ bindings["bias"] where has_bias)."""
    g = int8_prefill.group(k)
    x = bindings["x"]
    key = ("qw8", x.id, k, g)
    if key not in L.rows_i8:
        L.rows_i8[key] = rows_to_int8(L, "quant/qw8", x, None, m, k, g, (m, k // g), "qw8[x]")
    xq, xs = L.rows_i8[key]
    wq, ws = rows_to_int8(L, "quant/qw8", bindings["w"], weight, n, k, g, (n, k // g),
                          f"qw8[{fmt}]")
    room = L.info.limit("max-compute-workgroup-storage-size", 16384)
    shapes = [(tm, tn, bk) for tm, tn, bk in int8_prefill.SHAPES
              if 16 * (tm + tn) * (bk // 16 + 1) * 16 <= room and g % bk == 0]
    made = [(kern, Variant.of(f"qmatmul_i8_{16 * tm}x{16 * tn}" + ("k128" if bk == 128 else ""),
                              kern, (-(-n // (16 * tn)), -(-m // (16 * tm)), 1),
                              {"HAS_BIAS": has_bias, "G": g}))
            for tm, tn, bk in (shapes or int8_prefill.SHAPES[:1])
            for kern in [kernel("quant/qmatmul_i8", TM=str(tm), TN=str(tn), V=str(bk // 16))]]
    lead_kernel, lead = made[0]
    L.emit(lead_kernel, {"xq": xq, "xs": xs, "wq": wq, "ws": ws, "bias": bindings["bias"],
                         "out": bindings["out"]}, {"M": m, "N": n, "K": k}, lead.grid,
           lead.overrides, name=lead.name, variants=[v for _, v in made[1:]],
           tune_key=f"qmatmul_i8 {m}x{n}x{k}")
