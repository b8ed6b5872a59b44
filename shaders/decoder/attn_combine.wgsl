// cached_attention, last step of the split forms: merge the per-chunk partials of each
// (b, s, h) row: out = sum_c exp(m_c - M) acc_c / sum_c exp(m_c - M) l_c, M = max_c m_c.
// Only the chunks that hold keys are read: their count follows from pos at run time (the
// same chunk length formula as attn_decode / attn_prefill), so the work is proportional to
// pos + S. One thread per output vec4; the (m, l) reads are shared by the D4 threads of a
// row (cached). Limits: memory traffic of the partials, tiny next to K/V.
// QOUT (the result read only by an int8 decode GEMV, compiler/lower_int8_decode.py): also
// written as that GEMV's int8 x, as quant/qx8.wgsl rounds it (32 values = 8 neighbouring
// threads share their maximum through workgroup memory; H * D % 32 == 0), saving qx8's
// dispatch.
// bindings: 0 pos (i32, [1], or [2, B] per batch row when nb = B > 0),
// 1 part [B, Hkv, nsplit, S*G, D4 + 1] vec4, 2 q8 (n) u32 and 3 s8 (n / 4) vec2<f32> (QOUT;
// dummies otherwise), 4 out (B, S, H, D), 5 params. grid: 1 thread per output vec4,
// continued in y.
struct Params { n: u32, S: u32, H: u32, G: u32, Hkv: u32, D4: u32, T: u32, nsplit: u32,
                gran: u32, nb: u32 }
@group(0) @binding(0) var<storage, read_write> pos: array<i32>;
@group(0) @binding(1) var<storage, read_write> part: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> q8: array<u32>;
@group(0) @binding(3) var<storage, read_write> s8: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(5) var<uniform> p: Params;

override WG: u32 = 256;
override QOUT: bool = false;
var<workgroup> sh: array<vec4<f32>, WG>;        // QOUT: the workgroup's results

{{KV_CHUNKS}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let live = (wid.y * nwg.x + wid.x) * WG + lid < p.n;
    let idx = min((wid.y * nwg.x + wid.x) * WG + lid, p.n - 1u);   // (dead threads: barriers)
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
    let v = select(a / lt, vec4<f32>(0.0), lt == 0.0);
    if (live) { out[idx] = v; }
    if (QOUT) {                                     // (uniform: an override)
        sh[lid] = v;
        workgroupBarrier();
        let f = lid & ~7u;                          // the block's first thread
        var m = 0.0;
        for (var e = 0u; e < 8u; e++) {
            let w = abs(sh[f + e]);
            m = max(m, max(max(w.x, w.y), max(w.z, w.w)));
        }
        let inv = select(127.0 / m, 0.0, m == 0.0);
        let iv = vec4<i32>(round(v * inv));
        if (live) {
            q8[idx] = (u32(iv.x) & 255u) | ((u32(iv.y) & 255u) << 8u) |
                      ((u32(iv.z) & 255u) << 16u) | (u32(iv.w) << 24u);
            if (lid % 4u == 0u) {                   // the first of a half's 4 threads: its sum
                var t = vec4<f32>(0.0);
                for (var e = 0u; e < 4u; e++) { t += round(sh[lid + e] * inv); }
                let d = m / 127.0;
                s8[idx / 4u] = vec2<f32>(d, d * (t.x + t.y + t.z + t.w));
            }
        }
    }
}
