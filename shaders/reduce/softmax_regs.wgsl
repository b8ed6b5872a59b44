// softmax / log_softmax over rows of a contiguous [rows, n] input of x * scale (n % 4 == 0),
// each row held in registers: x is read once and out written once (reduce/softmax reads x
// twice, with a loop-carried online max). f32 math. The same bindings, params and overrides
// as reduce/softmax, so attention's masked softmax runs here too.
// bindings: 0 x (vec4), 1 mask (i32 [rows / per_batch, n]; a dummy when HAS_MASK is false),
// 2 out (vec4), 3 params. grid: RPW rows per workgroup, WG / RPW threads a row, VPT vec4 a
// thread (template constants: n <= 4 * VPT * WG / RPW).
// Same results as reduce/softmax: masked entries (mask 0, or CAUSAL and j > i + q_off with
// i = row % lq) are left out and written as 0 — here they hold -inf, which the max ignores
// and the sum takes as 0 — the max ignores NaN (v > m), NaN and inf propagate through exp_ /
// log_ as there.
// Limits (H100, bench/probes/submit_gap_probe.py): reduce/softmax took 85 us of GPU time at
// 4096x4096
// (1.5 TB/s): each thread's loop issued one scalar load, waited for it, then updated the
// online max — 16 dependent round trips per pass. Here a thread issues its VPT vec4 loads
// back to back (a constant-bound loop over a constant-size array: unrolled, in registers):
// 60 us (2.1 TB/s).
struct Params { rows: u32, n: u32, per_batch: u32, lq: u32, q_off: u32, scale: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> mask: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<{{T}}>>;
@group(0) @binding(3) var<uniform> p: Params;

override LOG: bool = false;
override HAS_MASK: bool = false;
override CAUSAL: bool = false;
const WG: u32 = {{WG}}u;          // 256; up to 1024 for wide rows (lower_rows.wide_row_shape)
const VPT: u32 = {{VPT}}u;
{{ROW_REDUCE}}
{{IEEE}}

// which of elements 4 j4 .. 4 j4 + 3 of `row` take part
fn keep4(row: u32, j4: u32) -> vec4<bool> {
    var k = vec4<bool>(true);
    let j = 4u * j4;
    if (HAS_MASK) {
        let mb = (row / p.per_batch) * p.n + j;
        k = vec4<bool>(mask[mb] != 0, mask[mb + 1u] != 0, mask[mb + 2u] != 0,
                       mask[mb + 3u] != 0);
    }
    if (CAUSAL) {
        k = k & (vec4<u32>(j, j + 1u, j + 2u, j + 3u) <= vec4<u32>(row % p.lq + p.q_off));
    }
    return k;
}

// max of m and v's lanes; NaN lanes ignored (v > m, as reduce/softmax)
fn gt_max(m: f32, v: vec4<f32>) -> f32 {
    var r = m;
    if (v.x > r) { r = v.x; }
    if (v.y > r) { r = v.y; }
    if (v.z > r) { r = v.z; }
    if (v.w > r) { r = v.w; }
    return r;
}

fn exp4(v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(exp_(v.x), exp_(v.y), exp_(v.z), exp_(v.w));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let tpr = WG / RPW;                      // threads per row
    let t = lid % tpr;
    let row = (wid.y * nwg.x + wid.x) * RPW + lid / tpr;
    let n4 = select(0u, p.n / 4u, row < p.rows);   // threads of rows past the end only reduce
    let base = row * (p.n / 4u);
    var v: array<vec4<f32>, VPT>;
    var m = -3.4028234663852886e38;
    for (var i = 0u; i < VPT; i++) {
        let j = i * tpr + t;
        if (j < n4) {
            v[i] = vec4<f32>(x[base + j]) * p.scale;
            if (HAS_MASK || CAUSAL) {
                v[i] = select(vec4<f32>(inf_(0x80000000u)), v[i], keep4(row, j));
            }
            m = gt_max(m, v[i]);
        }
    }
    m = reduce_max(lid, m);
    // softmax keeps exp(v - m) in v (one exp an element); log_softmax keeps v - m
    var s = 0.0;
    for (var i = 0u; i < VPT; i++) {
        if (i * tpr + t < n4) {
            let d = v[i] - m;
            let e = exp4(d);
            v[i] = select(e, d, LOG);
            s += (e.x + e.y) + (e.z + e.w);
        }
    }
    s = reduce_sum(lid, s);
    let inv = 1.0 / s;
    let ls = log_(s);
    for (var i = 0u; i < VPT; i++) {
        let j = i * tpr + t;
        if (j < n4) {
            var y = select(v[i] * inv, v[i] - ls, LOG);
            if (HAS_MASK || CAUSAL) { y = select(vec4<f32>(0.0), y, keep4(row, j)); }
            out[base + j] = vec4<{{T}}>(y);
        }
    }
}
