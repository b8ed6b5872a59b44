// scatter_add: out[idx[i], r] += values[i, r] for i < m, r < R (out already holds the target:
// the lowering copies it first); indices outside [0, n) are skipped. The gradient of gather
// (embedding rows). f32 only: WGSL has no float atomics, so each add is a compare-exchange
// loop on the value's bits (atomic<u32>). Duplicate indices meet in any order: the sums may
// differ in the last bits from run to run (as torch's index_add_ on CUDA).
// Limits: contention only where many ids repeat (a batch of one token); tried nothing else.
// bindings: 0 idx (i32 [m]), 1 values (f32 [m, R]), 2 out (f32 [n, R] as u32 bits), 3 params.
// grid: 1 thread per (i, r).
struct Params { m: u32, n: u32, R: u32 }
@group(0) @binding(0) var<storage, read_write> idx: array<i32>;
@group(0) @binding(1) var<storage, read_write> values: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<atomic<u32>>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = (wid.y * nwg.x + wid.x) * WG + lid;
    if (e >= p.m * p.R) { return; }
    let i = e / p.R;
    let r = e % p.R;
    let j = idx[i];
    if (j < 0 || u32(j) >= p.n) { return; }
    let v = values[e];
    let at = u32(j) * p.R + r;
    var old = atomicLoad(&out[at]);
    loop {
        let swapped = atomicCompareExchangeWeak(&out[at], old,
                                                bitcast<u32>(bitcast<f32>(old) + v));
        if (swapped.exchanged) { break; }
        old = swapped.old_value;
    }
}
