// The tiles of the quantized subgroup-matrix matmuls (quant/qmatmul_smat.wgsl and
// quant/qmatmul_smat_fused.wgsl): weight units dequantized straight to halves (load_b), f32
// pairs packed as halves, and the 8-half stores into the 16-row panels of the A and B tiles
// (put_a, put_b). The including shader declares As, Bs, BM, BN, SA, SB, PA, PB, p.N, p.K and
// what common/qblocks.wgsl needs (wword(i, second), load_unit).
fn halves(a: vec4<f32>, b: vec4<f32>) -> vec4<u32> {
    return vec4<u32>(pack2x16float(a.xy), pack2x16float(a.zw), pack2x16float(b.xy),
                     pack2x16float(b.zw));
}

// Q4_K / Q6_K units decoded straight to halves, without int or float conversions per weight
// (quarter-rate instructions on NVIDIA GPUs, two a weight on load_unit's f32 path then the
// packing): a 4-bit q shifted under the exponent of 1.0h is 1 + q / 16 exactly, a 6-bit one
// 1 + q / 64 (as quant/qgemv_fused.wgsl's magic floats, in f16); (f - 1) or (f - 1.5) is
// exact, so each weight is rounded to f16 once by the scale's multiply (and Q4_K's min add).
// h4: the low nibbles of v's 4 bytes; h6: v's 4 bytes of 6-bit quants; as two words of halves
fn h4(v: u32) -> vec2<u32> {
    return vec2<u32>(((v & 0xFu) << 6u) | ((v & 0xF00u) << 14u),
                     ((v >> 10u) & 0x3C0u) | ((v >> 2u) & 0x3C00000u)) | vec2<u32>(0x3C003C00u);
}
fn h6(v: u32) -> vec2<u32> {
    return vec2<u32>(((v & 0x3Fu) << 4u) | ((v & 0x3F00u) << 12u),
                     ((v >> 12u) & 0x3F0u) | ((v >> 4u) & 0x3F00000u)) | vec2<u32>(0x3C003C00u);
}
// (f - one) * s + o on both words' halves, as words
fn scaled(u: vec2<u32>, one: f16, s: f32, o: f32) -> vec2<u32> {
    let a = (bitcast<vec2<f16>>(u.x) - one) * f16(s) + f16(o);
    let b = (bitcast<vec2<f16>>(u.y) - one) * f16(s) + f16(o);
    return vec2<u32>(bitcast<u32>(a), bitcast<u32>(b));
}

// weight row n's unit u dequantized (of the second weight if `second`: a constant at each
// call), as halves (zeros past N): lo then hi (unit_k's order)
fn load_b(n: u32, u: u32, second: bool) -> vec4<u32> {
    let nn = min(n, p.N - 1u);
    let w = u % (QK / 8u);                            // (K-quants: the quant word of the block)
    let o = (nn * (p.K / QK) + u / (QK / 8u)) * QBYTES;
    var r: vec4<u32>;
    if (FMT == 12u) {                                 // Q4_K, as common/qformats.wgsl's kunit
        let a = o >> 2u;
        let v = q4k_scales(a, w >> 3u, second);
        let q = wword(a + 4u + w, second);
        r = vec4<u32>(scaled(h4(q), 1.0h, 16.0 * v.x, -v.y),
                      scaled(h4(q >> 4u), 1.0h, 16.0 * v.z, -v.w));
    } else if (FMT == 14u) {                          // Q6_K, as kunit: (q - 32) = 64 (f - 1.5)
        let h = w >> 4u;
        let t = (w >> 3u) & 1u;
        let l = (w & 7u) * 4u;
        let ql = qword(o + 4u * w, second);
        let qh = qword(o + 128u + 32u * h + l, second) >> (2u * t);
        let lo6 = (ql & 0x0F0F0F0Fu) | ((qh & 0x03030303u) << 4u);
        let hi6 = ((ql >> 4u) & 0x0F0F0F0Fu) | (((qh >> 4u) & 0x03030303u) << 4u);
        let sa = o + 192u + 8u * h + 2u * t + (l >> 4u);
        let d = qhalf(o + 208u, second);
        r = vec4<u32>(scaled(h6(lo6), 1.5h, 64.0 * d * int8_at(qbyte(sa, second)), 0.0),
                      scaled(h6(hi6), 1.5h, 64.0 * d * int8_at(qbyte(sa + 4u, second)), 0.0));
    } else {
        let q = load_unit(nn, u, second);
        let m = select(0.0, q.m, OWN && !Q8_0);
        r = halves(q.lo * q.d + m, q.hi * q.d + m);
    }
    return select(vec4<u32>(0u), r, n < p.N);
}

// 8 halves into a tile row (consecutive): row `row` of buffer `buf`, from k `k8`
// (As [m][k], Bs [n][k])
fn put_a(buf: u32, row: u32, k8: u32, v: vec4<u32>) {
    let h0 = bitcast<vec2<f16>>(v.x);
    let h1 = bitcast<vec2<f16>>(v.y);
    let h2 = bitcast<vec2<f16>>(v.z);
    let h3 = bitcast<vec2<f16>>(v.w);
    let t = &As[buf * (BM / 16u) + row / 16u];
    // one clamp here instead of Tint's eight (robustness clamps every index): `at` is a
    // multiple of 8 at most PA - 8, so the driver can see the 8 stores as one
    // 16-byte store (with eight clamped indices it cannot)
    let at = min(((row % 16u) * SA + k8) / 8u, PA / 8u - 1u) * 8u;
    (*t)[at] = h0.x; (*t)[at + 1u] = h0.y; (*t)[at + 2u] = h1.x; (*t)[at + 3u] = h1.y;
    (*t)[at + 4u] = h2.x; (*t)[at + 5u] = h2.y; (*t)[at + 6u] = h3.x; (*t)[at + 7u] = h3.y;
}

fn put_b(buf: u32, row: u32, k8: u32, v: vec4<u32>) {
    let h0 = bitcast<vec2<f16>>(v.x);
    let h1 = bitcast<vec2<f16>>(v.y);
    let h2 = bitcast<vec2<f16>>(v.z);
    let h3 = bitcast<vec2<f16>>(v.w);
    let t = &Bs[buf * (BN / 16u) + row / 16u];
    // one clamp here instead of Tint's eight (robustness clamps every index): `at` is a
    // multiple of 8 at most PB - 8, so the driver can see the 8 stores as one
    // 16-byte store (with eight clamped indices it cannot)
    let at = min(((row % 16u) * SB + k8) / 8u, PB / 8u - 1u) * 8u;
    (*t)[at] = h0.x; (*t)[at + 1u] = h0.y; (*t)[at + 2u] = h1.x; (*t)[at + 3u] = h1.y;
    (*t)[at + 4u] = h2.x; (*t)[at + 5u] = h2.y; (*t)[at + 6u] = h3.x; (*t)[at + 7u] = h3.y;
}

