// GGUF block formats decoded in registers: deq8(b, j, second) = weights 8j..8j+7 of block b
// (of the second weight of a fused kernel if `second`) in [0] (8j..8j+3) and [1], f32, for
// every row of webrlx/quant.py's FORMATS table (layouts there). The lowering sets FMT (the
// row's GGML type id), QK (weights per block) and QBYTES (bytes per block) from that table,
// and OWN where the kernels keep their own Q4_1 / Q8_0 paths (common/qblocks.wgsl,
// quant/qmatmul_tiled.wgsl). The including shader declares `wword(i, second)` (word i of the
// blocks) and `p.nw` (their word count).
// Shifts are by constants or by one scalar: CPU adapters (lavapipe, SwiftShader) run lanes as
// SIMD and scalarize a vec4 shifted by per-component amounts.
{{QFORMAT_DECLS}}

// byte o of the blocks; the 4 bytes from o (o even; o % 4 == 0 where QBYTES % 4 == 0: every
// caller's offsets are then 4-aligned); the f16 at o (o even)
fn qbyte(o: u32, s: bool) -> u32 {
    return (wword(o >> 2u, s) >> ((o & 3u) * 8u)) & 255u;
}
fn qword(o: u32, s: bool) -> u32 {
    let a = o >> 2u;
    if (QBYTES % 4u == 0u) { return wword(a, s); }    // blocks of 4-aligned fields: o % 4 == 0
    let sh = (o & 2u) * 8u;                           // 0 or 16; (v << 16) << (16 - sh) is 0 at 0
    return (wword(a, s) >> sh) | ((wword(min(a + 1u, p.nw - 1u), s) << 16u) << (16u - sh));
}
fn qhalf(o: u32, s: bool) -> f32 {
    return unpack2x16float(wword(o >> 2u, s) >> ((o & 2u) * 8u)).x;
}

// the 4 bytes of v as unsigned / signed values
fn bytes4(v: u32) -> vec4<f32> {
    return vec4<f32>(f32(v & 255u), f32((v >> 8u) & 255u), f32((v >> 16u) & 255u),
                     f32(v >> 24u));
}
fn int8x4(q: u32) -> vec4<f32> {
    let v = bitcast<i32>(q);
    return vec4<f32>(f32((v << 24u) >> 24u), f32((v << 16u) >> 24u), f32((v << 8u) >> 24u),
                     f32(v >> 24u));
}
// the low (sh 0) or high (sh 4) nibbles of 4 bytes; bits 0..3 of v
fn nib4(v: u32, sh: u32) -> vec4<f32> {
    return bytes4((v >> sh) & 0x0F0F0F0Fu);
}
fn bit4(v: u32) -> vec4<f32> {
    return vec4<f32>(f32(v & 1u), f32((v >> 1u) & 1u), f32((v >> 2u) & 1u), f32((v >> 3u) & 1u));
}

fn pair(a: vec4<f32>, b: vec4<f32>) -> array<vec4<f32>, 2> {
    return array<vec4<f32>, 2>(a, b);
}

// Q4_0, Q4_1, Q5_0, Q5_1: weights 8j.. are the low (j < 2) or high nibbles of bytes
// 8 (j % 2).. of qs (at byte qs), with bits 8j.. of qh (right before qs) as the fifth (Q5_*)
fn deq8_legacy(o: u32, qs: u32, j: u32, s: bool) -> array<vec4<f32>, 2> {
    let q = qs + (j & 1u) * 8u;
    let sh = (j >> 1u) * 4u;
    var lo = nib4(qword(q, s), sh);
    var hi = nib4(qword(q + 4u, s), sh);
    if (FMT == 6u || FMT == 7u) {
        let h = qword(qs - 4u, s) >> (8u * j);
        lo += 16.0 * bit4(h);
        hi += 16.0 * bit4(h >> 4u);
    }
    if (FMT == 3u || FMT == 7u) {                     // d * q + m
        let dm = unpack2x16float(wword(o >> 2u, s));
        return pair(dm.x * lo + dm.y, dm.x * hi + dm.y);
    }
    let d = qhalf(o, s);
    let zero = select(8.0, 16.0, FMT == 6u);
    return pair(d * (lo - zero), d * (hi - zero));
}

