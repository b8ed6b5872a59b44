// quantized GEMV for decode rows (M <= 4) and prefills (M <= fuse.GEMV_MAX_M, 4 rows per
// workgroup row): out[r, n] = x[r, :] . dequant(w)[n, :] (+ bias[n]).
// w: the raw GGUF blocks of an (N, K) weight as u32 words, row-major (N rows of K/QK blocks):
// Q4_1 (20-byte blocks: f16 d, f16 m, 16 bytes of nibbles) or Q8_0 (34 bytes: f16 d, 32 int8,
// only 2-byte aligned) by common/qblocks.wgsl's own paths, every other format of
// common/qformats.wgsl (Q4_0, Q5_0, Q5_1, Q2_K..Q6_K) by its deq8, 8 weights a unit as well.
// x [M, K] f32 or f16 (as vec4: K % QK == 0), out [M, N] f32, math f32.
// bindings: 0 x, 1 w, 2 bias [N] (a dummy when HAS_BIAS is false), 3 out, 4 params.
// grid: (ceil(N / (RPW * RPT)), ceil(M / ROWS), 1); a workgroup = RPW (8) x RPT weight rows
// x TPR threads splitting K, for x rows wid.y * ROWS ..+ROWS (past M: skipped). For short
// prefills this beats the tiled kernel (quant/qmatmul_tiled.wgsl), whose 64-row tiles are
// mostly empty there: on lavapipe a 16-row prefill of SmolLM2 spent 6.9 s in 210 tiled calls
// (33 ms each at N = 1536, K = 576); both go to the autotuner.
// A thread takes units of 8 weights (one nibble word of Q4_1, two int8 words of Q8_0), strided
// by TPR along the row so neighbouring threads read neighbouring words, dequantizes them in
// registers and dots them with x for all M rows (the weight is read once for every row), for
// each of its RPT weight rows (the unit's x loaded once for all of them); then the TPR partial
// sums of a row meet in workgroup memory.
// Limits: on GPUs, per-thread fixed costs (index math, the reduction, the write) once N * TPR
// threads pass what the GPU holds, and latency below that: on an H100 (Vulkan) N = 49152,
// K = 576 runs in 21 us (Q4_1, 850 GB/s of blocks; f32 x @ w: 59 us), small shapes in ~7 us.
// So TPR is an override the autotuner picks per shape (2..32; the lowering's default aims at
// ~2^19 threads): on the H100 N = 49152 ran best at 8 (32: 2x slower) and N = 576 at 16 or 32.
// CPU adapters (lavapipe, SwiftShader) run 4..8 lanes as SIMD and take both sides of every
// branch that is not a constant: there the cost is instructions per unit, not bytes. Measured
// as 20 chained 1536x1536 Q4_1 GEMVs, one executable, ms per GEMV (M = 1 / M = 4):
//   TPR 4, RPT 1, row checks `valid > i`:  SwiftShader 30 / 26, lavapipe 3.0 / 7.8
//   TPR 1, RPT 8 (x loads shared):          SwiftShader 11.8,    lavapipe 1.8
//   + row checks `ROWS > i && valid > i` (constant-folded when M = 1): SwiftShader 6.9
//   + nibbles shifted by constants (a vec4 shifted by per-component amounts is scalarized):
//     SwiftShader 5.8 / 9.8, lavapipe 1.6 / 2.2.
// A whole SmolLM2 step on SwiftShader went from 4.2 s to 0.44 s (prefill of 32: 15 -> 3.9 s);
// on lavapipe from 0.26 to 0.13 s (prefill of 32: 3.1 -> 0.7 s). Hence RPT = 8, TPR = 1 is the
// CPU default (lower_quant.gemv_shape). No difference on SwiftShader: x or w loads replaced by
// constants (so not bandwidth), no barrier at all, accumulators as an array vs named, the weight
// transposed to [K/32][5 words][N] so lanes read neighbouring words (SwiftShader ~1.4x, lavapipe
// 2x slower).
// K-quants (Q4_K_M files are Q4_K + Q6_K): a unit is one word of 4-bit quants and both its
// halves' sub-block scales (common/qformats.wgsl's kunit), not deq8's 8 consecutive weights,
// which read every quant word twice and the scales byte by byte (Q6_K's 210-byte blocks are
// only 2-byte aligned: each unaligned word is two loads). Measured as 10 chained 2048x2048
// GEMVs (M = 1, 1x8) on lavapipe, ms per GEMV: Q6_K 11.0 -> 6.6, Q4_K 6.0 -> 5.9 (Q4_1 6.1).
// What limits them still: 5 (Q4_K) / 7 (Q6_K) loads a unit against Q4_1's 2, three of Q4_K's
// the scale words every thread of a row reads again (decoded per unit, not per sub-block),
// and 8 scale FMAs where Q4_1 folds d and m out of the dot. Not yet timed on a GPU.
// Tried before: RPW 4 / 8 / 32 (no difference on lavapipe); a thread taking whole blocks (no
// gain); unpack4x8unorm decoding with the scale folded (no gain on lavapipe). Q4_1's offset is
// folded out of the dot (d * q.x + m * sum(x)). Subgroups would only replace the final
// reduction; f16 math would cost accuracy and save no bytes.
struct Params { M: u32, N: u32, K: u32, nw: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

override HAS_BIAS: bool = false;
override ROWS: u32 = 1u;          // x rows per workgroup row, 1..4 (M when M <= 4)
override TPR: u32 = 8u;           // threads per weight row: a power of two, 1..32
override RPT: u32 = 1u;           // weight rows per thread, 1..8 (each unit's x loads shared)
override RQ: u32 = 1u;            // x row quads per workgroup, 1..4 (ROWS = 4; RPT 1 or 2)
const RPW: u32 = 8u;              // weight rows per workgroup
var<workgroup> red: array<vec4<f32>, 256>;   // a partial sum per thread, x rows in x..w

fn wword(i: u32, second: bool) -> u32 { return w[i]; }
fn x_vec(r: u32, k4: u32) -> vec4<f32> { return vec4<f32>(x[r * (p.K >> 2u) + k4]); }
{{QBLOCKS}}

// slot dots of unit u: weight row n against x rows r0.. (nothing past N or M)
fn row_dot(n: u32, u: u32, v: XUnit, valid: u32) -> vec4<f32> {
    if (n < p.N) { return dot_rows(load_unit(n, u, false), v, valid); }
    return vec4<f32>(0.0);
}
// x row quad r's unit u (loaded once) against weight units q and, RPT = 2, qb: their dots
fn quad_pair(q: Unit, qb: Unit, u: u32, r: u32) -> array<vec4<f32>, 2> {
    var d = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0));
    let valid = valid_rows(r);
    if (valid > 0u) {
        let v = load_x(u, r, valid);
        d[0] = dot_rows(q, v, valid);
        if (RPT > 1u) { d[1] = dot_rows(qb, v, valid); }
    }
    return d;
}

