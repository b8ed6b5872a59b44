// quantized embedding lookup: out[i, :] = dequant(w)[ids[i], :] for an (N, K) table of raw GGUF
// blocks as u32 words, in any format of common/qformats.wgsl (FMT, QK, QBYTES; K % QK == 0).
// bindings: 0 w, 1 ids (i32), 2 out [len(ids), K] f32 (as vec4), 3 params.
// grid: 1 thread per 8 weights (units = len(ids) * K / 8). An id outside [0, N) writes zeros.
// Limits: a few rows per decode step; a trivial share of a token's time, kept simple (deq8 for
// every format, Q4_1 and Q8_0 included).
struct Params { units: u32, N: u32, K: u32, nw: u32 }
@group(0) @binding(0) var<storage, read_write> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> ids: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256;

fn wword(i: u32, second: bool) -> u32 { return w[i]; }
{{QFORMATS}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = (wid.y * nwg.x + wid.x) * WG + lid;
    if (e >= p.units) { return; }
    let per_row = p.K / 8u;
    let i = e / per_row;
    let u = e % per_row;                              // weights 8u..8u+7 of the row
    let o = i * (p.K / 4u) + 2u * u;
    let id = ids[i];
    if (id < 0 || u32(id) >= p.N) {
        out[o] = vec4<f32>(0.0);
        out[o + 1u] = vec4<f32>(0.0);
        return;
    }
    let v = deq8(u32(id) * (p.K / QK) + u / (QK / 8u), u % (QK / 8u), false);
    out[o] = v[0];
    out[o + 1u] = v[1];
}