fn deq8_q8_0(o: u32, j: u32, s: bool) -> array<vec4<f32>, 2> {
    let d = qhalf(o, s);
    let q = o + 2u + 8u * j;
    return pair(d * int8x4(qword(q, s)), d * int8x4(qword(q + 4u, s)));
}

// Q2_K, Q3_K: weight 128 h + 32 jj + l is bits 2 jj of qs[32 h + l], in sub-block
// 8 h + 2 jj + l / 16
fn deq8_q23_k(o: u32, j: u32, s: bool) -> array<vec4<f32>, 2> {
    let h = j >> 4u;
    let jj = (j >> 2u) & 3u;
    let l = (j & 3u) * 8u;                            // 0..24: l / 16 is the sub-block's half
    let sub = 8u * h + 2u * jj + (l >> 4u);
    let qo = o + select(16u, 32u, FMT == 11u) + 32u * h + l;
    var lo = bytes4((qword(qo, s) >> (2u * jj)) & 0x03030303u);
    var hi = bytes4((qword(qo + 4u, s) >> (2u * jj)) & 0x03030303u);
    if (FMT == 10u) {                                 // Q2_K: 4-bit scale and min
        let dm = unpack2x16float(wword((o + 80u) >> 2u, s));
        let sc = qbyte(o + sub, s);
        let dl = dm.x * f32(sc & 15u);
        let ml = dm.y * f32(sc >> 4u);
        return pair(dl * lo - ml, dl * hi - ml);
    }
    // Q3_K: minus 4 where the hmask bit is clear; 6-bit scales minus 32
    let bit = 4u * h + jj;
    lo -= 4.0 * (1.0 - bytes4((qword(o + l, s) >> bit) & 0x01010101u));
    hi -= 4.0 * (1.0 - bytes4((qword(o + l + 4u, s) >> bit) & 0x01010101u));
    let low4 = (qbyte(o + 96u + (sub & 7u), s) >> (4u * (sub >> 3u))) & 15u;
    let high2 = (qbyte(o + 104u + (sub & 3u), s) >> (2u * (sub >> 2u))) & 3u;
    let dl = qhalf(o + 108u, s) * f32(i32(low4 | (high2 << 4u)) - 32);
    return pair(dl * lo, dl * hi);
}

// Q4_K, Q5_K: sub-block `sub` (of 32) is the low (even) or high nibbles of qs[32 (sub / 2)..],
// its 6-bit scale and min packed in 12 bytes at o + 4
fn deq8_q45_k(o: u32, j: u32, s: bool) -> array<vec4<f32>, 2> {
    let sub = j >> 2u;
    let l = (j & 3u) * 8u;
    let a = o + 4u + (sub & 3u);                      // scales[sub % 4]
    var sc = qbyte(a, s);
    var mn = qbyte(a + 4u, s);
    if (sub >= 4u) {
        let hi = qbyte(a + 8u, s);
        sc = (hi & 15u) | ((sc >> 6u) << 4u);
        mn = (hi >> 4u) | ((mn >> 6u) << 4u);
    }
    let qo = o + select(16u, 48u, FMT == 13u) + 32u * (sub >> 1u) + l;
    let sh = (sub & 1u) * 4u;
    var lo = nib4(qword(qo, s), sh);
    var hi = nib4(qword(qo + 4u, s), sh);
    if (FMT == 13u) {                                 // Q5_K: bit sub of qh[l] is the fifth
        lo += 16.0 * bytes4((qword(o + 16u + l, s) >> sub) & 0x01010101u);
        hi += 16.0 * bytes4((qword(o + 20u + l, s) >> sub) & 0x01010101u);
    }
    let dm = unpack2x16float(wword(o >> 2u, s));
    let d = dm.x * f32(sc & 63u);
    let m = dm.y * f32(mn & 63u);
    return pair(d * lo - m, d * hi - m);
}

