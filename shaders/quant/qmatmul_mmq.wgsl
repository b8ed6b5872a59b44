// int8 prefill matmul on tensor cores (llama.cpp's MMQ idea, through Dawn's
// chromium_experimental_subgroup_matrix i8 -> i32 16x16x32 matrices): out[M, N] =
// sum over groups g of xs[g, m] ws[g, n] (xq_g[M, G] @ wq_g[N, G]^T) (+ bias[N]), f32 out.
// xq / wq: x's rows and the weight's rows quantized to int8 in groups of G along K by
// quant/qrows_i8.wgsl (4 int8 a u32 word, row-major), xs / ws their scales (K/G x rows).
// Within a group the products accumulate exactly in i32 subgroup matrices; at a group's end
// each tile goes through workgroup memory (St) where each lane scales its 8 values of one row
// into f32 registers (f<i>_<j>a / b). Opt-in (compiler/smat.INT8): int8 rows lose precision
// that the f16 kernels keep (quant.quantize_rows_i8's error; lower_quant.mmq_ok).
// Workgroup: SGM x SGN subgroups of 32 lanes, each TM x TN result tiles of 16x16
// (compiler/smat.mmq_slots writes out the products and the epilogue). A step takes BK k of
// both tiles (BK % 32 == 0, G % BK == 0): each thread loads its share as vec4<u32> (16 int8)
// for the next step, the subgroups multiply the current tiles, the registers go into the other
// buffer, one barrier a step. Tiles: 16-row panels, rows padded by 16 bytes (SW words), so
// every subgroup-matrix load is at a constant offset into a panel (Tint's robustness: see
// compiler/smat.slots). B is held [n][k] and loaded column-major, as A's rows.
// Needs K % G == 0, N % 8 == 0; M and N tails are zero-filled at the loads, masked at the
// store.
// Why: the f16 kernel (quant/qmatmul_smat.wgsl) copies tiles as 2-byte workgroup stores of
// halves decoded in the tile loop; here a 16-byte load carries 16 values, the decode is done
// once a call (qrows_i8) and the i8 products run at twice the f16 rate.
// Measured (H200 under Dawn, the 1B-shaped Q4_K_M 512-token prefill, bench/device_dawn.sh mmq,
// 2026-11-28, bench/results/2026-11-28-h200-dawn-int8-prefill-mmq.json): these products take
// 9.7 GPU ms where the f16 kernels take 13.1 (with their split-K sums); the int8 decodes of the
// weights (qrows_i8: Q4_K 2.1, Q6_K 0.4 ms) and of x (0.6) take most of the gain back: the
// prefill 16.5-16.6 ms wall against 17.3-17.5 with the f16 kernels, llama.cpp Vulkan 23.6.
// Groups: the epilogue (a store, a barrier and 8 scaled adds a tile a lane) is the cost of a
// small G: G 32 (llama.cpp's blocks) 53.2 ms, 256 20.4, 1024 17.3, 2048 16.5; the logits'
// error barely moves with G (3.4e-2 to 4.0e-2 x max|logit| off native f32, against 2.8e-3
// for the f16 kernels): it is int8's rounding of each value, not the groups' scales.
// Limits: the decodes (a pass over every weight each prefill: the int8 copy is not kept, to
// hold GPU memory at the file's size); no K pieces for small grids (64x64 tiles there).
// Tint (npm webgpu 0.6.2) validates an i8 load's offset and stride in the array's words (its
// SPIR-V writer agrees: the results match numpy), compiler/smat.mmq_slots.
enable subgroups;
enable chromium_experimental_subgroup_matrix;

struct Params { M: u32, N: u32, K: u32 }
@group(0) @binding(0) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> xs: array<f32>;
@group(0) @binding(2) var<storage, read_write> wq: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> ws: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(6) var<uniform> p: Params;

override HAS_BIAS: bool = false;
override G: u32 = 256u;             // k a group (one scale a row and group)

const SGM: u32 = {{SGM}}u;          // subgroups along M
const SGN: u32 = {{SGN}}u;          // subgroups along N
const TM: u32 = {{TM}}u;            // 16-row tiles a subgroup
const TN: u32 = {{TN}}u;            // 16-column tiles a subgroup
const BK: u32 = {{BK}}u;            // k a step (a multiple of 32)
const BM: u32 = SGM * TM * 16u;
const BN: u32 = SGN * TN * 16u;
const THREADS: u32 = SGM * SGN * 32u;
const V: u32 = BK / 16u;            // vec4 words (16 int8) of a row a step
const SW: u32 = BK / 4u + 4u;       // panel row stride, words (16 bytes of padding)
const LA: u32 = BM * V / THREADS;   // vec4 loads of x a thread a step
const LB: u32 = BN * V / THREADS;   // ... of the weight
var<workgroup> As: array<array<i32, 16u * SW>, 2u * BM / 16u>;  // [buffer][m / 16][m % 16][k]
var<workgroup> Bs: array<array<i32, 16u * SW>, 2u * BN / 16u>;  // [buffer][n / 16][n % 16][k]
var<workgroup> St: array<array<i32, 256>, 2u * SGM * SGN>;      // [subgroup, slot][16][16]

