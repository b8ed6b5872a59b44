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

fn halves(a: vec4<f32>, b: vec4<f32>) -> vec4<u32> {
    return vec4<u32>(pack2x16float(a.xy), pack2x16float(a.zw), pack2x16float(b.xy),
                     pack2x16float(b.zw));
}

// x row r's 8 values at unit u's k positions, as halves (zeros past M)
fn load_a(r: u32, u: u32) -> vec4<u32> {
    let k = unit_k(u) >> vec2<u32>(2u);
    let rr = min(r, p.M - 1u);                        // (no branch: see the header)
    return select(vec4<u32>(0u), halves(x_vec(rr, k.x), x_vec(rr, k.y)), r < p.M);
}

// Q4_K / Q6_K units decoded straight to halves, without int or float conversions per weight
// (quarter-rate instructions on NVIDIA GPUs, two a weight on load_unit's f32 path then the
// packing): a 4-bit q shifted under the exponent of 1.0h is 1 + q / 16 exactly, a 6-bit one
// 1 + q / 64 (as quant/qgemv_fused.wgsl's magic floats, in f16); (f - 1) or (f - 1.5) is
// exact, so each weight is rounded to f16 once by the scale's multiply (and Q4_K's min add).
// h4: the low nibbles of v's 4 bytes; h6: v's 4 bytes of 6-bit quants; as two words of halves
fn h4(v: u32) -> vec2<u32> {
    return vec2<u32>(((v & 0xFu) << 6u) | ((v & 0xF00u) << 14u),
                     ((v >> 10u) & 0x3C0u) | ((v >> 2u) & 0x3C00000u)) | vec2<u32>(0x3C003C00u);
}
fn h6(v: u32) -> vec2<u32> {
    return vec2<u32>(((v & 0x3Fu) << 4u) | ((v & 0x3F00u) << 12u),
                     ((v >> 12u) & 0x3F0u) | ((v >> 4u) & 0x3F00000u)) | vec2<u32>(0x3C003C00u);
}
// (f - one) * s + o on both words' halves, as words
fn scaled(u: vec2<u32>, one: f16, s: f32, o: f32) -> vec2<u32> {
    let a = (bitcast<vec2<f16>>(u.x) - one) * f16(s) + f16(o);
    let b = (bitcast<vec2<f16>>(u.y) - one) * f16(s) + f16(o);
    return vec2<u32>(bitcast<u32>(a), bitcast<u32>(b));
}

// weight row n's unit u dequantized, as halves (zeros past N): lo then hi (unit_k's order)
fn load_b(n: u32, u: u32) -> vec4<u32> {
    let nn = min(n, p.N - 1u);
    let w = u % (QK / 8u);                            // (K-quants: the quant word of the block)
    let o = (nn * (p.K / QK) + u / (QK / 8u)) * QBYTES;
    var r: vec4<u32>;
    if (FMT == 12u) {                                 // Q4_K, as common/qformats.wgsl's kunit
        let a = o >> 2u;
        let v = q4k_scales(a, w >> 3u, false);
        let q = wword(a + 4u + w, false);
        r = vec4<u32>(scaled(h4(q), 1.0h, 16.0 * v.x, -v.y),
                      scaled(h4(q >> 4u), 1.0h, 16.0 * v.z, -v.w));
    } else if (FMT == 14u) {                          // Q6_K, as kunit: (q - 32) = 64 (f - 1.5)
        let h = w >> 4u;
        let t = (w >> 3u) & 1u;
        let l = (w & 7u) * 4u;
        let ql = qword(o + 4u * w, false);
        let qh = qword(o + 128u + 32u * h + l, false) >> (2u * t);
        let lo6 = (ql & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4u);
        let hi6 = ((ql >> 4u) & 0x0F0F0F0Fu) | (((qh >> 4u) & 0x03030303u) << 4u);
        let sa = o + 192u + 8u * h + 2u * t + (l >> 4u);
        let d = qhalf(o + 208u, false);
        r = vec4<u32>(scaled(h6(lo6), 1.5h, 64.0 * d * int8_at(qbyte(sa, false)), 0.0),
                      scaled(h6(hi6), 1.5h, 64.0 * d * int8_at(qbyte(sa + 4u, false)), 0.0));
    } else {
        let q = load_unit(nn, u, false);
        let m = select(0.0, q.m, OWN && !Q8_0);
        r = halves(q.lo * q.d + m, q.hi * q.d + m);
    }
    return select(vec4<u32>(0u), r, n < p.N);
}

// 8 halves into a tile row (consecutive): row `row` of buffer `buf`, from k `k8`
// (As [m][k], Bs [n][k])
fn put_a(buf: u32, row: u32, k8: u32, v: vec4<u32>) {
    let h0 = bitcast<vec2<f16>>(v.x);
    let h1 = bitcast<vec2<f16>>(v.y);
    let h2 = bitcast<vec2<f16>>(v.z);
    let h3 = bitcast<vec2<f16>>(v.w);
    let t = &As[buf * (BM / 16u) + row / 16u];
    // one clamp here instead of Tint's eight (robustness clamps every index): `at` is a
    // multiple of 8 at most PA - 8, so the driver can see the 8 stores as one
    // 16-byte store (with eight clamped indices it cannot)
    let at = min(((row % 16u) * SA + k8) / 8u, PA / 8u - 1u) * 8u;
    (*t)[at] = h0.x; (*t)[at + 1u] = h0.y; (*t)[at + 2u] = h1.x; (*t)[at + 3u] = h1.y;
    (*t)[at + 4u] = h2.x; (*t)[at + 5u] = h2.y; (*t)[at + 6u] = h3.x; (*t)[at + 7u] = h3.y;
}

fn put_b(buf: u32, row: u32, k8: u32, v: vec4<u32>) {
    let h0 = bitcast<vec2<f16>>(v.x);
    let h1 = bitcast<vec2<f16>>(v.y);
    let h2 = bitcast<vec2<f16>>(v.z);
    let h3 = bitcast<vec2<f16>>(v.w);
    let t = &Bs[buf * (BN / 16u) + row / 16u];
    // one clamp here instead of Tint's eight (robustness clamps every index): `at` is a
    // multiple of 8 at most PB - 8, so the driver can see the 8 stores as one
    // 16-byte store (with eight clamped indices it cannot)
    let at = min(((row % 16u) * SB + k8) / 8u, PB / 8u - 1u) * 8u;
    (*t)[at] = h0.x; (*t)[at + 1u] = h0.y; (*t)[at + 2u] = h1.x; (*t)[at + 3u] = h1.y;
    (*t)[at + 4u] = h2.x; (*t)[at + 5u] = h2.y; (*t)[at + 6u] = h3.x; (*t)[at + 7u] = h3.y;
}

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
        rb[l] = load_b(col0 + i / UK, kb / 8u + i % UK);
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
            rb[l] = load_b(col0 + i / UK, un + i % UK);
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
