// The int8 decode GEMVs' dot pieces (quant/qgemv_i8.wgsl, quant/qgemv_i8_qkv.wgsl): RPT weight
// rows' Q4_K, Q6_K, Q4_1 or Q8_0 pieces (rows ns[0..RPT)) dotted with the MR int8 x rows (xq,
// xs: quant/qx8.wgsl's layout); each x row's piece is loaded once for all RPT weight rows, and
// the sums go to acc[r * RPT + q] (x row r, weight row q). The includer declares MR, RPT, xq,
// xs, p (K, nw), wword(i, second) / quad(i, second) (the weight's u32 words / 16-byte quads)
// and common/qformats.wgsl (FMT; its qword, qhalf, int8_at and q4k_scales_of are used here).

// dot of 16 int8 pairs, 4 a word
fn dot16(w: vec4<u32>, x: vec4<u32>) -> i32 {
    return dot4I8Packed(w.x, x.x) + dot4I8Packed(w.y, x.y) + dot4I8Packed(w.z, x.z) +
           dot4I8Packed(w.w, x.w);
}

// the 16 bytes at 2-aligned byte a of w (or w2) from the 5 aligned words around them (a run
// inside a Q6_K block: its fifth word is inside the block too). Tried first: 4 qword, 8 loads.
fn run16(a: u32, second: bool) -> vec4<u32> {
    let i = a >> 2u;
    let sh = (a & 2u) * 8u;
    let v0 = wword(i, second); let v1 = wword(i + 1u, second); let v2 = wword(i + 2u, second);
    let v3 = wword(i + 3u, second); let v4 = wword(i + 4u, second);
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

// Q4_K piece c of block bk of weight rows ns (8 a block: sub-blocks 2 (c / 2) (low nibbles)
// and 2 (c / 2) + 1 (high), the 16 values of half c % 2 of each): its dot with every x row
fn q4k_piece(ns: array<u32, RPT>, nb: u32, bk: u32, c: u32, second: bool,
             acc: ptr<function, array<f32, MR * RPT>>) {
    let sb = c / 2u;                               // the sub-block pair
    var la: array<vec4<u32>, RPT>;
    var lb: array<vec4<u32>, RPT>;
    var dm: array<vec4<f32>, RPT>;                 // (d/dmin, then the 3 scale words)
    for (var q = 0u; q < RPT; q++) {
        let base = (ns[q] * nb + bk) * 9u;
        let qv = quad(base + 1u + c, second);      // 16 bytes: 16 low + 16 high nibbles
        dm[q] = q4k_scales_of(quad(base, second), sb);
        la[q] = qv & vec4<u32>(0x0F0F0F0Fu);
        lb[q] = (qv >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
    }
    // x's 16-value units: the low sub-block's half, and 2 units (32 values) on
    let ua = bk * 16u + 4u * sb + (c & 1u);
    for (var r = 0u; r < MR; r++) {
        let at = r * (p.K / 16u) + ua;
        let xa = xq[at];
        let xb = xq[at + 2u];
        let ea = xs[at];
        let eb = xs[at + 2u];
        for (var q = 0u; q < RPT; q++) {
            let d = dm[q];
            (*acc)[r * RPT + q] += d.x * ea.x * f32(dot16(la[q], xa)) +
                                   d.z * eb.x * f32(dot16(lb[q], xb)) - d.y * ea.y - d.w * eb.y;
        }
    }
}

// Q6_K piece c of block bk of weight rows ns (4 a block: half h = c / 2 of 128 values, l16 =
// c % 2: its values 16 l16 + 32 j + 0..15 for j = 0..3, one scale each): dot with every x row
fn q6k_piece(ns: array<u32, RPT>, nb: u32, bk: u32, c: u32, second: bool,
             acc: ptr<function, array<f32, MR * RPT>>) {
    let h = c / 2u;
    let l16 = c % 2u;
    var wq: array<array<vec4<u32>, 4>, RPT>;       // the 4 runs of 16 signed quants
    var e: array<vec4<f32>, RPT>;                  // their scales
    for (var q = 0u; q < RPT; q++) {
        let o = (ns[q] * nb + bk) * 210u;          // the block's byte (2-aligned)
        let qa = o + 64u * h + 16u * l16;          // ql bytes of j = 0 (low) and 2 (high)
        let qb = qa + 32u;                         // of j = 1 and 3
        let qh = o + 128u + 32u * h + 16u * l16;   // their 2 high bits, j = 0..3
        let s0 = qword(o + 192u + 8u * h, second); // the half's 8 scales (int8)
        let s1 = qword(o + 196u + 8u * h, second);
        let sh = 8u * l16;                         // scale j: byte l16 + 2 j
        e[q] = vec4<f32>(int8_at(s0 >> sh), int8_at(s0 >> (sh + 16u)), int8_at(s1 >> sh),
                         int8_at(s1 >> (sh + 16u))) * qhalf(o + 208u, second);
        let ra = run16(qa, second);
        let rb = run16(qb, second);
        let rh = run16(qh, second);
        for (var i = 0u; i < 4u; i++) {
            let a = ra[i];
            let b = rb[i];
            let hb = rh[i];
            wq[q][0][i] = signed6((a & 0x0F0F0F0Fu) | ((hb & 0x03030303u) << 4u));
            wq[q][1][i] = signed6((b & 0x0F0F0F0Fu) | ((hb & 0x0C0C0C0Cu) << 2u));
            wq[q][2][i] = signed6(((a >> 4u) & 0x0F0F0F0Fu) | (hb & 0x30303030u));
            wq[q][3][i] = signed6(((b >> 4u) & 0x0F0F0F0Fu) | ((hb >> 2u) & 0x30303030u));
        }
    }
    let u0 = bk * 16u + 8u * h + l16;              // x's unit of j = 0; + 2 j
    for (var r = 0u; r < MR; r++) {
        let at = r * (p.K / 16u) + u0;
        let dx = vec4<f32>(xs[at].x, xs[at + 2u].x, xs[at + 4u].x, xs[at + 6u].x);
        let x0 = xq[at]; let x1 = xq[at + 2u]; let x2 = xq[at + 4u]; let x3 = xq[at + 6u];
        for (var q = 0u; q < RPT; q++) {
            let ds = vec4<i32>(dot16(wq[q][0], x0), dot16(wq[q][1], x1), dot16(wq[q][2], x2),
                               dot16(wq[q][3], x3));
            (*acc)[r * RPT + q] += dot(e[q] * dx, vec4<f32>(ds));
        }
    }
}

// Q4_1 block b of weight rows ns (20 bytes, word-aligned: f16 d and m, 16 bytes of nibbles:
// the low ones values 0..15, the high 16..31; w = d q + m): dot with every x row
fn q41_piece(ns: array<u32, RPT>, nb: u32, b: u32, second: bool,
             acc: ptr<function, array<f32, MR * RPT>>) {
    var la: array<vec4<u32>, RPT>;
    var lb: array<vec4<u32>, RPT>;
    var dm: array<vec2<f32>, RPT>;
    for (var q = 0u; q < RPT; q++) {
        let o = (ns[q] * nb + b) * 5u;
        dm[q] = unpack2x16float(wword(o, second));
        let qv = vec4<u32>(wword(o + 1u, second), wword(o + 2u, second), wword(o + 3u, second),
                           wword(o + 4u, second));
        la[q] = qv & vec4<u32>(0x0F0F0F0Fu);
        lb[q] = (qv >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
    }
    for (var r = 0u; r < MR; r++) {
        let at = r * (p.K / 16u) + 2u * b;
        let ea = xs[at];
        let eb = xs[at + 1u];                      // (the same d: one block of x)
        let xa = xq[at];
        let xb = xq[at + 1u];
        for (var q = 0u; q < RPT; q++) {
            let s = f32(dot16(la[q], xa) + dot16(lb[q], xb));
            (*acc)[r * RPT + q] += dm[q].x * ea.x * s + dm[q].y * (ea.y + eb.y);
        }
    }
}

// Q8_0 block b of weight rows ns (34 bytes, 2-aligned: f16 d, 32 int8): dot with every x row
fn q80_piece(ns: array<u32, RPT>, nb: u32, b: u32, second: bool,
             acc: ptr<function, array<f32, MR * RPT>>) {
    var qa: array<vec4<u32>, RPT>;
    var qb: array<vec4<u32>, RPT>;
    var d: array<f32, RPT>;
    for (var q = 0u; q < RPT; q++) {
        let o = (ns[q] * nb + b) * 34u;
        d[q] = qhalf(o, second);
        qa[q] = run16(o + 2u, second);
        qb[q] = run16(o + 18u, second);
    }
    for (var r = 0u; r < MR; r++) {
        let at = r * (p.K / 16u) + 2u * b;
        let e = xs[at].x;
        let xa = xq[at];
        let xb = xq[at + 1u];
        for (var q = 0u; q < RPT; q++) {
            (*acc)[r * RPT + q] += d[q] * e * f32(dot16(qa[q], xa) + dot16(qb[q], xb));
        }
    }
}

// this thread's partial dots of weight rows ns (w, or w2 when second) with every x row:
// [r * RPT + q] for x row r and row ns[q] (FMT: common/qformats.wgsl's; a segment's own in
// quant/qgemv_i8_qkv.wgsl)
fn row_dots(ns: array<u32, RPT>, j: u32, second: bool) -> array<f32, MR * RPT> {
    var acc: array<f32, MR * RPT>;
    for (var r = 0u; r < MR * RPT; r++) { acc[r] = 0.0; }
    let f = FMT;
    if (f == 12u) {
        let nb = p.K / 256u;
        for (var c = j; c < nb * 8u; c += TPR) { q4k_piece(ns, nb, c / 8u, c % 8u, second, &acc); }
    } else if (f == 14u) {
        let nb = p.K / 256u;
        for (var c = j; c < nb * 4u; c += TPR) { q6k_piece(ns, nb, c / 4u, c % 4u, second, &acc); }
    } else if (f == 3u) {
        let nb = p.K / 32u;
        for (var c = j; c < nb; c += TPR) { q41_piece(ns, nb, c, second, &acc); }
    } else {
        let nb = p.K / 32u;
        for (var c = j; c < nb; c += TPR) { q80_piece(ns, nb, c, second, &acc); }
    }
    return acc;
}
