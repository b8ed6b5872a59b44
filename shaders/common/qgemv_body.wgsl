// The body of the quantized decode GEMVs with fused neighbours (quant/qgemv_fused: one
// weight; quant/qgemv_qkv: q, k and v in one dispatch). See quant/qgemv_fused.wgsl for what
// it computes and why. The including shader declares, besides what common/qblocks.wgsl needs
// (wword, x_vec, p): bindings x, g, pos, freq; the NORM, SWIGLU, RES, ROPE and CACHE switches;
// and the hooks enter(wid.x) -> this weight's workgroup x (it may select a weight and set p),
// rotates() (ROPE applies to this weight), caches() (results go to a KV cache),
// put(i, value) (store result i) and res_at(i) (residual i).
override ROWS: u32 = 1u;          // x rows per workgroup row, 1..4
override TPR: u32 = 8u;           // threads per weight row: a power of two, 1..32
override RPT: u32 = 1u;           // weight rows per thread, 1..8 (each unit's x loads shared)
override RQ: u32 = 1u;            // x row quads per workgroup, 1..4 (ROWS = 4; RPT = 1)
override UN: u32 = 1u;            // units a thread loads before it sums them: 1, 2 or 4
                                  // (RPT = RQ = 1; more bytes in flight per thread)
override WIDE: bool = false;      // UN > 1: the UN units are neighbours of one block (Group)
const RPW: u32 = 8u;              // weight rows per workgroup and per j (rows n0 + j * RPW)
var<workgroup> red: array<vec4<f32>, 256>;    // per thread: partial sums, x rows in x..w
var<workgroup> red2: array<vec4<f32>, 256>;   // the same for w2 (SWIGLU)
var<workgroup> scale: array<vec4<f32>, 4>;    // 1/rms of each x row of each quad (NORM)
var<workgroup> pairv: array<vec4<f32>, 8>;    // each weight row's results (ROPE partners)

{{QBLOCKS}}
{{ROPE_TURN}}

// WIDE (GPU variants, UN > 1): a thread's UN units are neighbours u0 .. u0 + UN - 1
// (u0 % UN == 0) that share one block and one scale pair, so the scales are decoded once a
// group and applied after the dots: Q4_K / Q6_K words of one sub-block pair (kunit's units),
// Q4_1 / Q8_0 parts of one block. q[2e], q[2e + 1]: unit e's quants as stored (lo, hi halves);
// a row's dot is d0 * (lo . xa) + m0 * sum(xa) + d1 * (hi . xb) + m1 * sum(xb). Other formats
// go unit by unit through load_unit (their scales folded in: d = 1, m = 0).
// Why: a unit of Q4_K cost 5 loads (d, three scale words, one quant word) and ~50 ALU
// operations for 4 bytes of quants; a group of 4 costs 8 loads (Q6_K 13 against ~28) and
// applies its scales once, and its 4 quant words are neighbours in memory.
struct Group { q: array<vec4<f32>, 8>, d0: f32, m0: f32, d1: f32, m1: f32 }
override MINS: bool = FMT == 12u || FMT == 14u || (OWN && !Q8_0);   // m0, m1 used

// `count` 4-byte values at byte offsets o, o + 4, .. (o even) of the blocks: count + 1 loads
fn words_at(o: u32, s: bool, count: u32) -> array<u32, 8> {
    var r: array<u32, 8>;
    let a = o >> 2u;
    let sh = (o & 2u) * 8u;                           // 0 or 16; (v << 16) << (16 - sh) is 0 at 0
    var prev = wword(a, s);
    for (var e = 0u; e < count; e++) {
        let next = wword(min(a + e + 1u, p.nw - 1u), s);
        r[e] = (prev >> sh) | ((next << 16u) << (16u - sh));
        prev = next;
    }
    return r;
}

