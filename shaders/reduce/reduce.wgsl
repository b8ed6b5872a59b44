// reduce: out[r] = OP(x[r, 0..n]) over rows of a contiguous [rows, n] input, f32/i32/u32 math.
// bindings: 0 x, 1 out, 2 params. grid: RPW rows per workgroup (WG / RPW threads a row;
// workgroups spread over x and y).
// OP: 0 sum, 1 max, 2 min, 3 prod, 4 argmax (first index of the maximum; out is i32).
// NaN as numpy: max/min of a row with a NaN are NaN, argmax is the first NaN's index; the
// max of an empty or all -inf row is -inf (LOWEST is -inf for floats).
// The result is multiplied by `scale` (1/n for mean) for float sums. x_off and out_off (elements)
// place a piece of a tensor bound through a window (compiler/split.py).
// Why RPW: with a workgroup per row, rows of 128 summed at 0.15x torch's speed on an H200
// (131072 rows: 232 us against 35; bench/probes/row_lengths_probe.py);
// lower_rows.rows_per_workgroup
// gives 8 rows of 32 threads up to 1024 elements.
struct Params { rows: u32, n: u32, x_off: u32, out_off: u32, scale: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{OUT}}>;
@group(0) @binding(2) var<uniform> p: Params;

override OP: u32 = 0u;
override RPW: u32 = 1u;
const WG: u32 = 256u;
var<workgroup> vals: array<{{ACC}}, 256>;
var<workgroup> idxs: array<u32, 256>;
{{IEEE}}
{{REDUCE_OPS}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let tpr = WG / RPW;                 // threads per row
    let t = lid % tpr;
    let row = (wid.y * nwg.x + wid.x) * RPW + lid / tpr;
    let live = row < p.rows;            // every thread stays for the barriers
    let base = p.x_off + row * p.n;
    var acc = identity();
    var best = 0xffffffffu;
    for (var j = t; live && j < p.n; j += tpr) {
        let v = {{ACC}}(x[base + j]);
        if (OP == 4u) {
            if (best == 0xffffffffu || beats(v, j, acc, best)) { acc = v; best = j; }
        } else {
            acc = combine(acc, v);
        }
    }
    vals[lid] = acc;
    idxs[lid] = best;
    workgroupBarrier();
    for (var s = tpr / 2u; s > 0u; s >>= 1u) {
        if (t < s) {
            if (OP == 4u) {
                let v = vals[lid + s];
                let k = idxs[lid + s];
                let take = k != 0xffffffffu && (idxs[lid] == 0xffffffffu
                                                || beats(v, k, vals[lid], idxs[lid]));
                if (take) { vals[lid] = v; idxs[lid] = k; }
            } else {
                vals[lid] = combine(vals[lid], vals[lid + s]);
            }
        }
        workgroupBarrier();
    }
    if (t == 0u && live) {
        if (OP == 4u) {
            out[p.out_off + row] = {{OUT}}(idxs[lid]);
        } else {
            out[p.out_off + row] = {{OUT}}({{SCALE}});
        }
    }
}
