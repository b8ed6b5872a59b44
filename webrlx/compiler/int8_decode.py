"""The int8 decode GEMVs (opt-in: INT8_DECODE): a batched decode step's x rows (2-15 of them)
rounded to int8 per 32 values (quant/qx8.wgsl, with the RMSNorm that would have been the
GEMVs' prologue), then GEMVs over Q4_K / Q6_K / Q4_1 / Q8_0 weights that multiply 4 int8
pairs an instruction: quant/qgemv_i8.wgsl (SwiGLU and residual epilogues) and, for a layer's
q / k / v in one dispatch, quant/qgemv_i8_qkv.wgsl (rope and KV-cache writes). llama.cpp's
q8_1 path. Off by default: x loses precision (~5e-3 x max|y| a product) that the f32 GEMVs
keep. Where it does not apply (1 row, 16+ rows, other formats, a bias, a q/k/v that runs
alone with its rope or cache write, the attention's fused combine) the f32 kernels run.
This module is the rule (a leaf: compiler/fuse.py reads it too); compiler/lower_int8_decode.py
emits the kernels."""
from __future__ import annotations

from . import int8_scope

INT8_DECODE = False
ROWS = (2, 15)                  # x rows (a batched decode step's sequences)
FORMATS = ("q4_k", "q6_k", "q4_1", "q8_0")
# quant/qgemv_i8.wgsl's and quant/qgemv_i8_qkv.wgsl's variants the autotuner tries on GPUs:
# (TPR: threads a weight row, weight rows a thread, tree reduction of the TPR partials). The
# shaders hold 2 outputs a thread: 256 / TPR rows x 15 x rows <= 512. Two rows a thread load
# each x piece once for both; the tree keeps TPR 64 and 128's reduction short. On an H200
# (bench/device_dawn.sh i8var) the 1B shapes' picks were 16 x 2 rows (gate+up), 64 with the
# tree (down, o-proj) and 8 x 2 (the head): 8 sequences 4.64-4.67x -> 5.82-5.98x one
# (bench/results/2026-11-29-h200-int8-decode-two-rows-a-thread.json).
GEMV_VARIANTS = ((8, 1, False), (16, 1, False), (32, 1, False), (64, 1, False), (64, 1, True),
                 (128, 1, True), (8, 2, False), (16, 2, False), (32, 2, False), (64, 2, True),
                 (128, 2, True))
# Measured on an H200 (bench/results/2026-11-29-h200-int8-decode-batched.json): the 1B-shaped
# Q4_K_M file's calls (4.2M-268M weights) gain, the SmolLM2-shaped Q4_1 file's (0.2M-0.9M,
# K = 576) lost: 8 sequences 4,306-4,310 -> 3,856-3,913 tok/s with every call on int8.
MIN_WEIGHTS = 1 << 22
THREADS = 1 << 17               # the default TPR: the smallest giving N * TPR >= this


def applies(m: int, fmt: str, n: int, k: int, x_dtype: str, bias: bool = False) -> bool:
    """Whether an m-row qmatmul of an (n, k) weight of format fmt runs as the int8 decode
    GEMV: INT8_DECODE or the compile's int8="decode" (compiler/int8_scope.py), m in ROWS,
    a format of FORMATS, whole blocks, f32 x, no bias and at
    least MIN_WEIGHTS weights (smaller GEMVs are latency-bound: qx8's dispatch costs more
    than the int8 products save)."""
    return ((INT8_DECODE or int8_scope.asked("decode")) and ROWS[0] <= m <= ROWS[1]
            and fmt in FORMATS
            and k % (256 if fmt.endswith("_k") else 32) == 0 and n * k >= MIN_WEIGHTS
            and x_dtype == "float32" and not bias)


def default_tpr(n: int) -> int:
    """Threads a weight row: the smallest of 8, 16, 32 with n * TPR >= THREADS (else 32). On
    an H200 at 8 rows (bench/probes/qgemv_i8_staged_probe.py): 8 for N 16384 and 128256, 32
    for N 2048 (K 8192: 33 us against 94 at 8)."""
    return next((t for t in (8, 16, 32) if n * t >= THREADS), 32)