@compute @workgroup_size(RPW * TPR)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let t = tid % TPR;
    let n0 = wid.x * RPW * RPT + tid / TPR; // this thread's first weight row
    let r0 = wid.y * ROWS * RQ;             // this workgroup's first x row
    let valid = valid_rows(r0);
    var a0 = vec4<f32>(0.0);                // slots (common/qblocks.wgsl)
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var a4 = vec4<f32>(0.0);
    var a5 = vec4<f32>(0.0);
    var a6 = vec4<f32>(0.0);
    var a7 = vec4<f32>(0.0);
    if (n0 < p.N) {
        for (var u = t; u < (p.K >> 3u); u += TPR) {
            if (RQ > 1u) {                  // one unit of weight row n0 (RPT = 2: and of row
                let q = load_unit(n0, u, false);    // n0 + RPW, slots RQ..), RQ x row quads
                var qb: Unit;
                if (RPT > 1u && n0 + RPW < p.N) { qb = load_unit(n0 + RPW, u, false); }
                let d0 = quad_pair(q, qb, u, r0);
                let d1 = quad_pair(q, qb, u, r0 + 4u);
                a0 += d0[0];
                a1 += d1[0];
                if (RPT > 1u && RQ == 2u) { a2 += d0[1]; a3 += d1[1]; }
                if (RPT > 1u && RQ == 4u) { a4 += d0[1]; a5 += d1[1]; }
                if (RQ > 2u) {
                    let d2 = quad_pair(q, qb, u, r0 + 8u);
                    a2 += d2[0];
                    if (RPT > 1u) { a6 += d2[1]; }
                }
                if (RQ > 3u) {
                    let d3 = quad_pair(q, qb, u, r0 + 12u);
                    a3 += d3[0];
                    if (RPT > 1u) { a7 += d3[1]; }
                }
            } else {                        // RPT weight rows, one unit of x loaded once
                let v = load_x(u, r0, valid);
                a0 += dot_rows(load_unit(n0, u, false), v, valid);
                if (RPT > 1u) { a1 += row_dot(n0 + RPW, u, v, valid); }
                if (RPT > 2u) { a2 += row_dot(n0 + 2u * RPW, u, v, valid); }
                if (RPT > 3u) { a3 += row_dot(n0 + 3u * RPW, u, v, valid); }
                if (RPT > 4u) { a4 += row_dot(n0 + 4u * RPW, u, v, valid); }
                if (RPT > 5u) { a5 += row_dot(n0 + 5u * RPW, u, v, valid); }
                if (RPT > 6u) { a6 += row_dot(n0 + 6u * RPW, u, v, valid); }
                if (RPT > 7u) { a7 += row_dot(n0 + 7u * RPW, u, v, valid); }
            }
        }
    }
    let acc = array<vec4<f32>, 8>(a0, a1, a2, a3, a4, a5, a6, a7);
    for (var j = 0u; j < slots(); j++) {
        let n = slot_n(n0, j);
        let r = slot_r(r0, j);
        let valid = valid_rows(r);
        var s = acc[j];
        if (TPR > 1u) {                     // the TPR partial sums of the row meet
            workgroupBarrier();             // (the previous slot's sums were read)
            red[tid] = s;
            workgroupBarrier();
            if (t == 0u) {
                for (var i = 1u; i < TPR; i++) { s += red[tid + i]; }
            }
        }
        if (t == 0u && n < p.N && valid > 0u) {
            var b = 0.0;
            if (HAS_BIAS) { b = bias[n]; }
            let o = r * p.N + n;
            out[o] = s.x + b;
            if (valid > 1u) { out[o + p.N] = s.y + b; }
            if (valid > 2u) { out[o + 2u * p.N] = s.z + b; }
            if (valid > 3u) { out[o + 3u * p.N] = s.w + b; }
        }
    }
}
