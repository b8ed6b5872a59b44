// Fused attention for CPU adapters (SwiftShader, lavapipe): one invocation per query row, no
// workgroup memory, no barriers. out[b,h,i,:] = softmax(q[b,h,i,:] . k[b,h,:,:]^T * scale +
// mask) @ v[b,h], online softmax over the keys (acc rescaled only when the running max grows).
// Same bindings, params and strides as attention/attention_rows (the two are the lowering's
// "regs" and "rows" paths). grid: (ceil(Lq / WG), H, B).
// Why: the lanes of an invocation group are neighbouring query rows of one head, so every
// K / V load is one address for all lanes; attention_rows stages K/V tiles in workgroup
// memory between barriers, which on a CPU adapter is extra copies plus suspending the group
// (and Chromium's SwiftShader compiles ~75 ms per KB of it). Head dim <= 256 ({{D4}} vec4
// registers each for q and acc: CPU adapters keep them on the stack when they spill).
// Measured: see lower_attention.attention_path.
{{ATTENTION_IO}}
override WG: u32 = 64u;
override FULL: bool = false;                    // D % 4 == 0: unguarded loads
const D4: u32 = {{D4}}u;

// 4 values of a row from element e (zeros past D)
fn quad(x: u32, e: u32, which: u32) -> vec4<f32> {
    if (FULL) {
        switch which {
            case 0u: { return vec4<f32>(f32(q[x + e]), f32(q[x + e + 1u]), f32(q[x + e + 2u]),
                                        f32(q[x + e + 3u])); }
            case 1u: { return vec4<f32>(f32(k_at(x + e)), f32(k_at(x + e + 1u)),
                                        f32(k_at(x + e + 2u)), f32(k_at(x + e + 3u))); }
            default: { return vec4<f32>(f32(v_at(x + e)), f32(v_at(x + e + 1u)),
                                        f32(v_at(x + e + 2u)), f32(v_at(x + e + 3u))); }
        }
    }
    var t = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c++) {
        if (e + c < p.D) {
            switch which {
                case 0u: { t[c] = f32(q[x + e + c]); }
                case 1u: { t[c] = f32(k_at(x + e + c)); }
                default: { t[c] = f32(v_at(x + e + c)); }
            }
        }
    }
    return t;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let b = wid.z;
    let h = wid.y;
    let i = wid.x * WG + lid;
    if (i >= p.Lq) { return; }
    let qb = p.q_o + b * p.q_b + h * p.q_h + i * p.q_i;
    let kb = p.k_o + b * p.k_b + h * p.k_h;
    let vb = p.v_o + b * p.v_b + h * p.v_h;
    var qr: array<vec4<f32>, D4>;
    var acc: array<vec4<f32>, D4>;
    for (var c = 0u; c < D4; c++) {
        qr[c] = quad(qb, c * 4u, 0u) * p.scale;
        acc[c] = vec4<f32>(0.0);
    }
    var m = -3.4028234663852886e38;
    var l = 0.0;
    let end = key_end(i);
    for (var j = 0u; j < end; j++) {
        if (HAS_MASK && mask[b * p.Lk + j] == 0) { continue; }
        var dot = vec4<f32>(0.0);
        for (var c = 0u; c < D4; c++) { dot += qr[c] * quad(kb + j * p.k_i, c * 4u, 1u); }
        let sj = dot.x + dot.y + dot.z + dot.w;
        if (sj > m) {
            let corr = exp(m - sj);
            l *= corr;
            for (var c = 0u; c < D4; c++) { acc[c] *= corr; }
            m = sj;
        }
        let pj = exp(sj - m);
        l += pj;
        for (var c = 0u; c < D4; c++) { acc[c] += pj * quad(vb + j * p.v_i, c * 4u, 2u); }
    }
    let inv = select(1.0 / l, 0.0, l == 0.0);
    let ob = b * p.o_b + h * p.o_h + i * p.o_i;
    for (var c = 0u; c < D4; c++) {
        for (var e = 0u; e < 4u; e++) {
            if (c * 4u + e < p.D) { out[ob + c * 4u + e] = {{T}}(acc[c][e] * inv); }
        }
    }
}
