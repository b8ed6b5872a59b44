// softmax / log_softmax over rows of a contiguous [rows, n] input (n % 4 == 0), each row held
// in registers: x is read once and out written once (reduce/softmax reads x twice, with a
// loop-carried online max). f32 math; no mask (attention's masked softmax stays there).
// bindings: 0 x (vec4), 1 out (vec4), 2 params. grid: RPW rows per workgroup, WG / RPW threads
// a row, VPT vec4 a thread (a template constant: n <= 4 * VPT * WG / RPW).
// Same results as reduce/softmax: the max ignores NaN (v > m), NaN and inf propagate through
// exp_ / log_ as there.
// Limits (H100, bench/submit_gap_probe.py): reduce/softmax took 85 us of GPU time at 4096x4096
// (1.5 TB/s): each thread's loop issued one scalar load, waited for it, then updated the
// online max — 16 dependent round trips per pass. Here a thread issues its VPT vec4 loads
// back to back (a constant-bound loop over a constant-size array: unrolled, in registers).
struct Params { rows: u32, n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<{{T}}>>;
@group(0) @binding(2) var<uniform> p: Params;

override LOG: bool = false;
const WG: u32 = 256u;
const VPT: u32 = {{VPT}}u;
{{ROW_REDUCE}}
{{IEEE}}

fn gt_max(m: f32, v: vec4<f32>) -> f32 {        // max of m and v's lanes; NaN lanes ignored
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
            v[i] = vec4<f32>(x[base + j]);
            m = gt_max(m, v[i]);
        }
    }
    m = reduce_max(lid, m);
    var s = 0.0;
    for (var i = 0u; i < VPT; i++) {
        if (i * tpr + t < n4) {
            let e = exp4(v[i] - m);
            s += (e.x + e.y) + (e.z + e.w);
        }
    }
    s = reduce_sum(lid, s);
    let inv = 1.0 / s;
    let ls = log_(s);
    for (var i = 0u; i < VPT; i++) {
        let j = i * tpr + t;
        if (j < n4) {
            let d = v[i] - m;
            out[base + j] = vec4<{{T}}>(select(exp4(d) * inv, d - ls, LOG));
        }
    }
}
