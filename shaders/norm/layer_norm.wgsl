// layer_norm / rms_norm over rows of a contiguous [rows, n] input, f32 math, corrected two
// passes for accuracy: the mean m, then over d = x - m both sum(d) and sum(d^2); the mean is
// refined to m + sum(d)/n (applied as (x - m) - sum(d)/n) and var = sum(d^2)/n - (sum(d)/n)^2
// (Chan, Golub & LeVeque). With
// eps=1e-12 a mean one ulp off turns a constant row into noise of order 0.1; the refined mean
// is exact there, so such rows give 0 as in float64. y = norm(x + r) * w + b (r: fused residual).
// bindings: 0 x, 1 r, 2 w, 3 b (dummies when HAS_RES / HAS_W / HAS_B are false), 4 out,
// 5 params.
// grid: RPW rows per workgroup (workgroups spread over x and y).
// RMS: no centring, y = x / rms(x).
// Limits: the variance's two sums share one tree (two barrier trees per row, not three). GPU
// time on an H100 (timestamp queries): 4096x384 13 us, 6144x512 18 us, 1024x2048 15 us,
// 4096x4096 87 us, against torch's layer_norm at 46 / 59 / 19 / 94 us (CUDA events, launch
// included) — the kernel is not what the bench's wall-clock ratio measures (host submit cost).
// Tried: keeping the row in a 16-value register array per thread (one read instead of three):
// slower everywhere — H100 19 / 27 / 31 / 120 us, lavapipe 1024x2048 31 -> 55 ms, SwiftShader
// 4096x384 112 -> 145 ms (the array spills; the re-reads hit L1/L2 anyway).
struct Params { rows: u32, n: u32, eps: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> r: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> w: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> b: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(5) var<uniform> p: Params;

override RMS: bool = false;
override HAS_W: bool = false;
override HAS_B: bool = false;
override HAS_RES: bool = false;
const WG: u32 = 256u;
{{ROW_REDUCE}}

fn load(i: u32) -> f32 {
    if (HAS_RES) { return f32(x[i]) + f32(r[i]); }
    return f32(x[i]);
}


@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let tpr = WG / RPW;                      // threads per row
    let t = lid % tpr;
    let row = (wid.y * nwg.x + wid.x) * RPW + lid / tpr;
    let n = select(0u, p.n, row < p.rows);   // threads of rows past the end only reduce
    let base = row * p.n;
    let nf = f32(p.n);
    var mean = 0.0;
    var shift = 0.0;
    var var_ = 0.0;
    if (!RMS) {
        var s = 0.0;
        for (var j = t; j < n; j += tpr) { s += load(base + j); }
        mean = reduce_sum(lid, s) / nf;
    }
    var qc = vec2<f32>(0.0);
    for (var j = t; j < n; j += tpr) {
        let d = load(base + j) - mean;
        qc += vec2<f32>(d * d, d);
    }
    qc = reduce_sum2(lid, qc) / nf;
    var_ = qc.x;
    if (!RMS) {
        shift = qc.y;
        var_ = max(var_ - shift * shift, 0.0);
    }
    let inv = inverseSqrt(var_ + p.eps);
    for (var j = t; j < n; j += tpr) {
        // (x - m) is exact for a near-constant row; subtracting the shift after it (not
        // m + shift first) needs no exact division: NVIDIA's (2.5-ulp) one left rows one ulp
        // off there, which eps=1e-12 turned into outputs up to 7.6
        var y = ((load(base + j) - mean) - shift) * inv;
        if (HAS_W) { y *= f32(w[j]); }
        if (HAS_B) { y += f32(b[j]); }
        out[base + j] = {{T}}(y);
    }
}
