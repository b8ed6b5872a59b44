// Gradient of layer_norm / rms_norm with respect to the input, one fused kernel per row
// (RLX ships the same fused backward): for a contiguous [rows, n] x, its output gradient dy and
// the optional weight w,
//   xh = (x - mean) * inv,  gh = dy * w,  inv = 1 / sqrt(var + eps)
//   dx = inv * (gh - xh * mean(gh * xh) - mean(gh))         (RMS: no centring, no mean(gh))
// The row statistics are recomputed here as the forward kernel does (mean, then the corrected
// variance of d = x - mean; see norm/layer_norm.wgsl), so no mean/rstd buffer is kept between
// the passes. Three passes over a row: the mean, the variance, and both sums of gh; the last
// loop writes dx. The weight/bias gradients are column sums over the rows (sum of dy * xh and
// of dy): autodiff leaves them to the reduction kernels.
// Limits: one workgroup reduction per statistic (3-4 barriers' trees per row); the row is read
// four times, from cache for rows up to a few thousand elements. The composed form it replaces
// ran 9 kernels with 5 [rows, n] temporaries.
// bindings: 0 x, 1 dy, 2 w (a dummy when HAS_W is false), 3 out, 4 params.
// grid: RPW rows per workgroup (workgroups spread over x and y).
struct Params { rows: u32, n: u32, eps: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dy: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> w: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(4) var<uniform> p: Params;

override RMS: bool = false;
override HAS_W: bool = false;
const WG: u32 = 256u;
{{ROW_REDUCE}}

fn gh(base: u32, j: u32) -> f32 {
    if (HAS_W) { return f32(dy[base + j]) * f32(w[j]); }
    return f32(dy[base + j]);
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
    if (!RMS) {
        var s = 0.0;
        for (var j = t; j < n; j += tpr) { s += f32(x[base + j]); }
        mean = reduce_sum(lid, s) / nf;
    }
    var q = 0.0;
    var c = 0.0;
    for (var j = t; j < n; j += tpr) {
        let d = f32(x[base + j]) - mean;
        c += d;
        q += d * d;
    }
    var var_ = reduce_sum(lid, q) / nf;
    var shift = 0.0;
    if (!RMS) {
        shift = reduce_sum(lid, c) / nf;
        var_ = max(var_ - shift * shift, 0.0);
    }
    let inv = inverseSqrt(var_ + p.eps);
    var s_gx = 0.0;                          // sum of gh * xh
    var s_g = 0.0;                           // sum of gh
    for (var j = t; j < n; j += tpr) {
        let g = gh(base, j);
        s_gx += g * (((f32(x[base + j]) - mean) - shift) * inv);
        s_g += g;
    }
    let m_gx = reduce_sum(lid, s_gx) / nf;
    var m_g = 0.0;
    if (!RMS) { m_g = reduce_sum(lid, s_g) / nf; }
    for (var j = t; j < n; j += tpr) {
        let xh = ((f32(x[base + j]) - mean) - shift) * inv;
        out[base + j] = {{T}}(inv * (gh(base, j) - xh * m_gx - m_g));
    }
}
