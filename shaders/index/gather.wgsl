// gather (np.take): out[o, j, i] = x[o, idx[j], i] with x viewed as [outer, d, inner].
// TAKE_ALONG: out[o, j, i] = x[o, idx[o, j, i], i] (np.take_along_axis; idx is [outer, nj, inner]).
// bindings: 0 x, 1 idx (i32), 2 out, 3 params. grid: 1 thread per output element.
// An index outside [0, d) (after adding d to negatives) writes 0.
struct Params { total: u32, nj: u32, inner: u32, d: u32, x_off: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> idx: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256;
override TAKE_ALONG: bool = false;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = (wid.y * nwg.x + wid.x) * WG + lid;
    if (e >= p.total) { return; }
    let i = e % p.inner;
    let j = (e / p.inner) % p.nj;
    let o = e / (p.inner * p.nj);
    var k = select(idx[j], idx[e], TAKE_ALONG);
    if (k < 0) { k += i32(p.d); }
    if (k < 0 || u32(k) >= p.d) {
        out[e] = {{T}}(0);
        return;
    }
    out[e] = x[p.x_off + (o * p.d + u32(k)) * p.inner + i];
}
