// Fused attention: out[b,h,i,:] = softmax(q[b,h,i,:] . k[b,h,:,:]^T * scale + mask) @ v[b,h].
// One workgroup per (b, h, query row); keys are walked in tiles of KT with an online softmax
// (flash style), so any key length works in fixed workgroup memory. Head dim D <= 256.
// q/k/v/out are read through (batch, head, row) strides so [B,S,H,D] layouts need no copy.
// bindings: 0 q, 1 k, 2 v, 3 mask [B, Lk] i32 (0 = masked; a dummy when HAS_MASK is false),
// 4 out, 5 params. grid: (Lq, H, B).
{{ATTENTION_IO}}
const WG: u32 = 256u;
const KT: u32 = 256u;
var<workgroup> qs: array<f32, 256>;
var<workgroup> ps: array<f32, 256>;     // scores, then probabilities, of the key tile
var<workgroup> red: array<f32, 256>;

fn reduce(lid: u32, x: f32, is_max: bool) -> f32 {
    red[lid] = x;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            red[lid] = select(red[lid] + red[lid + s], max(red[lid], red[lid + s]), is_max);
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = wid.x;
    let h = wid.y;
    let b = wid.z;
    let scale = p.scale;
    let qb = p.q_o + b * p.q_b + h * p.q_h + i * p.q_i;
    let kb = p.k_o + b * p.k_b + h * p.k_h;
    let vb = p.v_o + b * p.v_b + h * p.v_h;
    if (lid < p.D) { qs[lid] = f32(q[qb + lid]); }
    workgroupBarrier();
    let d = lid % p.D;           // this thread's output column
    let chunk = lid / p.D;       // and its share of each key tile
    let chunks = WG / p.D;
    var m = -3.4028234663852886e38;
    var l = 0.0;
    var acc = 0.0;
    // causal: query i sees keys up to i + (Lk - Lq)
    let kv_end = key_end(i);
    for (var t0 = 0u; t0 < kv_end; t0 += KT) {
        let j = t0 + lid;
        var s = -3.4028234663852886e38;
        if (j < kv_end && (!HAS_MASK || mask[b * p.Lk + j] != 0)) {
            var dot = 0.0;
            for (var e = 0u; e < p.D; e++) { dot += qs[e] * f32(k_at(kb + j * p.k_i + e)); }
            s = dot * scale;
        }
        let m_new = max(m, reduce(lid, s, true));
        var pj = 0.0;
        if (s > -3.4028234663852886e38) { pj = exp(s - m_new); }
        ps[lid] = pj;
        let alpha = exp(m - m_new);
        l = l * alpha + reduce(lid, pj, false);
        acc *= alpha;
        let n = min(KT, kv_end - t0);
        if (chunk < chunks) {
            for (var jj = chunk; jj < n; jj += chunks) {
                acc += ps[jj] * f32(v_at(vb + (t0 + jj) * p.v_i + d));
            }
        }
        m = m_new;
        workgroupBarrier();
    }
    red[lid] = select(0.0, acc, chunk < chunks);
    workgroupBarrier();
    if (lid < p.D) {
        var total = 0.0;
        for (var c = 0u; c < chunks; c++) { total += red[c * p.D + lid]; }
        let ob = b * p.o_b + h * p.o_h + i * p.o_i;
        out[ob + lid] = {{T}}(select(total / l, 0.0, l == 0.0));
    }
}
