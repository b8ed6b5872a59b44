// Gradient of layer_norm / rms_norm with respect to the input, one fused kernel per row
// (RLX ships the same fused backward): for a contiguous [rows, n] x, its output gradient dy and
// the optional weight w,
//   xh = (x - mean) * inv,  gh = dy * w,  inv = 1 / sqrt(var + eps)
//   dx = inv * (gh - xh * mean(gh * xh) - mean(gh))         (RMS: no centring, no mean(gh))
// The row statistics are recomputed as the forward kernel does (common/row_stats.wgsl), so no
// mean/rstd buffer is kept between the passes: the mean, the variance, both sums of gh (one
// tree each), then the loop that writes dx. The weight/bias gradients are column sums over the rows (sum of dy * xh and
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
{{ROW_STATS}}

fn load(i: u32) -> f32 { return f32(x[i]); }

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
    let st = row_stats(lid, base, n, t, tpr, nf, p.eps);         // (mean, shift, inv)
    var s_gx = 0.0;                          // sum of gh * xh
    var s_g = 0.0;                           // sum of gh
    for (var j = t; j < n; j += tpr) {
        let g = gh(base, j);
        s_gx += g * (((load(base + j) - st.x) - st.y) * st.z);
        s_g += g;
    }
    let m = reduce_sum2(lid, vec2<f32>(s_gx, s_g)) / nf;        // mean(gh * xh), mean(gh)
    let m_g = select(m.y, 0.0, RMS);
    for (var j = t; j < n; j += tpr) {
        let xh = ((load(base + j) - st.x) - st.y) * st.z;
        out[base + j] = {{T}}(st.z * (gh(base, j) - xh * m.x - m_g));
    }
}
