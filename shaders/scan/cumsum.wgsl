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
    let base = row * p.n;
    var acc = {{ACC}}(0);
    // 8 elements per iteration: llvmpipe (lavapipe) ends any loop nest after 65535 iterations
    // without a word, so rows of up to 524,280 elements scan right there (longer rows are
    // refused on llvmpipe by the lowering); the tail loop is a nest of its own
    var j = 0u;
    for (; j + 8u <= p.n; j += 8u) {
        acc += {{ACC}}(x[base + j + 0u]); out[base + j + 0u] = {{T}}(acc);
        acc += {{ACC}}(x[base + j + 1u]); out[base + j + 1u] = {{T}}(acc);
        acc += {{ACC}}(x[base + j + 2u]); out[base + j + 2u] = {{T}}(acc);
        acc += {{ACC}}(x[base + j + 3u]); out[base + j + 3u] = {{T}}(acc);
        acc += {{ACC}}(x[base + j + 4u]); out[base + j + 4u] = {{T}}(acc);
        acc += {{ACC}}(x[base + j + 5u]); out[base + j + 5u] = {{T}}(acc);
        acc += {{ACC}}(x[base + j + 6u]); out[base + j + 6u] = {{T}}(acc);
        acc += {{ACC}}(x[base + j + 7u]); out[base + j + 7u] = {{T}}(acc);
    }
    for (; j < p.n; j++) {
        acc += {{ACC}}(x[base + j]);
        out[base + j] = {{T}}(acc);
    }
}