fn load_group(n: u32, u0: u32, s: bool) -> Group {
    var g: Group;
    if (FMT == 12u) {                                 // Q4_K: words w0.. of qs chunk w0 / 8
        let b = n * (p.K / QK) + u0 / 32u;
        let w0 = u0 % 32u;
        let c = w0 >> 3u;
        let e16 = (c & 1u) * 16u;
        let a = b * (QBYTES / 4u);
        let lo = wword(a + 1u, s) >> e16;
        let mo = wword(a + 2u, s) >> e16;
        let hi = wword(a + 3u, s) >> e16;
        let upper = c >= 2u;
        let sc = select(lo & 0x3F3Fu, (hi & 0x0F0Fu) | ((lo >> 2u) & 0x3030u), upper);
        let mn = select(mo & 0x3F3Fu, ((hi >> 4u) & 0x0F0Fu) | ((mo >> 2u) & 0x3030u), upper);
        let dm = unpack2x16float(wword(a, s));
        g.d0 = dm.x * f32(sc & 255u);
        g.d1 = dm.x * f32(sc >> 8u);
        g.m0 = -dm.y * f32(mn & 255u);
        g.m1 = -dm.y * f32(mn >> 8u);
        for (var e = 0u; e < UN; e++) {
            let q = wword(a + 4u + w0 + e, s);
            g.q[2u * e] = nib4(q, 0u);
            g.q[2u * e + 1u] = nib4(q, 4u);
        }
    } else if (FMT == 14u) {                          // Q6_K: ql words w0.., their qh bits
        let b = n * (p.K / QK) + u0 / 32u;
        let w0 = u0 % 32u;
        let o = b * QBYTES;
        let h = w0 >> 4u;
        let t = (w0 >> 3u) & 1u;
        let l0 = (w0 & 7u) * 4u;                      // the group's l / 16 is l0's
        let ql = words_at(o + 4u * w0, s, UN);
        let qh = words_at(o + 128u + 32u * h + l0, s, UN);
        let sa = o + 192u + 8u * h + 2u * t + (l0 >> 4u);
        let d = qhalf(o + 208u, s);
        g.d0 = d * int8_at(qbyte(sa, s));
        g.d1 = d * int8_at(qbyte(sa + 4u, s));
        g.m0 = -32.0 * g.d0;
        g.m1 = -32.0 * g.d1;
        for (var e = 0u; e < UN; e++) {
            let bits = qh[e] >> (2u * t);
            g.q[2u * e] = nib4(ql[e], 0u) + 16.0 * bytes4(bits & 0x03030303u);
            g.q[2u * e + 1u] = nib4(ql[e], 4u) + 16.0 * bytes4((bits >> 4u) & 0x03030303u);
        }
    } else if (OWN && !Q8_0) {                        // Q4_1: parts u0 % 4.. of one block
        let b = n * (p.K >> 5u) + (u0 >> 2u);
        let dm = unpack2x16float(wword(b * 5u, s));
        g.d0 = dm.x;
        g.d1 = dm.x;
        g.m0 = dm.y;
        g.m1 = dm.y;
        for (var e = 0u; e < UN; e++) {
            let q = wword(b * 5u + 1u + (u0 & 3u) + e, s);
            g.q[2u * e] = nib4(q, 0u);
            g.q[2u * e + 1u] = nib4(q, 4u);
        }
    } else if (Q8_0) {                                // Q8_0: parts u0 % 4.., 8 int8 each
        let start = (n * (p.K >> 5u) + (u0 >> 2u)) * 34u;
        g.d0 = qhalf(start, s);
        g.d1 = g.d0;
        let w = words_at(start + 2u + (u0 & 3u) * 8u, s, 2u * UN);
        for (var e = 0u; e < UN; e++) {
            g.q[2u * e] = int8x4(w[2u * e]);
            g.q[2u * e + 1u] = int8x4(w[2u * e + 1u]);
        }
    } else {                                          // unit by unit, scales folded in
        g.d0 = 1.0;
        g.d1 = 1.0;
        for (var e = 0u; e < UN; e++) {
            let q = load_unit(n, u0 + e, s);
            g.q[2u * e] = q.lo;
            g.q[2u * e + 1u] = q.hi;
        }
    }
    return g;
}

