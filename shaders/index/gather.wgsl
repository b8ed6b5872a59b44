// gather (np.take): out[o, j, i] = x[o, idx[j], i] with x viewed as [outer, d, inner].
// TAKE_ALONG: out[o, j, i] = x[o, idx[o, j, i], i] (np.take_along_axis; idx is [outer, nj, inner]).
// bindings: 0 x, 1 idx (i32), 2 out, 3 params. grid: 1 thread per output element.
// An index outside [0, d_all) (after adding d_all to negatives) writes 0.
// A table over the binding limit is bound in windows of rows [k_lo, k_lo + d) (x_off places the
// window, compiler/split.py): each call writes the ids inside its rows, and the call with
// k_lo == 0 the zeros of ids outside the table. idx_off and out_off place a range of ids.
struct Params { total: u32, nj: u32, inner: u32, d: u32, x_off: u32, k_lo: u32, d_all: u32,
                idx_off: u32, out_off: u32 }
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
    var k = select(idx[p.idx_off + j], idx[p.idx_off + e], TAKE_ALONG);
    if (k < 0) { k += i32(p.d_all); }
    if (k < 0 || u32(k) >= p.d_all) {
        if (p.k_lo == 0u) { out[p.out_off + e] = {{T}}(0); }
        return;
    }
    if (u32(k) < p.k_lo || u32(k) - p.k_lo >= p.d) { return; }   // another window's row
    out[p.out_off + e] = x[p.x_off + (o * p.d + u32(k) - p.k_lo) * p.inner + i];
}
