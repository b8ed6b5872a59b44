// quantized matmul for prefills on tensor cores (subgroup matrices, as quant/qmatmul_smat.wgsl)
// with the fused neighbours of quant/qmatmul_fused.wgsl: the same bindings, params and
// switches (common/qfused_io.wgsl), so the three kernels are variants of one call.
// out[r, n] = epilogue(x'[r, :] . dequant(w)[n, :]), x' = x * g / rms(x) under NORM;
// w, w2 (N, K) GGUF blocks as u32 words (common/qblocks.wgsl's formats), x [M, K] f32 or f16,
// rounded to f16 in the tiles (after the norm: the normed rows are O(1), the raw residual
// stream need not be); f32 sums. Needs N % 8 == 0 and K % BK == 0. No COMBINE.
// Prologue (NORM): 1/rms of the workgroup's BM rows into `scale` (THREADS / BM threads a row,
// 8 loads in flight each, their sums through St), before the first tiles. Tiles and K loop: qmatmul_smat's (common/
// qsmat_tiles.wgsl; loads of the next step in registers during the products, one barrier a
// step); under SWIGLU a second B tile (Bs2, w2's units) and accumulators (gate<i>_<j>) for the
// same columns. Epilogue: a subgroup's result tile (and under SWIGLU its w2 tile) go through
// its own 1 KB of St (St2); each lane takes 8 columns of one row: SWIGLU, ROPE (pairs never
// split: 8 consecutive columns, hd even), RES and the KV-cache store (CACHE) as
// quant/qmatmul_fused.wgsl's store.
// Why: a SmolLM2 128-token prefill spent 6.0 of its 6.7 GPU ms in qmatmul_fused's tiles on an
// H200 (f32 ALU, 4-row x 64-column tiles; bench/results/2026-11-27-h200-dawn-decode-gpu-
// profile.json), and its projections are too small for the unfused tensor-core kernel plus
// separate norm / rope / cache / residual dispatches (29.3 ms wall against 11.1 in 2026-11-27's
// tree: 554 dispatches against 254).
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
{{QFUSED_IO}}
const ROWS: u32 = 1u;              // (common/qblocks.wgsl's GEMV knobs: unused here)
const RPT: u32 = 1u;
const RQ: u32 = 1u;
const RPW: u32 = 8u;
{{QBLOCKS}}
{{ROPE_TURN}}
{{ROW_POSITIONS}}

fn silu(v: vec4<f32>) -> vec4<f32> {
    return v / (1.0 + exp(-v));
}

{{QFUSED_STORE}}

// 4 outputs of row r from column c (a multiple of 4; N % 8 == 0, so all or none exist): a the
// products with w, b with w2
fn epilogue(r: u32, c: u32, a_in: vec4<f32>, b: vec4<f32>) {
    if (r >= p.M || c >= p.N) { return; }
    var a = a_in;
    if (SWIGLU) { a = silu(a) * b; }
    if (ROPE) { a = rope4(r, c, a); }
    for (var j = 0u; j < 4u; j++) { store(r, c + j, a[j]); }
}

fn enter(wx: u32) -> u32 { return wx; }    // (one weight: the grid's columns)
fn k_len() -> u32 { return p.K; }

{{QSMAT_BODY}}