// a group's dots with the x rows r0.. (vs[e]: unit e's x values; nothing past `valid`)
fn group_dots(g: Group, vs: array<XUnit, 4>, valid: u32) -> vec4<f32> {
    let one = vec4<f32>(1.0);
    var dl = vec4<f32>(0.0);
    var dh = vec4<f32>(0.0);
    var sl = vec4<f32>(0.0);
    var sx = vec4<f32>(0.0);
    for (var e = 0u; e < UN; e++) {
        let lo = g.q[2u * e];
        let hi = g.q[2u * e + 1u];
        let v = vs[e];
        dl.x += dot(lo, v.a0);
        dh.x += dot(hi, v.b0);
        if (MINS) { sl.x += dot(v.a0, one); sx.x += dot(v.b0, one); }
        if (ROWS > 1u && valid > 1u) {
            dl.y += dot(lo, v.a1);
            dh.y += dot(hi, v.b1);
            if (MINS) { sl.y += dot(v.a1, one); sx.y += dot(v.b1, one); }
        }
        if (ROWS > 2u && valid > 2u) {
            dl.z += dot(lo, v.a2);
            dh.z += dot(hi, v.b2);
            if (MINS) { sl.z += dot(v.a2, one); sx.z += dot(v.b2, one); }
        }
        if (ROWS > 3u && valid > 3u) {
            dl.w += dot(lo, v.a3);
            dh.w += dot(hi, v.b3);
            if (MINS) { sl.w += dot(v.a3, one); sx.w += dot(v.b3, one); }
        }
    }
    var r = g.d0 * dl + g.d1 * dh;
    if (MINS) { r += g.m0 * sl + g.m1 * sx; }
    return r;
}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

// unit u's dots for weight row n with the x rows (and under SWIGLU w2's in .., zero past N)
struct Dots { a: vec4<f32>, b: vec4<f32> }
fn add(d: Dots, e: Dots) -> Dots { return Dots(d.a + e.a, d.b + e.b); }
fn row_dots(n: u32, u: u32, v: XUnit, valid: u32) -> Dots {
    var d: Dots;
    if (n < p.N) {
        d.a = dot_rows(load_unit(n, u, false), v, valid);
        if (SWIGLU) { d.b = dot_rows(load_unit(n, u, true), v, valid); }
    }
    return d;
}

// weight row n's result for the x rows from its TPR threads' sums (s, s2): reduced, scaled,
// SWIGLU and ROPE applied, then written (every thread calls this: it has barriers)
fn finish(n: u32, tid: u32, r0: u32, valid: u32, s_in: vec4<f32>, s2_in: vec4<f32>, quad: u32) {
    let t = tid % TPR;
    var s = s_in;
    var s2 = s2_in;
    if (TPR > 1u) {
        workgroupBarrier();                 // (red was read: sums of squares, or a row before)
        red[tid] = s;
        red2[tid] = s2;
        workgroupBarrier();
        // a tree, not one thread summing TPR values
        for (var h = TPR / 2u; h > 0u; h >>= 1u) {
            if (t < h) {
                red[tid] += red[tid + h];
                if (SWIGLU) { red2[tid] += red2[tid + h]; }
            }
            workgroupBarrier();
        }
        s = red[tid];
        s2 = red2[tid];
    }
    var v = vec4<f32>(0.0);
    if (t == 0u && n < p.N) {
        if (NORM) {
            s *= scale[quad];
            s2 *= scale[quad];
        }
        v = s;
        if (SWIGLU) { v = vec4<f32>(silu(s.x), silu(s.y), silu(s.z), silu(s.w)) * s2; }
    }
    if (ROPE) {                             // (uniform: every thread meets the barriers)
        workgroupBarrier();                 // (the previous row's partners were read)
        if (t == 0u) { pairv[tid / TPR] = v; }
        workgroupBarrier();
        if (t == 0u && n < p.N && rotates()) {
            let other = pairv[(tid / TPR) ^ 1u];
            let i = (n % p.hd) / 2u;
            let odd = (n & 1u) == 1u;
            for (var j = 0u; j < 4u; j++) {
                let position = u32(pos[0] + i32((r0 + j) % p.S));
                let sc = sincos_turn(position * freq[2u * i] + mulhi(position, freq[2u * i + 1u]));
                // even row: x1 cos - x2 sin (x2 = partner); odd row: x1 sin + x2 cos (x1 = partner)
                v[j] = select(v[j] * sc.y - other[j] * sc.x, other[j] * sc.x + v[j] * sc.y, odd);
            }
        }
    }
    if (t == 0u && n < p.N && valid > 0u) {
        let o = r0 * p.N + n;
        for (var i = 0u; i < 4u; i++) {
            if (i < valid) {
                var e = v[i];
                if (RES) { e += res_at(o + i * p.N); }
                if (caches()) {
                    let r = r0 + i;
                    let tpos = pos[0] + i32(r % p.S);
                    if (tpos >= 0 && u32(tpos) < p.T) {
                        let heads = p.N / p.hd;
                        let h = (r / p.S) * heads + n / p.hd;       // (b, h) flattened
                        put((h * p.T + u32(tpos)) * p.hd + n % p.hd, e);
                    }
                } else {
                    put(o + i * p.N, e);
                }
            }
        }
    }
}

