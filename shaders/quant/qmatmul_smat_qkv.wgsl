// A decoder layer's q, k and v projections of a prefill in ONE dispatch on tensor cores
// (subgroup matrices): common/qsmat_body.wgsl's fused matmul over three weights, each its own
// segment of column tiles along x (as quant/qgemv_qkv.wgsl's segments, whose bindings, params
// and overrides this kernel shares: the two are variants of one call):
//   segment 0: q = x' . wq, rotated (where rq) into out [M, nq];
//   segment 1: k = x' . wk, rotated (where rk) into the KV cache kc at each row's position;
//   segment 2: v = x' . wv into the KV cache vc.
// x' = x * g / rms(x) (NORM, the body's prologue), rounded to f16 in the tiles; f32 sums. The
// weights share K; one format, or one each (SEGMENT_FORMAT / QFORMAT_DECLS as qgemv_qkv).
// Needs nq, nk, nv % 8 == 0, K % BK == 0 and hd even.
// grid: (sum over the segments of ceil(n_i / BN), ceil(M / BM), 1).
// Why: a SmolLM2 128-token prefill ran q, k and v as three fused dispatches of 32x32 tiles
// (18, 6 and 6 column tiles; 0.59 + 0.60 + 0.56 GPU ms over 30 layers, H100 under Dawn,
// bench/results/2026-11-28-h100-dawn-fused-smat-prefill.json): each latency-bound in its K
// loop, each re-reading x for the norm; one grid runs them side by side, 60 dispatches fewer.
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
{{QKV_IO}}
const SWIGLU: bool = false;
const ROWS: u32 = 1u;              // (common/qblocks.wgsl's GEMV knobs: unused here)
const RPT: u32 = 1u;
const RQ: u32 = 1u;
const RPW: u32 = 8u;

{{QBLOCKS}}
{{ROPE_TURN}}
{{ROW_POSITIONS}}

fn k_len() -> u32 { return u.K; }     // (K from the uniform: the K loop's bound is uniform)

fn enter(wx: u32) -> u32 { return segment(wx, BN); }     // (column tiles of BN)

// one output (row r, column n) of value e: q into out, k and v into their caches at the row's
// position (past the cache's end: skipped)
fn store(r: u32, n: u32, e: f32) {
    if (seg == 0u) {
        out[r * p.N + n] = e;
        return;
    }
    let tpos = row_pos(r);
    if (tpos < 0 || u32(tpos) >= u.T) { return; }
    let h = row_slot(r) * (p.N / p.hd) + n / p.hd;            // (slot, h) flattened
    let i = (h * u.T + u32(tpos)) * p.hd + n % p.hd;
    if (seg == 1u) { kc[i] = e; } else { vc[i] = e; }
}

// 4 outputs of row r from column c (a multiple of 4; n_i % 8 == 0: all or none exist), q and k
// rotated where asked (pairs (c, c + 1), (c + 2, c + 3))
fn epilogue(r: u32, c: u32, a_in: vec4<f32>, b: vec4<f32>) {
    if (r >= p.M || c >= p.N) { return; }
    var a = a_in;
    if (rotates()) { a = rope4(r, c, a); }
    for (var j = 0u; j < 4u; j++) { store(r, c + j, a[j]); }
}

{{QSMAT_BODY}}
