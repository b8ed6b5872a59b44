// softmax / log_softmax of long rows, pass 1 of 2 (reduce/softmax_finish.wgsl is pass 2): for
// few rows of many elements (e.g. 32 rows of a 49152-token vocabulary), where one workgroup
// per row leaves most of a GPU idle. Each workgroup takes a chunk of `chunk` elements of one
// row and writes its (max, sum of exp(x * scale - max)) to parts[row * nparts + part].
// bindings: 0 x [rows, n], 1 parts (vec2 [rows, nparts]), 2 params.
// grid: (nparts, rows, 1), nparts = ceil(n / chunk).
// Limits: one read of x here (an online max and rescaled sum, as reduce/softmax) and one in
// pass 2 (plus the write): 3 passes over the row's bytes against 2 for an ideal single pass,
// but rows x nparts workgroups instead of rows. (A first form read x twice here, a max pass
// then a sum pass: H200 GPU time of softmax 32x49152 29.2 -> 28.8 us with one read, so this
// form is bound by its two dependent dispatches of small workgroups, not by reads of x.)
struct Params { rows: u32, n: u32, chunk: u32, nparts: u32, scale: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> parts: array<vec2<f32>>;
@group(0) @binding(2) var<uniform> p: Params;

const WG: u32 = 256u;
{{ROW_REDUCE}}
{{IEEE}}
{{ONLINE_SOFTMAX}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let part = wid.x;
    let row = wid.y;
    let j0 = part * p.chunk;
    let j1 = min(j0 + p.chunk, p.n);
    let base = row * p.n;
    var ms = vec2<f32>(-3.4028234663852886e38, 0.0);
    for (var j = j0 + lid; j < j1; j += WG) {
        ms = online_add(ms, f32(x[base + j]) * p.scale, 1.0);
    }
    let m = reduce_max(lid, ms.x);
    let s = reduce_sum(lid, ms.y * exp_(ms.x - m));
    if (lid == 0u) { parts[row * p.nparts + part] = vec2<f32>(m, s); }
}