{{KV_CHUNKS}}

// COMBINE: x row 0 (heads of p.hd values, G query heads per kv head) merged from its
// per-chunk partials (acc, (m, l)) into xs, as decoder/attn_combine.wgsl merges them: only
// the chunks that hold keys at run time are read (the same chunk cut as the attention's)
fn combine_x(tid: u32) {
    let d4 = p.hd / 4u;
    let L = valid_keys(u32(max(pos[0], 0)));
    let cl = chunk_len(L);
    let nc = (L + cl - 1u) / cl;
    let stride = p.G * (d4 + 1u);                 // one chunk's items (S = 1)
    for (var e = tid; e < p.K / 4u; e += RPW * TPR) {
        let h = e / d4;
        let base = ((h / p.G) * p.nsplit * p.G + h % p.G) * (d4 + 1u);
        var mm = -3.4028234663852886e38;
        for (var c = 0u; c < nc; c++) { mm = max(mm, f32(x[base + c * stride + d4].x)); }
        var a = vec4<f32>(0.0);
        var lt = 0.0;
        for (var c = 0u; c < nc; c++) {
            let ml = vec4<f32>(x[base + c * stride + d4]);
            let w = exp(ml.x - mm);
            a += w * vec4<f32>(x[base + c * stride + e % d4]);
            lt += w * ml.y;
        }
        xs[e] = select(a / lt, vec4<f32>(0.0), lt == 0.0);
    }
}

fn quad_dots(u: u32, q: Unit, q2: Unit, r: u32) -> Dots {
    var d: Dots;
    let valid = valid_rows(r);
    if (valid > 0u) {
        let v = load_x(u, r, valid);
        d.a = dot_rows(q, v, valid);
        if (SWIGLU) { d.b = dot_rows(q2, v, valid); }
    }
    return d;
}

