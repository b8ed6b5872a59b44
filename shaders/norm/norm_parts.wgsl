// layer_norm / rms_norm of long rows, pass 1 of 2 (norm/norm_finish.wgsl is pass 2), for few
// rows of many elements, where one workgroup per row leaves most of a GPU idle (as
// reduce/softmax_parts.wgsl). Each workgroup takes `chunk` elements of one row of v = x (+ r)
// and writes parts[row * nparts + part] = (sum of v, sum of (v - chunk mean)^2); with RMS
// (sum of v, sum of v^2). The chunk statistics combine exactly (Chan et al.) in pass 2.
// bindings: 0 x, 1 r (a dummy when HAS_RES is false), 2 parts (vec2 [rows, nparts]), 3 params.
// grid: (nparts, rows, 1), nparts = ceil(n / chunk).
struct Params { rows: u32, n: u32, chunk: u32, nparts: u32, eps: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> r: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> parts: array<vec2<f32>>;
@group(0) @binding(3) var<uniform> p: Params;

override RMS: bool = false;
override HAS_RES: bool = false;
const WG: u32 = 256u;
{{ROW_REDUCE}}

fn value(i: u32) -> f32 {
    var v = f32(x[i]);
    if (HAS_RES) { v += f32(r[i]); }
    return v;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let part = wid.x;
    let row = wid.y;
    let j0 = part * p.chunk;
    let j1 = min(j0 + p.chunk, p.n);
    let base = row * p.n;
    var s = 0.0;
    for (var j = j0 + lid; j < j1; j += WG) { s += value(base + j); }
    s = reduce_sum(lid, s);
    let mean = select(s / f32(j1 - j0), 0.0, RMS);
    var q = 0.0;
    for (var j = j0 + lid; j < j1; j += WG) {
        let d = value(base + j) - mean;
        q += d * d;
    }
    q = reduce_sum(lid, q);
    if (lid == 0u) { parts[row * p.nparts + part] = vec2<f32>(s, q); }
}
