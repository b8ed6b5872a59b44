// The int8 prefill matmul without tensor cores (opt-in compiler/int8_prefill.INT8_PREFILL):
// out[M, N] = sum over blocks b of 32 along K of xs[m, b] ws[n, b] (xq_b[m, :] . wq_b[n, :])
// (+ bias[N]), f32 out. xq / xs: x's rows as int8 per 32 values by quant/qx8.wgsl (its
// per-16 pairs (d, d sum): d of the 16's block); wq / ws: the weight's rows by quant/qw8.wgsl.
// The numpy rule: quant.mmq_reference(x, w, 32). llama.cpp's MMQ on dp4a (its path for GPUs
// without int8 tensor cores), here for wgpu-native, which cannot reach the tensor cores.
// Products: dot4I8Packed (4 int8 pairs an instruction) into i32 sums, exact within a block;
// at each block's end a thread's TM x TN sums go to f32 through the exponent trick (an integer
// add and a float subtract, both full rate: |sum| <= 32 * 127 * 127 < 2^22; an i32 -> f32
// conversion runs at a quarter of that on NVIDIA) and are scaled by the two rows' scales.
// Tiles: a workgroup of 256 threads (16 x 16) owns BM x BN = 16 TM x 16 TN outputs; thread
// (tx, ty) the rows ty + 16 i and columns tx + 16 j. A step takes BK = 64 k (2 blocks) of
// both tiles into workgroup memory as vec4<u32> (16 int8), rows padded to 5 vec4 so that 8
// neighbouring threads' 16-byte loads of 8 rows fall in distinct banks; one barrier pair a
// step. Needs K % 64 == 0 (int8_prefill.applies); M and N tails are clamped at the loads and
// masked at the store.
// What limits it (reasoning, to be measured: bench/device_dawn.sh i8pre): per block a thread
// issues TM TN 8 dot4I8Packed, 2 (TM + TN) 16-byte workgroup loads and 3 TM TN ops of
// epilogue; where dp4a issues at half the f32 FMA rate (NVIDIA since Volta), that is
// ~1.6x the f32 matmul's products at equal efficiency.
struct Params { M: u32, N: u32, K: u32 }
@group(0) @binding(0) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> xs: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> wq: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> ws: array<f32>;
@group(0) @binding(4) var<storage, read_write> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

override HAS_BIAS: bool = false;
const TM: u32 = {{TM}}u;            // rows a thread
const TN: u32 = {{TN}}u;            // columns a thread
const BM: u32 = 16u * TM;
const BN: u32 = 16u * TN;
const V: u32 = 4u;                  // vec4 (16 int8) of a row a step: BK = 64
const S: u32 = 5u;                  // padded row stride, vec4
var<workgroup> ta: array<vec4<u32>, BM * S>;
var<workgroup> tb: array<vec4<u32>, BN * S>;
var<workgroup> sa: array<f32, BM * 2u>;      // the step's 2 block scales of each row
var<workgroup> sb: array<f32, BN * 2u>;

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
    var acc: array<f32, TM * TN>;
    for (var i = 0u; i < TM * TN; i++) { acc[i] = 0.0; }
    for (var k0 = 0u; k0 < kv; k0 += V) {
        for (var e = lid; e < BM * V; e += 256u) {
            let r = e / V;
            let c = e % V;
            let m = min(m0 + r, p.M - 1u);
            ta[r * S + c] = xq[m * kv + k0 + c];
        }
        for (var e = lid; e < BN * V; e += 256u) {
            let r = e / V;
            let c = e % V;
            let n = min(n0 + r, p.N - 1u);
            tb[r * S + c] = wq[n * kv + k0 + c];
        }
        for (var e = lid; e < BM * 2u; e += 256u) {
            let m = min(m0 + e / 2u, p.M - 1u);
            sa[e] = xs[m * kv + k0 + 2u * (e % 2u)].x;
        }
        for (var e = lid; e < BN * 2u; e += 256u) {
            let n = min(n0 + e / 2u, p.N - 1u);
            sb[e] = ws[n * (p.K / 32u) + k0 / 2u + e % 2u];
        }
        workgroupBarrier();
        for (var b = 0u; b < 2u; b++) {            // the step's 2 blocks of 32
            var isum: array<i32, TM * TN>;
            for (var i = 0u; i < TM * TN; i++) { isum[i] = 0; }
            for (var c = 2u * b; c < 2u * b + 2u; c++) {
                var bv: array<vec4<u32>, TN>;
                for (var j = 0u; j < TN; j++) { bv[j] = tb[(tx + 16u * j) * S + c]; }
                for (var i = 0u; i < TM; i++) {
                    let av = ta[(ty + 16u * i) * S + c];
                    for (var j = 0u; j < TN; j++) { isum[i * TN + j] += dot16(av, bv[j]); }
                }
            }
            var scb: array<f32, TN>;
            for (var j = 0u; j < TN; j++) { scb[j] = sb[(tx + 16u * j) * 2u + b]; }
            for (var i = 0u; i < TM; i++) {
                let sca = sa[(ty + 16u * i) * 2u + b];
                for (var j = 0u; j < TN; j++) {
                    acc[i * TN + j] = fma(to_f32(isum[i * TN + j]), sca * scb[j],
                                          acc[i * TN + j]);
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
