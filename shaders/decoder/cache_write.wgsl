// cache_write: cache[b, h, pos + s, :] = new[b, s, h, :], IN PLACE (the cache is the written
// binding; the op's value is the cache buffer). Rows pos + s outside [0, T) are skipped.
// A plain copy: bound by memory traffic, S * Hkv * D elements per call.
// bindings: 0 new (B, S, Hkv, D), 1 pos (i32, [1], or [2, B] = per batch row [positions;
// KV slots] when nb = B > 0), 2 cache (B or slots, Hkv, T, D), 3 params.
// grid: 1 thread per element of new, continued in y.
struct Params { n: u32, S: u32, Hkv: u32, D: u32, T: u32, nb: u32 }
@group(0) @binding(0) var<storage, read_write> new_rows: array<f32>;
@group(0) @binding(1) var<storage, read_write> pos: array<i32>;
@group(0) @binding(2) var<storage, read_write> cache: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let idx = (wid.y * nwg.x + wid.x) * WG + lid;
    if (idx >= p.n) { return; }
    let d = idx % p.D;
    let h = (idx / p.D) % p.Hkv;
    let s = (idx / (p.D * p.Hkv)) % p.S;
    let b = idx / (p.D * p.Hkv * p.S);
    let t = pos[select(0u, b, p.nb > 0u)] + i32(s);
    if (t < 0 || u32(t) >= p.T) { return; }
    let slot = select(b, u32(pos[p.nb + b]), p.nb > 0u);
    cache[((slot * p.Hkv + h) * p.T + u32(t)) * p.D + d] = new_rows[idx];
}
