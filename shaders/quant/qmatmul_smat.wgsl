// quantized matmul for prefill on tensor cores through subgroup matrices (Dawn's
// chromium_experimental_subgroup_matrix, as matmul/matmul_smat.wgsl): out[M, N] = x[M, K] @
// dequant(w)[N, K]^T (+ bias[N]), f16 products with f32 accumulation, out f32. The same
// bindings and params as quant/qmatmul_tiled.wgsl, whose variant it is; chosen only where the
// adapter offers f16 -> f32 16x16x16 subgroup matrices (compiler/smat.py).
// w: raw GGUF blocks of an (N, K) weight as u32 words, any format of common/qblocks.wgsl
// (load_unit: Q4_1 / Q8_0 by their own paths, K-quants a word of quants a unit, the rest by
// deq8); x f32 or f16 (vec4), rounded to f16 in the tiles; needs N % 8 == 0. M and N tails are
// zero-filled in the tiles and masked at the store.
// K order: the tiles' k axis runs in units (8 weights of one block: k0..k0+3 and k1..k1+3 of
// unit_k, not always consecutive), x's tile taking the same 8 k positions a unit, so a step of
// BK = 8 UK holds whole units of every format and the sum over k is unchanged.
// Workgroup: SGM x SGN subgroups, each TM x TN 16x16 result tiles (matmul_smat's shapes and
// its ACC_DECL / MMA / STORES slots, compiler/smat.py, with b_by_n: the B tile is held
// [n][k], 8 halves a unit in a row as in the A tile, and loaded column-major). Each step every
// thread turns its share of the next step's (row, unit) pairs of x and (weight row, unit)
// pairs of w into 8 halves (packed in a vec4<u32> register: x converted, w dequantized by
// load_unit) while the subgroups multiply the current tiles; then the halves go into the
// other tile buffer, one barrier a step. The loads have no branches (rows past M / N are
// clamped, then zeroed; the last step reloads its own units), so the next step's loads can be
// in flight during the products. Consecutive threads take consecutive units of one row (a
// weight row's quant words and shared scale words in one load run).
// Why: the tiled kernel (quant/qmatmul_tiled.wgsl) runs at the f32 ALU rate; a 512-token
// prefill of a Llama-3.2-1B-shaped Q4_K_M model spent 41.8 of its 46.3 ms GPU time there on
// an H100 (bench/probes/llm_1b_profile_probe.py), where llama.cpp's Vulkan build (tensor
// cores) takes 24 ms in all.
// Measured (H200 under Dawn, that prefill's wall ms, bench/device_dawn.sh qsmat, 2026-11-27):
// tiled kernels 52.2-53.7 (native wgpu 47.3-48.2); this kernel with branches in the loads and
// B held [k][n] (a column of 8 halves SB apart a unit) 47.8; branch-free loads 35.2-35.4 (the
// default shape mix; every call forced to 128x128 s2x4 36.2, s4x2 37.5, 64x64 38.8, 128x256
// k16 53.6); B held [n][k] 34.8; Q4_K / Q6_K straight to halves 33.8-34.3; llama.cpp Vulkan
// 22.1-23.5 on the same file. Tried and dropped (forced on every call): 64x64 with 64 k a
// step 44.5, 128x64 41.6, 64x128 44.6. Dawn's per-pass timestamps overlap for independent
// calls (no barrier between them), so only walls compare shapes.
// Robustness (Tint's, on in Chrome): the same prefill with it off ran 22.2 ms, against 33.6 with
// it on (2026-11-27): a subgroup-matrix load whose offset is not a constant gets a bounds
// check and a branch. The tiles are 16-row panels so that every load is at a constant offset
// into a panel (compiler/smat.slots): 33.5 -> 28.9 ms wall, this kernel's GPU time 21.7 ->
// 17.1 ms at 128x128 (bench/device_dawn.sh panels, H200, old and new in one session).
// Tried: the tile loads' register arrays (ra, rb) written out by `// @unroll` (no clamped
// index left under robustness): the prefill 24.7 -> 25.0 GPU ms, this kernel 17.0 -> 17.3 (H100
// under Dawn, bench/device_dawn.sh unrollab, 2026-11-27): not kept; what robustness still
// costs here (17 against 14.3 with it off) is elsewhere.
// It was the tile copies: eight 2-byte workgroup stores a 16-byte load, each index clamped, so
// the driver kept them apart (Tint's SPIR-V: 9 clamps in each of put_a / put_b, read with
// tools/tint_spirv.mjs on the GPU machine). One clamp of the 8-aligned offset before them:
// this kernel 17.1 -> 14.7 GPU ms, the 1B prefill 25.5-26.6 -> 22.6-23.1 ms wall (H200 under
// Dawn, bench/device_dawn.sh putab, old and new alternating; llama.cpp 24.4 ms).
// K pieces (KSPLIT, where the tiles give few workgroups: lower_quant.qsmat_pieces): the same
// prefill 21.9-22.0 -> 18.9-19.1 ms wall, llama.cpp 23.3 in the same call (H100 under Dawn,
// bench/device_dawn.sh splitab); the pieces' sum costs 0.9 ms of it.
// Tried (2026-11-28, H200 under Dawn): the loads and dequantization two steps ahead, as
// matmul_smat's loads (15% there): the SmolLM2-shaped 128-token first token 3.64-4.46 ms
// against 3.55-4.33 (bench/results/2026-11-28-h200-dawn-qsmat-two-steps-ahead-tried.json):
// no gain, not kept.
// Limits: see matmul_smat.wgsl (tile copies through 2-byte workgroup stores, the products'
// f16 array loads); here also each weight is dequantized once per BM rows of x, by load_unit
// (a Q4_K unit: 5 words, its scales decoded per unit).
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;

