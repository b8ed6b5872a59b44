// argtopk: indices of the k largest values in each row of a contiguous [rows, n] input,
// largest first; ties resolved towards the lower index (a stable descending sort). NaN counts
// as larger than every number (torch.topk).
// bindings: 0 x, 1 out (i32, [rows, k]), 2 params. grid: one workgroup per row.
// Pass t finds the best element strictly after pick t-1 in (value desc, index asc) order,
// so no scratch memory is needed: O(k * n / WG) per row.
struct Params { rows: u32, n: u32, k: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<uniform> p: Params;

const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;
var<workgroup> vals: array<f32, 256>;
var<workgroup> idxs: array<u32, 256>;
{{IEEE}}

// true when (va, ia) comes before (vb, ib) in the output order
fn before(va: f32, ia: u32, vb: f32, ib: u32) -> bool {
    if (ib == NONE) { return true; }
    if (ia == NONE) { return false; }
    let na = isnan_(va);
    if (na != isnan_(vb)) { return na; }
    return (!na && va > vb) || ((na || va == vb) && ia < ib);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.y * nwg.x + wid.x;
    if (row >= p.rows) { return; }
    let base = row * p.n;
    var pv = 0.0;
    var pi = NONE;
    for (var t = 0u; t < p.k; t++) {
        var bv = 0.0;
        var bi = NONE;
        for (var j = lid; j < p.n; j += WG) {
            let v = f32(x[base + j]);
            if ((pi == NONE || before(pv, pi, v, j)) && before(v, j, bv, bi)) { bv = v; bi = j; }
        }
        vals[lid] = bv;
        idxs[lid] = bi;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (lid < s && before(vals[lid + s], idxs[lid + s], vals[lid], idxs[lid])) {
                vals[lid] = vals[lid + s];
                idxs[lid] = idxs[lid + s];
            }
            workgroupBarrier();
        }
        pv = vals[0];
        pi = idxs[0];
        if (lid == 0u) { out[row * p.k + t] = i32(pi); }
        workgroupBarrier();
    }
}
