// quantized embedding lookup: out[i, :] = dequant(w)[ids[i], :] for a (N, K) table of raw GGUF
// blocks as u32 words (Q8_0, 2-byte aligned 34-byte blocks, or Q4_1; see quant/qgemv.wgsl).
// bindings: 0 w, 1 ids (i32), 2 out [len(ids), K] f32 (as vec4), 3 params.
// grid: 1 thread per 8 weights (units = len(ids) * K / 8). An id outside [0, N) writes zeros.
// Limits: a few rows per decode step; a trivial share of a token's time, kept simple.
struct Params { units: u32, N: u32, K: u32, nw: u32 }
@group(0) @binding(0) var<storage, read_write> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> ids: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256;
override Q8_0: bool = false;      // false: Q4_1

fn int8x4(q: u32) -> vec4<f32> {
    return vec4<f32>((vec4<i32>(bitcast<i32>(q)) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = (wid.y * nwg.x + wid.x) * WG + lid;
    if (e >= p.units) { return; }
    let per_row = p.K / 8u;
    let i = e / per_row;
    let u = e % per_row;
    let kb = u / 4u;
    let part = u % 4u;
    let id = ids[i];
    // Q4_1: part's nibbles are k 4part.. and 16+4part..; Q8_0: 8 int8 at k 8part..
    var k0 = kb * 32u + part * 4u;
    var k1 = k0 + 16u;
    if (Q8_0) {
        k0 = kb * 32u + part * 8u;
        k1 = k0 + 4u;
    }
    let o = i * (p.K / 4u);
    if (id < 0 || u32(id) >= p.N) {
        out[o + k0 / 4u] = vec4<f32>(0.0);
        out[o + k1 / 4u] = vec4<f32>(0.0);
        return;
    }
    let b = u32(id) * (p.K / 32u) + kb;
    if (Q8_0) {
        let start = b * 34u;
        let d = unpack2x16float(w[start / 4u] >> ((start & 2u) * 8u)).x;
        let s = start + 2u + part * 8u;
        let a = s / 4u;
        let sh = (s & 2u) * 8u;                       // 0 or 16; (v << 16) << (16 - sh) is 0 at 0
        let w0 = w[a];
        let w1 = w[a + 1u];
        let w2 = w[min(a + 2u, p.nw - 1u)];
        out[o + k0 / 4u] = d * int8x4((w0 >> sh) | ((w1 << 16u) << (16u - sh)));
        out[o + k1 / 4u] = d * int8x4((w1 >> sh) | ((w2 << 16u) << (16u - sh)));
    } else {
        let dm = unpack2x16float(w[b * 5u]);
        let q = vec4<u32>(w[b * 5u + 1u + part]);
        let lo = vec4<f32>((q >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(15u));
        let hi = vec4<f32>((q >> vec4<u32>(4u, 12u, 20u, 28u)) & vec4<u32>(15u));
        out[o + k0 / 4u] = dm.x * lo + dm.y;
        out[o + k1 / 4u] = dm.x * hi + dm.y;
    }
}
