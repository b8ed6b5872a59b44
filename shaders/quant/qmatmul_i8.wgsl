// The int8 prefill matmul without tensor cores (opt-in compiler/int8_prefill.INT8_PREFILL):
// out[M, N] = sum over groups g of G along K of xs[m, g] ws[n, g] (xq_g[m, :] . wq_g[n, :])
// (+ bias[N]), f32 out. xq / xs and wq / ws: x's rows and the weight's rows as int8 in groups
// of G with their scales (R x K/G), both by quant/qw8.wgsl. The numpy rule:
// quant.mmq_reference(x, w, G). llama.cpp's MMQ on dp4a (its path for GPUs without int8
// tensor cores), here for wgpu-native, which cannot reach the tensor cores.
// Products: dot4I8Packed (4 int8 pairs an instruction) into i32 sums, exact within a group;
// at each group's end a thread's TM x TN sums go to f32 through the exponent trick (an integer
// add and a float subtract, both full rate: |sum| <= 256 * 127 * 127 < 2^22 for G <= 256; an
// i32 -> f32 conversion runs at a quarter of that on NVIDIA) and are scaled by the two rows'
// scales in an FMA.
// Tiles: a workgroup of 256 threads (16 x 16) owns BM x BN = 16 TM x 16 TN outputs; thread
// (tx, ty) the rows ty + 16 i and columns tx + 16 j. A step takes BK = 16 V k (64 or 128) of
// both tiles into workgroup memory as vec4<u32> (16 int8), rows padded to V + 1 vec4 so that
// 8 neighbouring threads' 16-byte loads of 8 rows fall in distinct banks, the next step's
// tiles fetched into registers while this one's are multiplied; one barrier pair a step.
// Needs K % G == 0 and G % BK == 0 (lower_quant keeps the variants that fit); M and N tails
// are clamped at the loads and masked at the store.
// Measured (H200, natively, the 1B-shaped Q4_K_M 512-token prefill, bench/device_dawn.sh
// i8pre): the first form (groups of 32, scales at every 32 k, one step's tiles at a time, 64x64
// picked) took 22.1 GPU ms of products against the f32 matmuls' 26.0: the per-32 epilogue
// (4 ops an output for 8 dot4I8Packed) and the exposed loads bound it. Groups of 256 cut the
// epilogue 8x at about the same accuracy (the int8 prefill under Dawn: 3.4e-2 -> 4.0e-2 x
// max|logit| from groups of 32 to 2048: the rounding of each value, not the groups' scales).
// With them and the next step's tiles fetched during the products: 13.9 ms (64x64 and 128x64
// picked), the prefill 19.9-20.0 ms against llama.cpp Vulkan's 23.9-24.7 and f32's 31.4
// (bench/results/2026-11-29-h200-native-int8-prefill.json). With 128 k a step offered too:
// 13.2 ms (128x64, 128x64 k128 and 64x64 k128 picked), the prefill 19.5 ms. Not tried yet:
// the weights' int8 copy kept across prefills (memory: +1 byte a weight).
struct Params { M: u32, N: u32, K: u32 }
@group(0) @binding(0) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> xs: array<f32>;
@group(0) @binding(2) var<storage, read_write> wq: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> ws: array<f32>;
@group(0) @binding(4) var<storage, read_write> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

override HAS_BIAS: bool = false;
override G: u32 = 256u;             // k a group (one scale a row and group): 64, 128 or 256
const TM: u32 = {{TM}}u;            // rows a thread
const TN: u32 = {{TN}}u;            // columns a thread
const BM: u32 = 16u * TM;
const BN: u32 = 16u * TN;
const V: u32 = {{V}}u;              // vec4 (16 int8) of a row a step: BK = 16 V (64 or 128)
const S: u32 = V + 1u;              // padded row stride, vec4 (odd: 8 rows in distinct banks)
const LA: u32 = (BM * V + 255u) / 256u;       // vec4 loads of x a thread a step
const LB: u32 = (BN * V + 255u) / 256u;
var<workgroup> ta: array<vec4<u32>, BM * S>;
var<workgroup> tb: array<vec4<u32>, BN * S>;

