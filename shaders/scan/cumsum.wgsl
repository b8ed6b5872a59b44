// cumsum over rows of a contiguous [rows, n] input: one thread walks one row in order
// (sequential, so float sums match numpy's left-to-right order).
// bindings: 0 x, 1 out, 2 params. grid: 1 thread per row.
struct Params { rows: u32, n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<uniform> p: Params;

override WG: u32 = 256;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = (wid.y * nwg.x + wid.x) * WG + lid;
    if (row >= p.rows) { return; }
    var acc = {{ACC}}(0);
    for (var j = 0u; j < p.n; j++) {
        acc += {{ACC}}(x[row * p.n + j]);
        out[row * p.n + j] = {{T}}(acc);
    }
}
