// matmul for few rows (M <= 4, e.g. decoding): C[b] = act(A[b] @ B[b] + bias).
// A [M,K] (scalar reads), B [K,N] and C as vec4 arrays: needs N % 4 == 0.
// bindings: 0 A, 1 B, 2 bias [N] (a dummy when HAS_BIAS is false), 3 C, 4 params.
// grid: (ceil(N / (4 QUADS)), 1, batches); 256 threads = QUADS column quads x 256 / QUADS
// slices of K, then a tree reduction over the slices. Bandwidth-bound: B is read exactly once.
// Limits: loads in flight. With 8 quads x 32 slices (one workgroup per 32 columns) an H100 read
// a 4096x4096 B at 0.5-0.76 TB/s: 128 workgroups, 8 warps an SM, each thread waiting on one
// load at a time. QUADS = 4 (256 workgroups at N = 4096) read it at 1.5 TB/s of GPU time
// (43.5 us; torch 25 us wall). UNROLL (GPUs' default) issues four loads of B a thread before
// their FMAs: 29.5 us, 2.3 TB/s (bench/probes/gemv_probe.py). (An older 4x unroll with 8 quads was
// slower, 88 -> 129 us.) Tried and dropped: cutting K into up to 16 pieces over more
// workgroups plus a summing kernel (42-55 us without UNROLL, 36-42 us with it), and 16-64
// quads (one warp a 512-byte row run) with pieces: no better than 4 quads.
// The wall time per run is then bound by the ~17 us the GPU idles between two submits on
// wgpu-native/Vulkan (bench/probes/submit_gap_probe.py's timeline), not by this kernel.
{{MATH}}
struct Params { M: u32, N: u32, K: u32, a_off: u32, b_off: u32, a_bs: u32, b_bs: u32,
                c_off: u32, bias_off: u32 }
@group(0) @binding(0) var<storage, read_write> A: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> B: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read_write> bias: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<{{T}}>>;
@group(0) @binding(4) var<uniform> p: Params;

override HAS_BIAS: bool = false;
override ACT: u32 = 0u;
override ROWS: u32 = 1u;                  // M, 1..4
override QUADS: u32 = 8u;                 // column quads per workgroup: 1 .. 64
override UNROLL: bool = false;
const WG: u32 = 256u;
var<workgroup> red: array<vec4<f32>, 1024>;   // [row][slice][quad]: 4 x SLICES x QUADS

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let SLICES = WG / QUADS;
    let q = tid % QUADS;
    let s = tid / QUADS;
    let N4 = p.N / 4u;
    let c4 = wid.x * QUADS + q;
    let a_base = p.a_off + wid.z * p.a_bs;
    let b_base = (p.b_off + wid.z * p.b_bs) / 4u;
    // four named accumulators, not an array: a dynamic index would leave registers
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    if (c4 < N4) {
        var k = s;
        if (UNROLL) {        // four loads of B issued before their FMAs: 4 in flight a thread
            let s4 = SLICES * N4;                    // one step of K in B
            for (; k + 3u * SLICES < p.K; k += 4u * SLICES) {
                let i = b_base + k * N4 + c4;
                let b0 = vec4<f32>(B[i]);
                let b1 = vec4<f32>(B[i + s4]);
                let b2 = vec4<f32>(B[i + 2u * s4]);
                let b3 = vec4<f32>(B[i + 3u * s4]);
                for (var r = 0u; r < ROWS; r++) {
                    let ai = a_base + r * p.K + k;
                    let v = f32(A[ai]) * b0 + f32(A[ai + SLICES]) * b1 +
                            f32(A[ai + 2u * SLICES]) * b2 + f32(A[ai + 3u * SLICES]) * b3;
                    if (r == 0u) { a0 += v; } else if (r == 1u) { a1 += v; }
                    else if (r == 2u) { a2 += v; } else { a3 += v; }
                }
            }
        }
        for (; k < p.K; k += SLICES) {
            let b = vec4<f32>(B[b_base + k * N4 + c4]);
            a0 += f32(A[a_base + k]) * b;
            if (ROWS > 1u) { a1 += f32(A[a_base + p.K + k]) * b; }
            if (ROWS > 2u) { a2 += f32(A[a_base + 2u * p.K + k]) * b; }
            if (ROWS > 3u) { a3 += f32(A[a_base + 3u * p.K + k]) * b; }
        }
    }
    red[(0u * SLICES + s) * QUADS + q] = a0;
    red[(1u * SLICES + s) * QUADS + q] = a1;
    red[(2u * SLICES + s) * QUADS + q] = a2;
    red[(3u * SLICES + s) * QUADS + q] = a3;
    // tree over the slices: red[r][s] += red[r][s + h] for h = SLICES / 2 .. 1
    for (var h = SLICES / 2u; h > 0u; h >>= 1u) {
        workgroupBarrier();
        if (s < h) {
            for (var r = 0u; r < ROWS; r++) {
                red[(r * SLICES + s) * QUADS + q] += red[(r * SLICES + s + h) * QUADS + q];
            }
        }
    }
    workgroupBarrier();
    if (s == 0u && c4 < N4) {
        let c_base = (p.c_off + wid.z * p.M * p.N) / 4u;
        // ROWS (== p.M), not p.M: with a uniform bound here lavapipe leaked 512 KB of host
        // memory per dispatch when M == 1 (and ran 1.5x slower)
        for (var r = 0u; r < ROWS; r++) {
            var v = red[(r * SLICES) * QUADS + q];
            if (HAS_BIAS) {
                let bo = p.bias_off + c4 * 4u;
                v += vec4<f32>(f32(bias[bo]), f32(bias[bo + 1u]), f32(bias[bo + 2u]),
                               f32(bias[bo + 3u]));
            }
            v = vec4<f32>(activate(v.x, ACT), activate(v.y, ACT), activate(v.z, ACT),
                          activate(v.w, ACT));
            C[c_base + r * N4 + c4] = vec4<{{T}}>(v);
        }
    }
}
