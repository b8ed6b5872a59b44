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
struct Params { M: u32, K: u32, eps: f32, hd: u32, S: u32, T: u32, nq: u32, nk: u32,
                nv: u32, nwq: u32, nwk: u32, nwv: u32, rq: u32, rk: u32 }
struct View { M: u32, N: u32, K: u32, nw: u32, eps: f32, hd: u32, S: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> wq: array<u32>;
@group(0) @binding(2) var<storage, read_write> wk: array<u32>;
@group(0) @binding(3) var<storage, read_write> wv: array<u32>;
@group(0) @binding(4) var<storage, read_write> g: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> pos: array<i32>;
@group(0) @binding(6) var<storage, read_write> freq: array<u32>;
@group(0) @binding(7) var<storage, read_write> kc: array<f32>;
@group(0) @binding(8) var<storage, read_write> vc: array<f32>;
@group(0) @binding(9) var<storage, read_write> out: array<f32>;
@group(0) @binding(10) var<uniform> u: Params;

override NORM: bool = false;
const SWIGLU: bool = false;
const ROWS: u32 = 1u;              // (common/qblocks.wgsl's GEMV knobs: unused here)
const RPT: u32 = 1u;
const RQ: u32 = 1u;
const RPW: u32 = 8u;

var<private> p: View;              // the segment's view: its N
var<private> seg: u32;             // 0 q, 1 k, 2 v

fn wword(i: u32, second: bool) -> u32 {
    if (seg == 0u) { return wq[i]; }
    if (seg == 1u) { return wk[i]; }
    return wv[i];
}
fn x_vec(r: u32, k4: u32) -> vec4<f32> {         // x times the norm weight under NORM
    var v = vec4<f32>(x[r * (p.K >> 2u) + k4]);
    if (NORM) { v *= g[k4]; }
    return v;
}
{{QBLOCKS}}
{{ROPE_TURN}}
{{ROW_POSITIONS}}

fn k_len() -> u32 { return u.K; }     // (K from the uniform: the K loop's bound is uniform)

// column tile wx of the grid: its segment (seg, p, the segment's format) and its tile there
fn enter(wx: u32) -> u32 {
    let gq = (u.nq + BN - 1u) / BN;
    let gk = (u.nk + BN - 1u) / BN;
    seg = select(select(2u, 1u, wx < gq + gk), 0u, wx < gq);
    {{SEGMENT_FORMAT}}
    p = View(u.M, select(select(u.nv, u.nk, seg == 1u), u.nq, seg == 0u), u.K,
             select(select(u.nwv, u.nwk, seg == 1u), u.nwq, seg == 0u), u.eps, u.hd, u.S);
    return wx - select(select(gq + gk, gq, seg == 1u), 0u, seg == 0u);
}

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
    if (select(u.rk != 0u, u.rq != 0u, seg == 0u) && seg < 2u) { a = rope4(r, c, a); }
    for (var j = 0u; j < 4u; j++) { store(r, c + j, a[j]); }
}

{{QSMAT_BODY}}