fn dot16(a: vec4<u32>, b: vec4<u32>) -> i32 {
    return dot4I8Packed(a.x, b.x) + dot4I8Packed(a.y, b.y) + dot4I8Packed(a.z, b.z) +
           dot4I8Packed(a.w, b.w);
}

// i (|i| < 2^22) as f32: 1.5 * 2^23 + i has i in its mantissa's low bits
fn to_f32(i: i32) -> f32 {
    return bitcast<f32>(bitcast<u32>(i + 0x4B400000)) - 12582912.0;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let tx = lid % 16u;
    let ty = lid / 16u;
    let m0 = wid.y * BM;
    let n0 = wid.x * BN;
    let kv = p.K / 16u;                            // vec4 a row
    let groups = p.K / G;
    var acc: array<f32, TM * TN>;
    var isum: array<i32, TM * TN>;
    for (var i = 0u; i < TM * TN; i++) { acc[i] = 0.0; isum[i] = 0; }
    var ra: array<vec4<u32>, LA>;                  // the next step's tiles, in registers
    var rb: array<vec4<u32>, LB>;
    for (var l = 0u; l < LA; l++) {
        let e = min(lid + 256u * l, BM * V - 1u);
        ra[l] = xq[min(m0 + e / V, p.M - 1u) * kv + e % V];
    }
    for (var l = 0u; l < LB; l++) {
        let e = min(lid + 256u * l, BN * V - 1u);
        rb[l] = wq[min(n0 + e / V, p.N - 1u) * kv + e % V];
    }
    for (var k0 = 0u; k0 < kv; k0 += V) {
        for (var l = 0u; l < LA; l++) {
            let e = lid + 256u * l;
            if (e < BM * V) { ta[(e / V) * S + e % V] = ra[l]; }
        }
        for (var l = 0u; l < LB; l++) {
            let e = lid + 256u * l;
            if (e < BN * V) { tb[(e / V) * S + e % V] = rb[l]; }
        }
        workgroupBarrier();
        let k1 = min(k0 + V, kv - V);              // the next step (the last re-reads itself)
        for (var l = 0u; l < LA; l++) {
            let e = min(lid + 256u * l, BM * V - 1u);
            ra[l] = xq[min(m0 + e / V, p.M - 1u) * kv + k1 + e % V];
        }
        for (var l = 0u; l < LB; l++) {
            let e = min(lid + 256u * l, BN * V - 1u);
            rb[l] = wq[min(n0 + e / V, p.N - 1u) * kv + k1 + e % V];
        }
        for (var c = 0u; c < V; c++) {
            var bv: array<vec4<u32>, TN>;
            for (var j = 0u; j < TN; j++) { bv[j] = tb[(tx + 16u * j) * S + c]; }
            for (var i = 0u; i < TM; i++) {
                let av = ta[(ty + 16u * i) * S + c];
                for (var j = 0u; j < TN; j++) { isum[i * TN + j] += dot16(av, bv[j]); }
            }
        }
        if ((k0 + V) % (G / 16u) == 0u) {          // a group ends: scale its sums into acc
            let g = (16u * k0) / G;
            var scb: array<f32, TN>;
            for (var j = 0u; j < TN; j++) {
                scb[j] = ws[min(n0 + tx + 16u * j, p.N - 1u) * groups + g];
            }
            for (var i = 0u; i < TM; i++) {
                let sca = xs[min(m0 + ty + 16u * i, p.M - 1u) * groups + g];
                for (var j = 0u; j < TN; j++) {
                    acc[i * TN + j] = fma(to_f32(isum[i * TN + j]), sca * scb[j],
                                          acc[i * TN + j]);
                    isum[i * TN + j] = 0;
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < TM; i++) {
        let m = m0 + ty + 16u * i;
        if (m >= p.M) { continue; }
        for (var j = 0u; j < TN; j++) {
            let n = n0 + tx + 16u * j;
            if (n >= p.N) { continue; }
            var v = acc[i * TN + j];
            if (HAS_BIAS) { v += bias[n]; }
            out[m * p.N + n] = v;
        }
    }
}