// Q6_K: weight 128 h + 32 t + l: nibble t / 2 of ql[64 h + 32 (t % 2) + l], bits 2 t of
// qh[32 h + l] as bits 4..5, minus 32; int8 scale of sub-block 8 h + 2 t + l / 16
fn deq8_q6_k(o: u32, j: u32, s: bool) -> array<vec4<f32>, 2> {
    let h = j >> 4u;
    let t = (j >> 2u) & 3u;
    let l = (j & 3u) * 8u;
    let qo = o + 64u * h + 32u * (t & 1u) + l;
    let ho = o + 128u + 32u * h + l;
    let sh = (t >> 1u) * 4u;
    let lo = nib4(qword(qo, s), sh) + 16.0 * bytes4((qword(ho, s) >> (2u * t)) & 0x03030303u);
    let hi = nib4(qword(qo + 4u, s), sh) +
             16.0 * bytes4((qword(ho + 4u, s) >> (2u * t)) & 0x03030303u);
    let sc = (bitcast<i32>(qbyte(o + 192u + 8u * h + 2u * t + (l >> 4u), s)) << 24u) >> 24u;
    let d = qhalf(o + 208u, s) * f32(sc);
    return pair(d * (lo - 32.0), d * (hi - 32.0));
}

// IQ4_NL, IQ4_XS: nibbles index ggml's kvalues_iq4nl (16 int8, packed little-endian)
const IQ4_VALUES = vec4<u32>(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);
fn iq4(q: u32) -> f32 {
    let t = IQ4_VALUES;
    return f32(bitcast<i32>(t[q >> 2u] << (24u - 8u * (q & 3u))) >> 24u);
}
fn iq4x4(v: u32, sh: u32) -> vec4<f32> {
    let q = (v >> sh) & 0x0F0F0F0Fu;
    return vec4<f32>(iq4(q & 15u), iq4((q >> 8u) & 15u), iq4((q >> 16u) & 15u), iq4(q >> 24u));
}
// IQ4_NL: qs as Q4_0's at o + 2; IQ4_XS: sub-block sub's 16 bytes at o + 8 + 16 sub (weights
// 8j.. are the low nibbles of its bytes 8 (j % 2).. for j % 4 < 2, else the high ones)
fn deq8_iq4(o: u32, j: u32, s: bool) -> array<vec4<f32>, 2> {
    var d = qhalf(o, s);
    var q = o + 2u + (j & 1u) * 8u;
    var sh = (j >> 1u) * 4u;
    if (FMT == 23u) {
        let sub = j >> 2u;
        let dh = wword(o >> 2u, s);
        let sc = ((wword((o >> 2u) + 1u, s) >> (4u * sub)) & 15u) |
                 (((dh >> (16u + 2u * sub)) & 3u) << 4u);
        d = unpack2x16float(dh).x * f32(i32(sc) - 32);
        q = o + 8u + 16u * sub + (j & 1u) * 8u;
        sh = ((j >> 1u) & 1u) * 4u;
    }
    return pair(d * iq4x4(qword(q, s), sh), d * iq4x4(qword(q + 4u, s), sh));
}

// F16, BF16: blocks of 32 floats as stored, 2 a word (the first in the low half); a bf16 is
// the high half of an f32
fn bf16x2(v: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(v << 16u), bitcast<f32>(v & 0xFFFF0000u));
}
fn deq8_float(o: u32, j: u32, s: bool) -> array<vec4<f32>, 2> {
    let a = (o >> 2u) + 4u * j;
    let w = vec4<u32>(wword(a, s), wword(a + 1u, s), wword(a + 2u, s), wword(a + 3u, s));
    if (FMT == 30u) {
        return pair(vec4<f32>(bf16x2(w.x), bf16x2(w.y)), vec4<f32>(bf16x2(w.z), bf16x2(w.w)));
    }
    return pair(vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)),
                vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)));
}

