// Batched transpose of 4-byte elements through workgroup memory (bits copied as u32):
// out[o_off + z0 ob0 + z1 ob1 + r C + c] = x[x_off + z0 sb0 + z1 sb1 + r + c sc]
// for batch z = z0 nb1 + z1 (grid z), out rows r < R, out columns c < C. The callers pass
// views whose out rows walk x contiguously (stride 1) and whose out columns do not (sc > 1): a
// thread per element then reads or writes with a stride (attention's K transposed, MiniLM's
// heads: 21.6 us on an H200 for 12.6 MB, a thread per element), here both sides are coalesced.
// bindings: 0 x, 1 out, 2 params. grid: (ceil(C / 32), ceil(R / 32), batches); 32x8 threads
// move a 32x32 tile, 4 elements a thread each way; the tile is padded to 33 columns so the
// transposed reads hit 32 banks.
struct Params { R: u32, C: u32, nb1: u32, sc: u32, sb0: u32, sb1: u32, x_off: u32,
                ob0: u32, ob1: u32, o_off: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> tile: array<u32, 1056>;   // 32 x 33

@compute @workgroup_size(32, 8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let c0 = wid.x * 32u;
    let r0 = wid.y * 32u;
    let z0 = wid.z / p.nb1;
    let z1 = wid.z % p.nb1;
    let src = p.x_off + z0 * p.sb0 + z1 * p.sb1;
    // reads: lid.x walks the out rows, contiguous in x
    for (var i = 0u; i < 32u; i += 8u) {
        let r = r0 + lid.x;
        let c = c0 + lid.y + i;
        if (r < p.R && c < p.C) { tile[(lid.y + i) * 33u + lid.x] = x[src + r + c * p.sc]; }
    }
    workgroupBarrier();
    // writes: lid.x walks the out columns, contiguous in out
    let dst = p.o_off + z0 * p.ob0 + z1 * p.ob1;
    for (var i = 0u; i < 32u; i += 8u) {
        let r = r0 + lid.y + i;
        let c = c0 + lid.x;
        if (r < p.R && c < p.C) { out[dst + r * p.C + c] = tile[lid.x * 33u + lid.y + i]; }
    }
}
