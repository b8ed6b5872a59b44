// softmax / log_softmax over rows of a contiguous [rows, n] input of x * scale, f32 math.
// bindings: 0 x, 1 mask (i32 [rows / per_batch, n]; a dummy when HAS_MASK is false), 2 out,
// 3 params. grid: RPW rows per workgroup (workgroups spread over x and y).
// LOG: false -> exp(x - max) / sum, true -> x - max - log(sum). Masked entries (mask 0, or
// CAUSAL and j > i + q_off with i = row % lq) are left out and written as 0 (attention).
// Limits (H100, bench --only rows): rows up to 6144x512 sit on the per-run submit floor
// (~30 us); 4096x4096 takes 146 us (torch 62), about 0.9 TB/s. The online max+sum (two reads
// of x instead of three) gave 150 -> 147 us there: the re-read hit L2; what bounds it is not
// found yet. Few long rows go to softmax_parts/finish instead (lower_rows.split_long_rows).
struct Params { rows: u32, n: u32, per_batch: u32, lq: u32, q_off: u32, scale: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> mask: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(3) var<uniform> p: Params;

override LOG: bool = false;
override HAS_MASK: bool = false;
override CAUSAL: bool = false;
const WG: u32 = 256u;
{{ROW_REDUCE}}
{{IEEE}}
{{ONLINE_SOFTMAX}}

fn keep(row: u32, j: u32) -> bool {
    if (HAS_MASK && mask[(row / p.per_batch) * p.n + j] == 0) { return false; }
    return !CAUSAL || j <= row % p.lq + p.q_off;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let tpr = WG / RPW;                      // threads per row
    let t = lid % tpr;
    let row = (wid.y * nwg.x + wid.x) * RPW + lid / tpr;
    let n = select(0u, p.n, row < p.rows);   // threads of rows past the end only reduce
    let base = row * p.n;
    let scale = p.scale;
    // online max and sum in one read of the row (the sum rescaled when the max grows), then
    // the threads' (max, sum) pairs combined: two reads of x in all instead of three
    var ms = vec2<f32>(-3.4028234663852886e38, 0.0);
    for (var j = t; j < n; j += tpr) {
        if (keep(row, j)) { ms = online_add(ms, f32(x[base + j]) * scale, 1.0); }
    }
    let m = reduce_max(lid, ms.x);
    let s = reduce_sum(lid, ms.y * exp_(ms.x - m));
    let inv = 1.0 / s;
    let ls = log_(s);
    for (var j = t; j < n; j += tpr) {
        let v = f32(x[base + j]) * scale - m;
        out[base + j] = {{T}}(select(select(exp_(v) * inv, v - ls, LOG), 0.0, !keep(row, j)));
    }
}