// Q4_K and Q6_K for the GEMVs (common/qblocks.wgsl), a unit a word of 4-bit quants: unit w
// (0..31) of a block is word w of qs (Q4_K) / ql (Q6_K), 8 weights at k0..k0+3 (its low
// nibbles) and k1..k1+3 (its high ones), kunit_k(w). deq8's 8 consecutive weights read each
// nibble word twice (low nibbles for one unit, high for another) and the scales byte by byte:
// for Q4_K 5 to 6 loads a unit, 2-byte-aligned Q6_K ~10 (each qword two); here 5 (Q4_K: d,
// three scale words a warp shares, one quant word) and 7 (Q6_K), both halves' scales applied.
fn kunit_k(w: u32) -> vec2<u32> {
    if (FMT == 12u) {             // qs chunk w / 8: sub-blocks 2 (w / 8) (low), + 1 (high)
        let k0 = (w >> 3u) * 64u + (w & 7u) * 4u;
        return vec2<u32>(k0, k0 + 32u);
    }
    // Q6_K: ql byte 64 h + 32 t + l holds weight 128 h + 32 t + l (low), t + 2 (high)
    let k0 = (w >> 4u) * 128u + ((w >> 3u) & 1u) * 32u + (w & 7u) * 4u;
    return vec2<u32>(k0, k0 + 64u);
}
fn int8_at(v: u32) -> f32 {
    return f32((bitcast<i32>(v) << 24u) >> 24u);
}
// Q4_K: (d * scale, dmin * min) of sub-block 2c, then of 2c + 1, of the block at word a: the
// 6-bit scales and mins as 2 bytes each, from scales[0..3] (lo), [4..7] (mo), [8..11] (hi)
// shifted to bytes 2 (c % 2)..
fn q4k_scales(a: u32, c: u32, s: bool) -> vec4<f32> {
    return q4k_scales_of(vec4<u32>(wword(a, s), wword(a + 1u, s), wword(a + 2u, s),
                                   wword(a + 3u, s)), c);
}
// the same from the block's first 4 words in hand (d / dmin, then the 3 scale words)
fn q4k_scales_of(head: vec4<u32>, c: u32) -> vec4<f32> {
    let e = (c & 1u) * 16u;
    let lo = head.y >> e;
    let mo = head.z >> e;
    let hi = head.w >> e;
    let upper = c >= 2u;
    let sc = select(lo & 0x3F3Fu, (hi & 0x0F0Fu) | ((lo >> 2u) & 0x3030u), upper);
    let mn = select(mo & 0x3F3Fu, ((hi >> 4u) & 0x0F0Fu) | ((mo >> 2u) & 0x3030u), upper);
    let dm = unpack2x16float(head.x);
    return vec4<f32>(dm.x * f32(sc & 255u), dm.y * f32(mn & 255u), dm.x * f32((sc >> 8u) & 255u),
                     dm.y * f32((mn >> 8u) & 255u));
}
fn kunit(b: u32, w: u32, s: bool) -> array<vec4<f32>, 2> {
    let o = b * QBYTES;
    if (FMT == 12u) {                 // sub-blocks 2c, 2c + 1 (c = w / 8)
        let a = o >> 2u;
        let v = q4k_scales(a, w >> 3u, s);
        let q = wword(a + 4u + w, s);
        return pair(v.x * nib4(q, 0u) - v.y, v.z * nib4(q, 4u) - v.w);
    }
    // Q6_K: bits 2 t (low) and 2 t + 4 (high) of qh[32 h + l..] are the quants' bits 4..5
    let h = w >> 4u;
    let t = (w >> 3u) & 1u;
    let l = (w & 7u) * 4u;
    let ql = qword(o + 4u * w, s);
    let qh = qword(o + 128u + 32u * h + l, s) >> (2u * t);
    let lo = nib4(ql, 0u) + 16.0 * bytes4(qh & 0x03030303u);
    let hi = nib4(ql, 4u) + 16.0 * bytes4((qh >> 4u) & 0x03030303u);
    let sa = o + 192u + 8u * h + 2u * t + (l >> 4u);   // the low half's int8 scale; + 4: high
    let d = qhalf(o + 208u, s);
    return pair(d * int8_at(qbyte(sa, s)) * (lo - 32.0),
                d * int8_at(qbyte(sa + 4u, s)) * (hi - 32.0));
}

// weights 8j..8j+7 of block b, in FMT
fn deq8(b: u32, j: u32, s: bool) -> array<vec4<f32>, 2> {
    let o = b * QBYTES;
    if (FMT == 8u) { return deq8_q8_0(o, j, s); }
    if (FMT == 10u || FMT == 11u) { return deq8_q23_k(o, j, s); }
    if (FMT == 12u || FMT == 13u) { return deq8_q45_k(o, j, s); }
    if (FMT == 14u) { return deq8_q6_k(o, j, s); }
    if (FMT == 20u || FMT == 23u) { return deq8_iq4(o, j, s); }
    if (FMT == 1u || FMT == 30u) { return deq8_float(o, j, s); }
    // Q4_0, Q4_1, Q5_0, Q5_1: qs after d (, m) (, qh)
    return deq8_legacy(o, o + select(2u, 4u, FMT == 3u || FMT == 7u) +
                       select(0u, 4u, FMT == 6u || FMT == 7u), j, s);
}
