// GGUF block decoding and row dots shared by the quantized GEMVs (quant/qgemv,
// quant/qgemv_fused, quant/qmatmul_fused): a "unit" is 8 weights of one block of weight row n,
// dequantized in registers: Q4_1 and Q8_0 by their own paths here (OWN), Q4_K and Q6_K a
// word of quants a unit (common/qformats.wgsl's kunit), every other format by its deq8. The
// including shader declares `wword(i, second)` (word i of the blocks; second: the second
// weight of a fused kernel, a constant at each call), `x_vec(r, k4)` (x row r's k4-th vec4,
// as f32), `p.M`, `p.K`, `p.nw`, the ROWS, RPT and RQ overrides and RPW.
// 8 weights of a block: d * q + m at k0..k0+3 (lo) and k1..k1+3 (hi) (unit_k)
struct Unit { lo: vec4<f32>, hi: vec4<f32>, d: f32, m: f32 }

{{QFORMATS}}

// unit u (0 .. K/8) of weight row n (of the second weight if `second`)
fn load_unit(n: u32, u: u32, second: bool) -> Unit {
    var r: Unit;
    if (!OWN) {                                       // deq8 or kunit: d folded in
        let b = n * (p.K / QK) + u / (QK / 8u);
        var v: array<vec4<f32>, 2>;
        if (WORD_UNITS) { v = kunit(b, u % (QK / 8u), second); }
        else { v = deq8(b, u % (QK / 8u), second); }
        r.lo = v[0];
        r.hi = v[1];
        r.d = 1.0;
        r.m = 0.0;
        return r;
    }
    let kb = u >> 2u;
    let part = u & 3u;
    let b = n * (p.K >> 5u) + kb;
    if (Q8_0) {
        let start = b * 34u;                          // bytes
        r.d = unpack2x16float(wword(start / 4u, second) >> ((start & 2u) * 8u)).x;
        r.m = 0.0;
        let s = start + 2u + part * 8u;               // first of 8 int8, 2- or 4-byte aligned
        let a = s / 4u;
        let sh = (s & 2u) * 8u;                       // 0 or 16; (v << 16) << (16 - sh) is 0 at 0
        let w0 = wword(a, second);
        let w1 = wword(a + 1u, second);
        let w2 = wword(min(a + 2u, p.nw - 1u), second);
        r.lo = int8x4((w0 >> sh) | ((w1 << 16u) << (16u - sh)));
        r.hi = int8x4((w1 >> sh) | ((w2 << 16u) << (16u - sh)));
    } else {
        let dm = unpack2x16float(wword(b * 5u, second));
        let q = wword(b * 5u + 1u + part, second);
        r.lo = vec4<f32>(f32(q & 15u), f32((q >> 8u) & 15u), f32((q >> 16u) & 15u),
                         f32((q >> 24u) & 15u));
        r.hi = vec4<f32>(f32((q >> 4u) & 15u), f32((q >> 12u) & 15u), f32((q >> 20u) & 15u),
                         f32(q >> 28u));
        r.d = dm.x;
        r.m = dm.y;
    }
    return r;
}

// x rows from r0 that exist: r0 .. r0 + valid_rows(r0) - 1 (ROWS <= 4; 0 from M; uniform)
fn valid_rows(r0: u32) -> u32 {
    return select(0u, min(ROWS, p.M - r0), r0 < p.M);
}

// A thread's accumulator slots (up to 8, named: a dynamically indexed array would live in
// memory on CPU adapters): slot j = i * RQ + q holds weight row n0 + i * RPW (i < RPT)
// against x row quad r0 + 4 q (q < RQ). RPT > 1 alone: CPU adapters (one unit of x for RPT
// rows); RQ > 1 alone: GPU prefills and batched decodes (one unit of weight for RQ quads);
// both (RPT = 2, RPT * RQ <= 8): batched decodes, each x load shared by 2 weight rows and
// each weight unit by RQ quads.
fn slots() -> u32 {
    return RPT * RQ;
}
fn slot_n(n0: u32, slot: u32) -> u32 {
    return n0 + (slot / RQ) * RPW;
}
fn slot_r(r0: u32, slot: u32) -> u32 {
    return r0 + 4u * (slot % RQ);
}

// where unit u's 8 weights sit in a row: k0..k0+3 and k1..k1+3 (as load_unit's k0, k1)
fn unit_k(u: u32) -> vec2<u32> {
    if (WORD_UNITS) { return kunit_k(u % 32u) + vec2<u32>((u / 32u) * 256u); }
    if (!OWN) { return vec2<u32>(u * 8u, u * 8u + 4u); }
    let k0 = (u >> 2u) * 32u + (u & 3u) * select(4u, 8u, Q8_0);
    return vec2<u32>(k0, k0 + select(16u, 4u, Q8_0));
}

// the x values that unit u meets, for the rows r0 .. r0 + valid - 1 (a..: k0.., b..: k1..,
// s: the sum of a row's 8 values, for Q4_1's offset). Loaded once per unit and shared by every
// weight row of a thread (RPT): on CPU adapters loads, not math, are the cost (SwiftShader
// splits each vec4 load of a lane-varying index into 16 scalar loads).
struct XUnit { a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>,
               b0: vec4<f32>, b1: vec4<f32>, b2: vec4<f32>, b3: vec4<f32>, s: vec4<f32> }

fn load_x(u: u32, r0: u32, valid: u32) -> XUnit {
    let k = unit_k(u) >> vec2<u32>(2u);                 // vec4 indices in a row
    let one = vec4<f32>(1.0);
    var v: XUnit;
    v.a0 = x_vec(r0, k.x);
    v.b0 = x_vec(r0, k.y);
    v.s.x = dot(v.a0 + v.b0, one);
    if (ROWS > 1u && valid > 1u) { v.a1 = x_vec(r0 + 1u, k.x); v.b1 = x_vec(r0 + 1u, k.y); v.s.y = dot(v.a1 + v.b1, one); }
    if (ROWS > 2u && valid > 2u) { v.a2 = x_vec(r0 + 2u, k.x); v.b2 = x_vec(r0 + 2u, k.y); v.s.z = dot(v.a2 + v.b2, one); }
    if (ROWS > 3u && valid > 3u) { v.a3 = x_vec(r0 + 3u, k.x); v.b3 = x_vec(r0 + 3u, k.y); v.s.w = dot(v.a3 + v.b3, one); }
    return v;
}

// a unit's dots with those rows, in x..w: d * (q . x) + m * sum(x) (the offset folded out)
fn dot_rows(q: Unit, v: XUnit, valid: u32) -> vec4<f32> {
    var a = vec4<f32>(dot(q.lo, v.a0) + dot(q.hi, v.b0), 0.0, 0.0, 0.0);
    if (ROWS > 1u && valid > 1u) { a.y = dot(q.lo, v.a1) + dot(q.hi, v.b1); }
    if (ROWS > 2u && valid > 2u) { a.z = dot(q.lo, v.a2) + dot(q.hi, v.b2); }
    if (ROWS > 3u && valid > 3u) { a.w = dot(q.lo, v.a3) + dot(q.hi, v.b3); }
    a *= q.d;
    if (OWN && !Q8_0) { a += q.m * v.s; }
    return a;
}
