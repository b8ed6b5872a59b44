"""The int8 prefill without tensor cores (opt-in: INT8_PREFILL): a prefill's quantized
products on int8 x int8 -> i32 (dot4I8Packed, 4 pairs an instruction), llama.cpp's MMQ on
dp4a. x's rows and the weight's rows (from any format) are rounded to int8 in groups of GROUP
values (quant/qw8.wgsl), then quant/qmatmul_i8.wgsl multiplies them, each group's sums
scaled in f32. For wgpu-native, which cannot reach the tensor cores: there the products
otherwise run on f32 arithmetic (lower_quant.dequant_first). Where the adapter offers i8
subgroup matrices (Dawn on NVIDIA), smat.INT8's kernels are the tensor-core form of this.
Off by default: x and the weight each lose precision to int8 that the f32 path keeps (the 1B
prefill's last logits moved 3.7e-2 x max|logit|; the f32 path holds 1e-3 of transformers').
This module is the rule (a leaf); compiler/lower_int8_prefill.py emits the kernels."""
from __future__ import annotations

from ..device_info import DeviceInfo
from . import int8_scope

INT8_PREFILL = False
MIN_M = 32                      # rows (fewer stay GEMVs: lower_quant's own rules)
MIN_WORK = 1 << 27              # multiply-adds a call (m x n x k), as lower_quant.DEQUANT_MIN_WORK
# k a group (one int8 scale a row and group; 64, 128 or 256, or the biggest of them dividing K).
# 256 (Q4_K's super-block): the kernel scales its integer sums once a group, 8x less often
# than at llama.cpp's 32, at about the same accuracy (quant/qmatmul_i8.wgsl's header)
GROUP = 256
# quant/qmatmul_i8.wgsl's tiles as (rows, columns) a thread and k a step: 64x64, 128x64,
# 64x128 and 128x128 outputs a workgroup, 64 or 128 k a step; autotuned variants, the first the
# default. On an H200 the 1B prefill's calls picked 128x64, 128x64 at 128 k and 64x64 at 128 k
# (bench/results/2026-11-29-h200-native-int8-prefill.json, call 10)
SHAPES = ((4, 4, 64), (8, 4, 64), (4, 8, 64), (8, 8, 64), (4, 4, 128), (8, 4, 128),
          (4, 8, 128))


def applies(info: DeviceInfo, m: int, n: int, k: int, x_dtype: str) -> bool:
    """Whether an m x n x k qmatmul runs as the int8 prefill: INT8_PREFILL or the compile's
    int8="prefill" (compiler/int8_scope.py), a GPU (not a
    software adapter), f32 x, m >= MIN_M, m n k >= MIN_WORK, K % 64 == 0 (the kernel's step)
    and the int8 copies fitting one binding."""
    return ((INT8_PREFILL or int8_scope.asked("prefill")) and x_dtype == "float32"
            and not info.software and m >= MIN_M
            and m * n * k >= MIN_WORK and k % 64 == 0
            and max(n, m) * k <= info.max_binding_size)


def group(k: int) -> int:
    """The group along K for k columns: GROUP, halved until it divides k (64 at least)."""
    g = GROUP
    while k % g and g > 64:
        g //= 2
    return g
