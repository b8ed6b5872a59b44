// layer_norm / rms_norm over rows of a contiguous [rows, n] input, f32 math; the row statistics
// (corrected two passes, exact for near-constant rows) are common/row_stats.wgsl's.
// y = norm(x + r) * w + b (r: fused residual).
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
{{ROW_STATS}}

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
    let st = row_stats(lid, base, n, t, tpr, f32(p.n), p.eps);    // (mean, shift, inv)
    for (var j = t; j < n; j += tpr) {
        var y = ((load(base + j) - st.x) - st.y) * st.z;
        if (HAS_W) { y *= f32(w[j]); }
        if (HAS_B) { y += f32(b[j]); }
        out[base + j] = {{T}}(y);
    }
}
