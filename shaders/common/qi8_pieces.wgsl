// The int8 decode GEMVs' dot pieces (quant/qgemv_i8.wgsl, quant/qgemv_i8_qkv.wgsl): a
// weight row's Q4_K or Q6_K pieces dotted with the MR int8 x rows (xq, xs: quant/qx8.wgsl's
// layout). The includer declares MR, xq, xs, p (K, nw), word(i, second) / quad(i, second)
// (the weight's u32 words / 16-byte quads) and fmt_id() (12 Q4_K, 14 Q6_K, 3 Q4_1, 8 Q8_0).

// the 4 bytes at 2-aligned byte a of w (or w2), from the aligned words around them
fn u32at(a: u32, second: bool) -> u32 {
    let i = a >> 2u;
    let sh = (a & 2u) * 8u;                    // 0 or 16; (v << 16) << (16 - sh) is 0 at 0
    let hi = min(i + 1u, p.nw - 1u);
    return (word(i, second) >> sh) | ((word(hi, second) << 16u) << (16u - sh));
}

// the 16 bytes at 2-aligned byte a of w (or w2) from the 5 aligned words around them (a run
// inside a Q6_K block: its fifth word is inside the block too). Tried first: 4 u32at, 8 loads.
fn run16(a: u32, second: bool) -> vec4<u32> {
    let i = a >> 2u;
    let sh = (a & 2u) * 8u;
    let v0 = word(i, second); let v1 = word(i + 1u, second); let v2 = word(i + 2u, second);
    let v3 = word(i + 3u, second); let v4 = word(i + 4u, second);
    let l = vec4<u32>(v0, v1, v2, v3) >> vec4<u32>(sh);
    return l | ((vec4<u32>(v1, v2, v3, v4) << vec4<u32>(16u)) << vec4<u32>(16u - sh));
}

// Q6_K's 6-bit quants (0..63, 4 a word) as signed int8s q - 32: bit 5 flipped, then copied
// into bits 6 and 7
fn signed6(v: u32) -> u32 {
    let b = v ^ 0x20202020u;
    let t = b & 0x20202020u;
    return b | (t << 1u) | (t << 2u);
}