@compute @workgroup_size(RPW * TPR)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let t = tid % TPR;
    let wx = enter(wid.x);                  // (the including shader's: its weight's workgroup)
    let n0 = wx * RPW * RPT + tid / TPR;    // this thread's first weight row
    let r0 = wid.y * ROWS * RQ;             // this workgroup's first x row
    let valid = valid_rows(r0);
    if (COMBINE) {                          // x: attention partials, merged into xs
        combine_x(tid);
        workgroupBarrier();
    }
    if (NORM) {                             // sums of squares of the rows, then 1/rms
        let k4 = p.K / 4u;
        for (var quad = 0u; quad < RQ; quad++) {
            let rq = r0 + 4u * quad;
            let vq = valid_rows(rq);
            var sq = vec4<f32>(0.0);
            for (var j = tid; j < k4; j += RPW * TPR) {
                for (var i = 0u; i < vq; i++) {
                    let b = vec4<f32>(x[(rq + i) * k4 + j]);
                    sq[i] += dot(b, b);
                }
            }
            workgroupBarrier();             // (red was read by the quad before)
            red[tid] = sq;
            workgroupBarrier();
            // a tree, not one thread summing 256 values (that alone cost ~4 us of a ~14 us call)
            for (var h = RPW * TPR / 2u; h > 0u; h >>= 1u) {
                if (tid < h) { red[tid] += red[tid + h]; }
                workgroupBarrier();
            }
            if (tid == 0u) { scale[quad] = inverseSqrt(red[0] / f32(p.K) + vec4<f32>(p.eps)); }
        }
        workgroupBarrier();
    }
    var a0: Dots;                           // slots (common/qblocks.wgsl)
    var a1: Dots;
    var a2: Dots;
    var a3: Dots;
    var a4: Dots;
    var a5: Dots;
    var a6: Dots;
    var a7: Dots;
    if (n0 < p.N) {
        let units = p.K >> 3u;
        // (WIDE: u counts groups of UN units; K % 32 == 0, so UN divides the units)
        let groups = select(units, units / UN, WIDE);
        for (var u = t; u < groups; u += select(TPR * UN, TPR, WIDE)) {
            if (WIDE) {                     // units u UN .. u UN + UN - 1 of row n0
                let u0 = u * UN;
                let q = load_group(n0, u0, false);
                var q2: Group;
                if (SWIGLU) { q2 = load_group(n0, u0, true); }
                var vs: array<XUnit, 4>;
                for (var e = 0u; e < UN; e++) { vs[e] = load_x(u0 + e, r0, valid); }
                a0.a += group_dots(q, vs, valid);
                if (SWIGLU) { a0.b += group_dots(q2, vs, valid); }
            } else if (UN > 1u) {           // UN units of row n0 (RPT = RQ = 1): loads first
                var qs: array<Unit, 4>;
                var q2s: array<Unit, 4>;
                var vs: array<XUnit, 4>;
                for (var e = 0u; e < UN; e++) {
                    let ue = min(u + e * TPR, units - 1u);   // (past the end: not summed)
                    qs[e] = load_unit(n0, ue, false);
                    if (SWIGLU) { q2s[e] = load_unit(n0, ue, true); }
                    vs[e] = load_x(ue, r0, valid);
                }
                for (var e = 0u; e < UN; e++) {
                    if (u + e * TPR < units) {
                        a0.a += dot_rows(qs[e], vs[e], valid);
                        if (SWIGLU) { a0.b += dot_rows(q2s[e], vs[e], valid); }
                    }
                }
            } else if (RQ > 1u) {           // one unit of weight row n0, RQ x row quads
                let q = load_unit(n0, u, false);
                var q2: Unit;
                if (SWIGLU) { q2 = load_unit(n0, u, true); }
                a0 = add(a0, quad_dots(u, q, q2, r0));
                a1 = add(a1, quad_dots(u, q, q2, r0 + 4u));
                if (RQ > 2u) { a2 = add(a2, quad_dots(u, q, q2, r0 + 8u)); }
                if (RQ > 3u) { a3 = add(a3, quad_dots(u, q, q2, r0 + 12u)); }
            } else {                        // RPT weight rows, one unit of x loaded once
                let v = load_x(u, r0, valid);
                a0 = add(a0, row_dots(n0, u, v, valid));
                if (RPT > 1u) { a1 = add(a1, row_dots(n0 + RPW, u, v, valid)); }
                if (RPT > 2u) { a2 = add(a2, row_dots(n0 + 2u * RPW, u, v, valid)); }
                if (RPT > 3u) { a3 = add(a3, row_dots(n0 + 3u * RPW, u, v, valid)); }
                if (RPT > 4u) { a4 = add(a4, row_dots(n0 + 4u * RPW, u, v, valid)); }
                if (RPT > 5u) { a5 = add(a5, row_dots(n0 + 5u * RPW, u, v, valid)); }
                if (RPT > 6u) { a6 = add(a6, row_dots(n0 + 6u * RPW, u, v, valid)); }
                if (RPT > 7u) { a7 = add(a7, row_dots(n0 + 7u * RPW, u, v, valid)); }
            }
        }
    }
    let acc = array<Dots, 8>(a0, a1, a2, a3, a4, a5, a6, a7);
    for (var j = 0u; j < slots(); j++) {
        let r = slot_r(r0, j);
        finish(slot_n(n0, j), tid, r, valid_rows(r), acc[j].a, acc[j].b, select(0u, j, RQ > 1u));
    }
}
