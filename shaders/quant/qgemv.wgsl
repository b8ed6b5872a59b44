// quantized GEMV for decode rows (M <= 4) and prefills (M <= fuse.GEMV_MAX_M, 4 rows per
// workgroup row): out[r, n] = x[r, :] . dequant(w)[n, :] (+ bias[n]).
// w: the raw GGUF blocks of an (N, K) weight as u32 words, row-major (N rows of K/32 blocks);
// Q4_1 (20-byte blocks: f16 d, f16 m, 16 bytes of nibbles) or Q8_0 (34 bytes: f16 d, 32 int8,
// only 2-byte aligned). x [M, K] f32 or f16 (as vec4: K % 32 == 0), out [M, N] f32, math f32.
// bindings: 0 x, 1 w, 2 bias [N] (a dummy when HAS_BIAS is false), 3 out, 4 params.
// grid: (ceil(N / RPW), ceil(M / ROWS), 1); a workgroup = RPW (8) weight rows x TPR threads
// splitting K, for x rows wid.y * ROWS ..+ROWS (past M: skipped). For short prefills this beats
// the tiled kernel (quant/qmatmul_tiled.wgsl), whose 64-row tiles are mostly empty there: on
// lavapipe a 16-row prefill of SmolLM2 spent 6.9 s in 210 tiled calls (33 ms each at
// N = 1536, K = 576); both go to the autotuner.
// A thread takes units of 8 weights (one nibble word of Q4_1, two int8 words of Q8_0), strided
// by TPR along the row so neighbouring threads read neighbouring words, dequantizes them in
// registers and dots them with x for all M rows (the weight is read once for every row), then
// the TPR partial sums of a row meet in workgroup memory.
// Limits: on GPUs, per-thread fixed costs (index math, the reduction, the write) once N * TPR
// threads pass what the GPU holds, and latency below that: on an H100 (Vulkan) N = 49152,
// K = 576 runs in 21 us (Q4_1, 850 GB/s of blocks; f32 x @ w: 59 us), small shapes in ~7 us.
// On lavapipe (CPU SIMD lanes) not the decoding (below), most likely the per-lane gathered
// loads of w and x words. So TPR is an override the autotuner picks per shape (2..32; the
// lowering's default aims at ~2^19 threads): on the H100 N = 49152 ran best at 8 (32: 2x
// slower) and N = 576 at 16 or 32; on lavapipe 2..8 are within 10% and 32 is ~2x slower.
// Tried: RPW 4 / 8 / 32 (no difference on lavapipe); a thread taking whole blocks (no gain);
// unpack4x8unorm decoding with the scale folded (no gain on lavapipe: decoding ALU is not the
// limit). Q4_1's offset is folded out of the dot (d * q.x + m * sum(x)). Subgroups would only
// replace the final reduction; f16 math would cost accuracy and save no bytes.
struct Params { M: u32, N: u32, K: u32, nw: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

override Q8_0: bool = false;      // false: Q4_1
override HAS_BIAS: bool = false;
override ROWS: u32 = 1u;          // x rows per workgroup row, 1..4 (M when M <= 4)
override TPR: u32 = 8u;           // threads per weight row: a power of two, 2..32
const RPW: u32 = 8u;              // weight rows per workgroup
var<workgroup> red: array<vec4<f32>, 256>;   // a partial sum per thread, x rows in x..w

fn wword(i: u32) -> u32 { return w[i]; }
{{QBLOCKS}}
// this unit's contribution to x row r . weight row
fn dot_unit(q: Unit, r: u32) -> f32 {     // r: the x row
    let base = r * (p.K / 4u);
    let xa = vec4<f32>(x[base + q.k0 / 4u]);
    let xb = vec4<f32>(x[base + q.k1 / 4u]);
    var s = q.d * (dot(q.lo, xa) + dot(q.hi, xb));
    if (!Q8_0) { s += q.m * dot(xa + xb, vec4<f32>(1.0)); }
    return s;
}

@compute @workgroup_size(RPW * TPR)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let t = tid % TPR;
    let n = wid.x * RPW + tid / TPR;
    let r0 = wid.y * ROWS;                  // this workgroup's first x row
    let valid = valid_rows(r0);
    var acc = vec4<f32>(0.0);
    if (n < p.N) {
        for (var u = t; u < p.K / 8u; u += TPR) {
            acc += dot_rows(load_unit(n, u), r0, valid);
        }
    }
    red[tid] = acc;
    workgroupBarrier();
    if (t == 0u && n < p.N) {
        var s = vec4<f32>(0.0);
        for (var j = 0u; j < TPR; j++) { s += red[tid + j]; }
        var b = 0.0;
        if (HAS_BIAS) { b = bias[n]; }
        let o = r0 * p.N + n;
        out[o] = s.x + b;
        if (valid > 1u) { out[o + p.N] = s.y + b; }
        if (valid > 2u) { out[o + 2u * p.N] = s.z + b; }
        if (valid > 3u) { out[o + 3u * p.N] = s.w + b; }
    }
}
