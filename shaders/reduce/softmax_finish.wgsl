// softmax / log_softmax of long rows, pass 2 of 2 (after reduce/softmax_parts.wgsl): each
// workgroup combines all of its row's chunk results (max M = max of the parts' maxima, sum
// S = sum of s_p * exp(m_p - M)) and writes its chunk: exp(x * scale - M) / S, or with LOG
// x * scale - M - log(S).
// bindings: 0 x [rows, n], 1 parts (vec2 [rows, nparts]), 2 out [rows, n], 3 params.
// grid: (nparts, rows, 1).
struct Params { rows: u32, n: u32, chunk: u32, nparts: u32, scale: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> parts: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(3) var<uniform> p: Params;

override LOG: bool = false;
const WG: u32 = 256u;
{{IEEE}}
{{ONLINE_SOFTMAX}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let part = wid.x;
    let row = wid.y;
    let pb = row * p.nparts;
    // every thread combines the row's few parts itself (nparts is small: lower_rows.split_chunk
    // keeps rows x nparts <= 512), in one read of them: a running max, the sum rescaled when
    // it grows (a part's max is never NaN; inf - inf makes the sum NaN, as numpy's row)
    var ms = vec2<f32>(-3.4028234663852886e38, 0.0);
    for (var i = 0u; i < p.nparts; i++) {
        let q = parts[pb + i];
        ms = online_add(ms, q.x, q.y);
    }
    let m = ms.x;
    let s = ms.y;
    let inv = 1.0 / s;
    let ls = log_(s);
    let j0 = part * p.chunk;
    let j1 = min(j0 + p.chunk, p.n);
    let base = row * p.n;
    for (var j = j0 + lid; j < j1; j += WG) {
        let v = f32(x[base + j]) * p.scale - m;
        out[base + j] = {{T}}(select(exp_(v) * inv, v - ls, LOG));
    }
}
