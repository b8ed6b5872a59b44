// layer_norm / rms_norm over rows of a contiguous [rows, n] input (n % 4 == 0), each row held
// in registers: x (and r) read once, out written once. f32 math, the same corrected two-pass
// statistics as common/row_stats.wgsl (mean m, then sum(d) and sum(d^2) over d = x - m in one
// tree; y = ((x - m) - shift) * inv), so near-constant rows stay exact.
// y = norm(x + r) * w + b (r: fused residual).
// x may be the PARTS stacked partial products of a split-K matmul (compiler/lower_matmul.py:
// part q of the row at q * p.part vec4s, the matmul's bias in part 0), summed here before r
// is added: the product needs no sum kernel of its own.
// bindings: 0 x, 1 r, 2 w, 3 b (vec4; dummies when HAS_RES / HAS_W / HAS_B are false), 4 out,
// 5 params. grid: RPW rows per workgroup, WG / RPW threads a row, VPT vec4 a thread (a
// template constant: n <= 4 * VPT * WG / RPW).
// Limits (H100, bench/probes/submit_gap_probe.py): norm/layer_norm took 85 us of GPU time at
// 4096x4096, reading x three times with one scalar load in flight per thread. An earlier try
// kept 16 scalars a thread in an array indexed by a loop over n (a dynamic index): it spilled
// and ran slower. Here the array has a constant size and constant-bound loops, in vec4.
struct Params { rows: u32, n: u32, eps: f32, part: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> r: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read_write> w: array<vec4<{{T}}>>;
@group(0) @binding(3) var<storage, read_write> b: array<vec4<{{T}}>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<{{T}}>>;
@group(0) @binding(5) var<uniform> p: Params;

override RMS: bool = false;
override HAS_W: bool = false;
override HAS_B: bool = false;
override HAS_RES: bool = false;
override PARTS: u32 = 1u;                 // partial products summed into x (1: x alone)
const WG: u32 = 256u;
const VPT: u32 = {{VPT}}u;
{{ROW_REDUCE}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let tpr = WG / RPW;                      // threads per row
    let t = lid % tpr;
    let row = (wid.y * nwg.x + wid.x) * RPW + lid / tpr;
    let n4 = select(0u, p.n / 4u, row < p.rows);   // threads of rows past the end only reduce
    let base = row * (p.n / 4u);
    let nf = f32(p.n);
    let one = vec4<f32>(1.0);
    var v: array<vec4<f32>, VPT>;
    var s = 0.0;
    for (var i = 0u; i < VPT; i++) {
        let j = i * tpr + t;
        if (j < n4) {
            var a = vec4<f32>(x[base + j]);
            for (var q = 1u; q < PARTS; q++) { a += vec4<f32>(x[q * p.part + base + j]); }
            if (HAS_RES) { a += vec4<f32>(r[base + j]); }
            v[i] = a;
            s += dot(a, one);
        }
    }
    var mean = 0.0;
    if (!RMS) { mean = reduce_sum(lid, s) / nf; }
    var qc = vec2<f32>(0.0);
    for (var i = 0u; i < VPT; i++) {
        if (i * tpr + t < n4) {
            let d = v[i] - mean;
            qc += vec2<f32>(dot(d, d), dot(d, one));
        }
    }
    qc = reduce_sum2(lid, qc) / nf;
    var var_ = qc.x;
    var shift = 0.0;
    if (!RMS) {
        shift = qc.y;
        var_ = max(var_ - shift * shift, 0.0);
    }
    let inv = inverseSqrt(var_ + p.eps);
    for (var i = 0u; i < VPT; i++) {
        let j = i * tpr + t;
        if (j < n4) {
            var y = ((v[i] - mean) - shift) * inv;
            if (HAS_W) { y *= vec4<f32>(w[j]); }
            if (HAS_B) { y += vec4<f32>(b[j]); }
            out[base + j] = vec4<{{T}}>(y);
        }
    }
}