// Q4_K piece c of block bk of weight row n (8 a block: sub-blocks 2 (c / 2) (low nibbles) and
// 2 (c / 2) + 1 (high), the 16 values of half c % 2 of each): its dot with every x row
fn q4k_piece(n: u32, nb: u32, bk: u32, c: u32, second: bool, acc: ptr<function, array<f32, MR>>) {
    let base = (n * nb + bk) * 9u;
    let head = quad(base, second);                 // d/dmin, then the 3 scale words
    let qv = quad(base + 1u + c, second);          // 16 bytes: 16 low + 16 high nibbles
    let sb = c / 2u;                               // the sub-block pair
    let e = (sb & 1u) * 16u;
    let lo = head.y >> e;
    let mo = head.z >> e;
    let hi = head.w >> e;
    let upper = sb >= 2u;
    let sc = select(lo & 0x3F3Fu, (hi & 0x0F0Fu) | ((lo >> 2u) & 0x3030u), upper);
    let mn = select(mo & 0x3F3Fu, ((hi >> 4u) & 0x0F0Fu) | ((mo >> 2u) & 0x3030u), upper);
    let dm = unpack2x16float(head.x);
    let da = dm.x * f32(sc & 255u);
    let db = dm.x * f32((sc >> 8u) & 255u);
    let ma = dm.y * f32(mn & 255u);
    let mb = dm.y * f32((mn >> 8u) & 255u);
    let la = qv & vec4<u32>(0x0F0F0F0Fu);
    let lb = (qv >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
    // x's 16-value units: the low sub-block's half, and 2 units (32 values) on
    let ua = bk * 16u + 4u * sb + (c & 1u);
    for (var r = 0u; r < MR; r++) {
        let at = r * (p.K / 16u) + ua;
        let xa = xq[at];
        let xb = xq[at + 2u];
        let ea = xs[at];
        let eb = xs[at + 2u];
        let sa = dot4I8Packed(la.x, xa.x) + dot4I8Packed(la.y, xa.y) +
                 dot4I8Packed(la.z, xa.z) + dot4I8Packed(la.w, xa.w);
        let sbb = dot4I8Packed(lb.x, xb.x) + dot4I8Packed(lb.y, xb.y) +
                  dot4I8Packed(lb.z, xb.z) + dot4I8Packed(lb.w, xb.w);
        (*acc)[r] += da * ea.x * f32(sa) + db * eb.x * f32(sbb) - ma * ea.y - mb * eb.y;
    }
}

// Q6_K piece c of block bk of weight row n (4 a block: half h = c / 2 of 128 values, l16 =
// c % 2: its values 16 l16 + 32 j + 0..15 for j = 0..3, one scale each): dot with every x row
fn q6k_piece(n: u32, nb: u32, bk: u32, c: u32, second: bool, acc: ptr<function, array<f32, MR>>) {
    let o = (n * nb + bk) * 210u;                  // the block's byte (2-aligned)
    let h = c / 2u;
    let l16 = c % 2u;
    let qa = o + 64u * h + 16u * l16;              // ql bytes of j = 0 (low) and 2 (high)
    let qb = qa + 32u;                             // of j = 1 and 3
    let qh = o + 128u + 32u * h + 16u * l16;       // their 2 high bits, j = 0..3
    let s0 = u32at(o + 192u + 8u * h, second);     // the half's 8 scales (int8)
    let s1 = u32at(o + 196u + 8u * h, second);
    let d = unpack2x16float(u32at(o + 208u, second)).x;   // (its low half: the f16 d)
    let sh = 8u * l16;                             // scale j: byte l16 + 2 j
    let e = vec4<f32>(f32((i32(s0 << (24u - sh))) >> 24u), f32((i32(s0 << (8u - sh))) >> 24u),
                      f32((i32(s1 << (24u - sh))) >> 24u), f32((i32(s1 << (8u - sh))) >> 24u)) * d;
    let ra = run16(qa, second);
    let rb = run16(qb, second);
    let rh = run16(qh, second);
    var w0: vec4<u32>; var w1: vec4<u32>; var w2v: vec4<u32>; var w3: vec4<u32>;
    for (var i = 0u; i < 4u; i++) {
        let a = ra[i];
        let b = rb[i];
        let hb = rh[i];
        w0[i] = signed6((a & 0x0F0F0F0Fu) | ((hb & 0x03030303u) << 4u));
        w1[i] = signed6((b & 0x0F0F0F0Fu) | ((hb & 0x0C0C0C0Cu) << 2u));
        w2v[i] = signed6(((a >> 4u) & 0x0F0F0F0Fu) | (hb & 0x30303030u));
        w3[i] = signed6(((b >> 4u) & 0x0F0F0F0Fu) | ((hb >> 2u) & 0x30303030u));
    }
    let u0 = bk * 16u + 8u * h + l16;              // x's unit of j = 0; + 2 j
    for (var r = 0u; r < MR; r++) {
        let at = r * (p.K / 16u) + u0;
        let x0 = xq[at]; let x1 = xq[at + 2u]; let x2 = xq[at + 4u]; let x3 = xq[at + 6u];
        let d0 = dot4I8Packed(w0.x, x0.x) + dot4I8Packed(w0.y, x0.y) +
                 dot4I8Packed(w0.z, x0.z) + dot4I8Packed(w0.w, x0.w);
        let d1 = dot4I8Packed(w1.x, x1.x) + dot4I8Packed(w1.y, x1.y) +
                 dot4I8Packed(w1.z, x1.z) + dot4I8Packed(w1.w, x1.w);
        let d2 = dot4I8Packed(w2v.x, x2.x) + dot4I8Packed(w2v.y, x2.y) +
                 dot4I8Packed(w2v.z, x2.z) + dot4I8Packed(w2v.w, x2.w);
        let d3 = dot4I8Packed(w3.x, x3.x) + dot4I8Packed(w3.y, x3.y) +
                 dot4I8Packed(w3.z, x3.z) + dot4I8Packed(w3.w, x3.w);
        let dx = vec4<f32>(xs[at].x, xs[at + 2u].x, xs[at + 4u].x, xs[at + 6u].x);
        (*acc)[r] += dot(e * dx, vec4<f32>(f32(d0), f32(d1), f32(d2), f32(d3)));
    }
}

// dot of 16 int8 pairs, 4 a word
fn dot16(w: vec4<u32>, x: vec4<u32>) -> i32 {
    return dot4I8Packed(w.x, x.x) + dot4I8Packed(w.y, x.y) + dot4I8Packed(w.z, x.z) +
           dot4I8Packed(w.w, x.w);
}

// Q4_1 block b of weight row n (20 bytes, word-aligned: f16 d and m, 16 bytes of nibbles:
// the low ones values 0..15, the high 16..31; w = d q + m): dot with every x row
fn q41_piece(n: u32, nb: u32, b: u32, second: bool, acc: ptr<function, array<f32, MR>>) {
    let o = (n * nb + b) * 5u;
    let dm = unpack2x16float(word(o, second));
    let qv = vec4<u32>(word(o + 1u, second), word(o + 2u, second), word(o + 3u, second),
                       word(o + 4u, second));
    let la = qv & vec4<u32>(0x0F0F0F0Fu);
    let lb = (qv >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
    for (var r = 0u; r < MR; r++) {
        let at = r * (p.K / 16u) + 2u * b;
        let ea = xs[at];
        let eb = xs[at + 1u];                      // (the same d: one block of x)
        let s = f32(dot16(la, xq[at]) + dot16(lb, xq[at + 1u]));
        (*acc)[r] += dm.x * ea.x * s + dm.y * (ea.y + eb.y);
    }
}

// Q8_0 block b of weight row n (34 bytes, 2-aligned: f16 d, 32 int8): dot with every x row
fn q80_piece(n: u32, nb: u32, b: u32, second: bool, acc: ptr<function, array<f32, MR>>) {
    let o = (n * nb + b) * 34u;
    let d = unpack2x16float(u32at(o, second)).x;
    let qa = run16(o + 2u, second);
    let qb = run16(o + 18u, second);
    for (var r = 0u; r < MR; r++) {
        let at = r * (p.K / 16u) + 2u * b;
        (*acc)[r] += d * xs[at].x * f32(dot16(qa, xq[at]) + dot16(qb, xq[at + 1u]));
    }
}

// this thread's partial dots of weight row n (w, or w2 when second) with every x row
// (fmt_id(): the includer's format, common/qformats.wgsl's FMT numbers)
fn row_dots(n: u32, j: u32, second: bool) -> array<f32, MR> {
    var acc: array<f32, MR>;
    for (var r = 0u; r < MR; r++) { acc[r] = 0.0; }
    let f = fmt_id();
    if (f == 12u) {
        let nb = p.K / 256u;
        for (var c = j; c < nb * 8u; c += TPR) { q4k_piece(n, nb, c / 8u, c % 8u, second, &acc); }
    } else if (f == 14u) {
        let nb = p.K / 256u;
        for (var c = j; c < nb * 4u; c += TPR) { q6k_piece(n, nb, c / 4u, c % 4u, second, &acc); }
    } else if (f == 3u) {
        let nb = p.K / 32u;
        for (var c = j; c < nb; c += TPR) { q41_piece(n, nb, c, second, &acc); }
    } else {
        let nb = p.K / 32u;
        for (var c = j; c < nb; c += TPR) { q80_piece(n, nb, c, second, &acc); }
    }
    return acc;
}