struct Params { M: u32, N: u32, K: u32, nw: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> p: Params;

override HAS_BIAS: bool = false;
// K pieces (grid z = KSPLIT): piece z sums k in [z K / KSPLIT, (z + 1) K / KSPLIT) into the
// z-th M x N block of `out` (without bias: the lowering's sum of the pieces adds it). Where
// the tiles alone give few workgroups (q / o / down projections of a 512-token prefill: 64
// of 128x128 on a GPU of 132 SMs). Needs K % (KSPLIT * BK) == 0.
override KSPLIT: u32 = 1u;
const ROWS: u32 = 1u;              // (common/qblocks.wgsl's GEMV knobs: unused here)
const RPT: u32 = 1u;
const RQ: u32 = 1u;
const RPW: u32 = 8u;

fn wword(i: u32, second: bool) -> u32 { return w[i]; }
fn x_vec(r: u32, k4: u32) -> vec4<f32> { return vec4<f32>(x[r * (p.K >> 2u) + k4]); }
{{QBLOCKS}}

const SGM: u32 = {{SGM}}u;          // subgroups along M
const SGN: u32 = {{SGN}}u;          // subgroups along N
const TM: u32 = {{TM}}u;            // 16-row tiles a subgroup
const TN: u32 = {{TN}}u;            // 16-column tiles a subgroup
const BK: u32 = {{BK}}u;            // k a step (a multiple of 16)
const BM: u32 = SGM * TM * 16u;
const BN: u32 = SGN * TN * 16u;
const THREADS: u32 = SGM * SGN * 32u;
const UK: u32 = BK / 8u;            // units a step
const SA: u32 = BK + 8u;            // As row stride, halves (rows padded by 16 bytes)
const SB: u32 = BK + 8u;            // Bs row stride, halves (rows along k, as As)
const PA: u32 = 16u * SA;           // halves of a 16-row panel of As
const PB: u32 = 16u * SB;           // ... of Bs
const LA: u32 = BM * UK / THREADS;  // (row, unit) pairs of x a thread a step
const LB: u32 = BN * UK / THREADS;  // (weight row, unit) pairs a thread a step
// 16-row panels (compiler/smat.slots: a subgroup-matrix load at a constant offset into a
// panel needs no bounds check under Tint's robustness, Chrome's default)
var<workgroup> As: array<array<f16, PA>, 2u * BM / 16u>;  // [buffer][m / 16][m % 16][k]
var<workgroup> Bs: array<array<f16, PB>, 2u * BN / 16u>;  // [buffer][n / 16][n % 16][k]
var<workgroup> St: array<array<f32, 256>, SGM * SGN>;     // [subgroup][16][16] epilogue

// x row r's 8 values at unit u's k positions, as halves (zeros past M)
fn load_a(r: u32, u: u32) -> vec4<u32> {
    let k = unit_k(u) >> vec2<u32>(2u);
    let rr = min(r, p.M - 1u);                        // (no branch: see the header)
    return select(vec4<u32>(0u), halves(x_vec(rr, k.x), x_vec(rr, k.y)), r < p.M);
}

{{QSMAT_TILES}}

// (batch: the K piece, wid.z)
fn store(batch: u32, row: u32, c4: u32, a: vec4<f32>) {
    let N4 = p.N / 4u;
    if (row >= p.M || c4 >= N4) { return; }
    var v = a;
    if (HAS_BIAS && KSPLIT == 1u) {
        let bo = c4 * 4u;
        v += vec4<f32>(bias[bo], bias[bo + 1u], bias[bo + 2u], bias[bo + 3u]);
    }
    out[(batch * p.M + row) * N4 + c4] = v;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32,
        {{SGID}}) {
    {{SGID_LET}}
    let sm = sg % SGM;
    let sn = sg / SGM;
    let row0 = wid.y * BM;
    let col0 = wid.x * BN;
    let kb = wid.z * (p.K / KSPLIT);                  // this piece's k range [kb, ke)
    let ke = kb + p.K / KSPLIT;
    var ra: array<vec4<u32>, LA>;
    var rb: array<vec4<u32>, LB>;
    // the first step's tiles
    for (var l = 0u; l < LA; l++) {
        let i = l * THREADS + tid;
        ra[l] = load_a(row0 + i / UK, kb / 8u + i % UK);
    }
    for (var l = 0u; l < LB; l++) {
        let i = l * THREADS + tid;
        rb[l] = load_b(col0 + i / UK, kb / 8u + i % UK, false);
    }
    for (var l = 0u; l < LA; l++) {
        let i = l * THREADS + tid;
        put_a(0u, i / UK, (i % UK) * 8u, ra[l]);
    }
    for (var l = 0u; l < LB; l++) {
        let i = l * THREADS + tid;
        put_b(0u, i / UK, (i % UK) * 8u, rb[l]);
    }
    workgroupBarrier();
{{ACC_DECL}}
    for (var k0 = kb; k0 < ke; k0 += BK) {
        let odd = ((k0 - kb) / BK) & 1u;
        let pa = odd * (BM / 16u) + sm * TM;          // this subgroup's first panels
        let pb = odd * (BN / 16u) + sn * TN;
        // the next step's units (the last step loads its own again: never read)
        let un = min(k0 + BK, ke - BK) / 8u;
        for (var l = 0u; l < LA; l++) {
            let i = l * THREADS + tid;
            ra[l] = load_a(row0 + i / UK, un + i % UK);
        }
        for (var l = 0u; l < LB; l++) {
            let i = l * THREADS + tid;
            rb[l] = load_b(col0 + i / UK, un + i % UK, false);
        }
{{MMA}}
        for (var l = 0u; l < LA; l++) {
            let i = l * THREADS + tid;
            put_a(1u - odd, i / UK, (i % UK) * 8u, ra[l]);
        }
        for (var l = 0u; l < LB; l++) {
            let i = l * THREADS + tid;
            put_b(1u - odd, i / UK, (i % UK) * 8u, rb[l]);
        }
        workgroupBarrier();
    }
    let lane = tid % 32u;
    let er = lane / 2u;
    let ec = (lane % 2u) * 8u;
{{STORES}}
}
