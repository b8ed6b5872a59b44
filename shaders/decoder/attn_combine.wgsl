// cached_attention, last step of the split forms: merge the per-chunk partials of each
// (b, s, h) row: out = sum_c exp(m_c - M) acc_c / sum_c exp(m_c - M) l_c, M = max_c m_c.
// Only the chunks that hold keys are read: their count follows from pos at run time (the
// same chunk length formula as attn_decode / attn_prefill), so the work is proportional to
// pos + S. One thread per output vec4; the (m, l) reads are shared by the D4 threads of a
// row (cached). Limits: memory traffic of the partials, tiny next to K/V.
// bindings: 0 pos (i32, [1], or [2, B] per batch row when nb = B > 0),
// 1 part [B, Hkv, nsplit, S*G, D4 + 1] vec4, 2 out (B, S, H, D),
// 3 params. grid: 1 thread per output vec4, continued in y.
struct Params { n: u32, S: u32, H: u32, G: u32, Hkv: u32, D4: u32, T: u32, nsplit: u32,
                gran: u32, nb: u32 }
@group(0) @binding(0) var<storage, read_write> pos: array<i32>;
@group(0) @binding(1) var<storage, read_write> part: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256;

{{KV_CHUNKS}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let idx = (wid.y * nwg.x + wid.x) * WG + lid;
    if (idx >= p.n) { return; }
    let col = idx % p.D4;
    let h = (idx / p.D4) % p.H;
    let s = (idx / (p.D4 * p.H)) % p.S;
    let b = idx / (p.D4 * p.H * p.S);
    let p0 = u32(max(pos[select(0u, b, p.nb > 0u)], 0));
    let L = valid_keys(p0);
    let cl = chunk_len(L);
    let nc = (L + cl - 1u) / cl;
    let RI = p.S * p.G;
    let i = s * p.G + h % p.G;
    let hk = h / p.G;
    let stride = RI * (p.D4 + 1u);
    let base = ((b * p.Hkv + hk) * p.nsplit * RI + i) * (p.D4 + 1u);
    var mm = -3.4028234663852886e38;
    for (var c = 0u; c < nc; c++) { mm = max(mm, part[base + c * stride + p.D4].x); }
    var a = vec4<f32>(0.0);
    var lt = 0.0;
    for (var c = 0u; c < nc; c++) {
        let ml = part[base + c * stride + p.D4];
        let w = exp(ml.x - mm);
        a += w * part[base + c * stride + col];
        lt += w * ml.y;
    }
    out[idx] = select(a / lt, vec4<f32>(0.0), lt == 0.0);
}
