// scatter_set: dst[idx[i]] = values[i] for i < m, in place; indices outside [0, n) are
// skipped. Duplicate indices: one of the values wins (unspecified which, as numpy's fancy
// assignment leaves to the last). bindings: 0 idx, 1 values, 2 dst, 3 params.
// grid: 1 thread per index.
struct Params { m: u32, n: u32 }
@group(0) @binding(0) var<storage, read_write> idx: array<i32>;
@group(0) @binding(1) var<storage, read_write> values: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if (i >= p.m) { return; }
    let j = idx[i];
    if (j >= 0 && u32(j) < p.n) { dst[u32(j)] = values[i]; }
}