// x row r's 16 int8 at k = 16 c.. (zeros past M); weight row n's likewise (past N)
fn load_a(r: u32, c: u32) -> vec4<u32> {
    let v = xq[min(r, p.M - 1u) * (p.K / 16u) + c];
    return select(vec4<u32>(0u), v, r < p.M);
}
fn load_b(n: u32, c: u32) -> vec4<u32> {
    let v = wq[min(n, p.N - 1u) * (p.K / 16u) + c];
    return select(vec4<u32>(0u), v, n < p.N);
}

// 16 int8 into tile row `row` (of the buffer's panels from `panel0`) at word 4 c
fn put_a(panel0: u32, row: u32, c: u32, v: vec4<u32>) {
    let o = min((row % 16u) * SW + 4u * c, 16u * SW - 4u);   // (one clamp: see qmatmul_smat)
    let pan = panel0 + row / 16u;
    As[pan][o] = bitcast<i32>(v.x);
    As[pan][o + 1u] = bitcast<i32>(v.y);
    As[pan][o + 2u] = bitcast<i32>(v.z);
    As[pan][o + 3u] = bitcast<i32>(v.w);
}
fn put_b(panel0: u32, row: u32, c: u32, v: vec4<u32>) {
    let o = min((row % 16u) * SW + 4u * c, 16u * SW - 4u);
    let pan = panel0 + row / 16u;
    Bs[pan][o] = bitcast<i32>(v.x);
    Bs[pan][o + 1u] = bitcast<i32>(v.y);
    Bs[pan][o + 2u] = bitcast<i32>(v.z);
    Bs[pan][o + 3u] = bitcast<i32>(v.w);
}

// one group's sums of a tile (in St slot `slot`) scaled into a lane's 8 floats of row r,
// columns c..c + 7 (the group's scales: row r's, columns c..'s)
fn scaled(slot: u32, g: u32, r: u32, c: u32, e: u32) -> array<vec4<f32>, 2> {
    let sx = xs[g * p.M + min(r, p.M - 1u)];
    let w4 = (g * p.N + min(c, p.N - 8u)) / 4u;
    let a = vec4<f32>(vec4<i32>(St[slot][e], St[slot][e + 1u], St[slot][e + 2u],
                                St[slot][e + 3u]));
    let b = vec4<f32>(vec4<i32>(St[slot][e + 4u], St[slot][e + 5u], St[slot][e + 6u],
                                St[slot][e + 7u]));
    return array<vec4<f32>, 2>(sx * ws[w4] * a, sx * ws[w4 + 1u] * b);
}

fn store(row: u32, c: u32, a: vec4<f32>) {
    if (row >= p.M || c >= p.N) { return; }
    var v = a;
    if (HAS_BIAS) { v += vec4<f32>(bias[c], bias[c + 1u], bias[c + 2u], bias[c + 3u]); }
    out[(row * p.N + c) / 4u] = v;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32,
        {{SGID}}) {
    {{SGID_LET}}
    let sm = sg % SGM;
    let sn = sg / SGM;
    let row0 = wid.y * BM;
    let col0 = wid.x * BN;
    let lane = tid % 32u;
    let er = lane / 2u;                               // a lane's row of a tile,
    let ec = (lane % 2u) * 8u;                        // its 8 columns
    let e = er * 16u + ec;
    var ra: array<vec4<u32>, LA>;
    var rb: array<vec4<u32>, LB>;
    for (var l = 0u; l < LA; l++) {                   // the first step's tiles
        let i = l * THREADS + tid;
        put_a(0u, i / V, i % V, load_a(row0 + i / V, i % V));
    }
    for (var l = 0u; l < LB; l++) {
        let i = l * THREADS + tid;
        put_b(0u, i / V, i % V, load_b(col0 + i / V, i % V));
    }
    workgroupBarrier();
{{ACC_DECL}}
    for (var k0 = 0u; k0 < p.K; k0 += BK) {
        let odd = (k0 / BK) & 1u;
        let pa = odd * (BM / 16u) + sm * TM;          // this subgroup's first panels
        let pb = odd * (BN / 16u) + sn * TN;
        let cn = min(k0 + BK, p.K - BK) / 16u;        // the next step's (the last: its own)
        for (var l = 0u; l < LA; l++) {
            let i = l * THREADS + tid;
            ra[l] = load_a(row0 + i / V, cn + i % V);
        }
        for (var l = 0u; l < LB; l++) {
            let i = l * THREADS + tid;
            rb[l] = load_b(col0 + i / V, cn + i % V);
        }
        if (k0 % G == 0u) {                           // a group's first step: fresh sums
{{MMA_FIRST}}
        } else {
{{MMA}}
        }
        for (var l = 0u; l < LA; l++) {
            let i = l * THREADS + tid;
            put_a((1u - odd) * (BM / 16u), i / V, i % V, ra[l]);
        }
        for (var l = 0u; l < LB; l++) {
            let i = l * THREADS + tid;
            put_b((1u - odd) * (BN / 16u), i / V, i % V, rb[l]);
        }
        if ((k0 + BK) % G == 0u) {                    // a group's last step: scale its sums
            let g = k0 / G;
{{EPILOGUE}}
        }
        workgroupBarrier();
    }
{{STORES}}
}
