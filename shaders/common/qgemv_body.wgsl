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
override RQ: u32 = 1u;            // x row quads per workgroup, 1..4 (ROWS = 4; RPT 1 or 2)
override UN: u32 = 1u;            // units a thread loads before it sums them: 1, 2 or 4
                                  // (RPT = RQ = 1; more bytes in flight per thread)
override WIDE: bool = false;      // UN > 1: the UN units are neighbours of one block (group_row)
const RPW: u32 = 8u;              // weight rows per workgroup and per j (rows n0 + j * RPW)
var<workgroup> red: array<vec4<f32>, 256>;    // per thread: partial sums, x rows in x..w
var<workgroup> red2: array<vec4<f32>, 256>;   // the same for w2 (SWIGLU)
var<workgroup> scale: array<vec4<f32>, 4>;    // 1/rms of each x row of each quad (NORM)
var<workgroup> pairv: array<vec4<f32>, 8>;    // each weight row's results (ROPE partners)

{{QBLOCKS}}
{{ROPE_TURN}}
{{ROW_POSITIONS}}

// WIDE (GPU variants, UN > 1): a thread's UN units are neighbours u0 .. u0 + UN - 1
// (u0 % UN == 0) that share one block and one scale pair, so the scales are decoded once a
// group and applied after the dots: Q4_K / Q6_K words of one sub-block pair (kunit's units),
// Q4_1 / Q8_0 parts of one block. q[2e], q[2e + 1]: unit e's quants (lo, hi halves; 4- and
// 6-bit ones as 1 + q / 16 or 1 + q / 64, see magic4_lo); a row's dot is
// d0 * (lo . xa) + m0 * sum(xa) + d1 * (hi . xb) + m1 * sum(xb). Other formats go unit by
// unit through load_unit (their scales folded in: d = 1, m = 0).
// Why: a unit of Q4_K cost 5 loads (d, three scale words, one quant word) and ~50 ALU
// operations for 4 bytes of quants; a group of 4 costs 8 loads (Q6_K 13 against ~28) and
// applies its scales once, and its 4 quant words are neighbours in memory.
// Measured (H100, bench/probes/qgemv_variants_probe.py, 1B shapes, us, best strided UN ->
// best WIDE): gate+up Q4_K 8192x2048 35.5 -> 30.4, down Q6_K 2048x8192 27.6 -> 23.8
// (22.8 with the magic floats), head Q6_K 128256x2048 316 -> 289 (276); the 1B step 2.19 ->
// 2.03 ms. What limits them still: bytes in flight. They read weights at 0.5-0.8 TB/s (HBM:
// 3.35), and neither x loads shared by 2 or 4 weight rows (RPT; fewer L1 bytes a weight
// byte) nor prefetching the next group nor fewer conversions moved that much: the threads
// resident an SM (registers) times the bytes each has in flight is what bounds them, as it
// bound matmul/gemv.wgsl's f32 GEMV until 4 vec4 loads a thread went out at once.
// Batched decodes (8 x rows, H200, bench/probes/qgemv_variants_probe.py, 1B shapes): the best
// variants cost 2.5-3x their 1-row time (gate+up Q4_K 77 us, down Q6_K 67 us). Tried, no gain,
// and taken out again: WIDE over RQ = 2 row quads fetching each group once for all 8 rows
// (118 us), the same with each chunk of x staged in workgroup memory for all warps (slower
// still), so neither re-fetched weights nor x traffic from L2 is what bounds them; nor x
// read as f16 (half its bytes: head 610 -> 613 us, H100, qgemv_variants_probe.py --x16).
// int8 x (dot4I8Packed, llama.cpp's q8_1) cut a simpler skeleton's 8-row time 3.3x, at 5e-3
// relative error (bench/probes/qgemv_xtype_probe.py): over the 1e-3 the model tests hold.

// Tried (2026-11-27, H100, bench/device_dawn.sh unrollab): the private-array loops (Raw's
// words, the unit arrays, UN's loops run to 4 with a guard, the slot epilogues) written out by
// `// @unroll`, so that Tint's robustness clamps none of their indices: decode under Dawn
// 415.0 vs 415.5 tok/s (1B-shaped Q4_K_M), natively no change; not kept.
// A group is fetched (its words, loads only: Raw), then decoded (ALU only). Tried: fetching
// the next group an iteration ahead (its loads in flight during the current math): no faster
// on an H100 (bench/probes/qgemv_variants_probe.py).
// Raw.w: Q4_K d/dmin, 3 scale words, then the UN quant words; Q6_K UN + 1 aligned words of
// ql (0..4), of qh (5..9), the two scale words (10, 11) and d's (12); Q4_1 d/m and UN words;
// Q8_0 d's word and the 2 UN + 1 aligned words of the int8s.
struct Raw { w: array<u32, 13> }

// the 4-byte values at byte offset o + 4 e (o even) from aligned words r.w[at + e ..]
fn funnel(r: Raw, at: u32, e: u32, o: u32) -> u32 {
    let sh = (o & 2u) * 8u;                           // 0 or 16; (v << 16) << (16 - sh) is 0 at 0
    return (r.w[at + e] >> sh) | ((r.w[at + e + 1u] << 16u) << (16u - sh));
}
fn fetch_words(r: ptr<function, Raw>, at: u32, o: u32, count: u32, s: bool) {
    let a = o >> 2u;
    for (var e = 0u; e <= count; e++) { (*r).w[at + e] = wword(min(a + e, p.nw - 1u), s); }
}

// the block of weight row n that holds the group of units u0.. (QK / 8 units a block)
fn group_block(n: u32, u0: u32) -> u32 {
    return n * (p.K / QK) + u0 / (QK / 8u);
}
// Q6_K: the byte of the int8 scale of the low half of ql word w0's group (block at byte o;
// the high half's is 4 bytes on)
fn q6_scale_at(o: u32, w0: u32) -> u32 {
    return o + 192u + 8u * (w0 >> 4u) + 2u * ((w0 >> 3u) & 1u) + ((w0 & 7u) >> 2u);
}

fn fetch_group(n: u32, u0: u32, s: bool) -> Raw {
    var r: Raw;
    if (FMT == 12u) {
        let a = group_block(n, u0) * (QBYTES / 4u);
        for (var e = 0u; e < 4u; e++) { r.w[e] = wword(a + e, s); }
        for (var e = 0u; e < UN; e++) { r.w[4u + e] = wword(a + 4u + u0 % 32u + e, s); }
    } else if (FMT == 14u) {
        let o = group_block(n, u0) * QBYTES;
        let w0 = u0 % 32u;
        let h = w0 >> 4u;
        fetch_words(&r, 0u, o + 4u * w0, UN, s);
        fetch_words(&r, 5u, o + 128u + 32u * h + (w0 & 7u) * 4u, UN, s);
        let sa = q6_scale_at(o, w0);
        r.w[10] = wword(sa >> 2u, s);
        r.w[11] = wword((sa + 4u) >> 2u, s);
        r.w[12] = wword((o + 208u) >> 2u, s);
    } else if (OWN && !Q8_0) {
        let b = group_block(n, u0);
        r.w[0] = wword(b * 5u, s);
        for (var e = 0u; e < UN; e++) { r.w[1u + e] = wword(b * 5u + 1u + (u0 & 3u) + e, s); }
    } else if (Q8_0) {
        let start = group_block(n, u0) * QBYTES;
        r.w[0] = wword(start >> 2u, s);
        fetch_words(&r, 1u, start + 2u + (u0 & 3u) * 8u, 2u * UN, s);
    }
    return r;
}

// Quants made floats without int-to-float conversions (a quarter-rate instruction on NVIDIA
// GPUs, two a weight byte, which bounded these GEMVs' ALU): a 4-bit q shifted into the top
// mantissa bits of 1.0 is 1 + q / 16, a 6-bit one 1 + q / 64, exactly; group_row's sums of x
// take the 1 out: d q = 16 d (1 + q / 16) - 16 d (the scales below are folded so).
const ONE_BITS = vec4<u32>(0x3F800000u);
fn magic4_lo(v: u32) -> vec4<f32> {           // the low nibbles of v's 4 bytes: 1 + q / 16
    let m = vec4<u32>(v << 19u, v << 11u, v << 3u, v >> 5u) & vec4<u32>(0x00780000u);
    return bitcast<vec4<f32>>(m | ONE_BITS);
}
fn magic4_hi(v: u32) -> vec4<f32> {           // the high nibbles
    let m = vec4<u32>(v << 15u, v << 7u, v >> 1u, v >> 9u) & vec4<u32>(0x00780000u);
    return bitcast<vec4<f32>>(m | ONE_BITS);
}
// Q6_K: the nibbles of ql (low or high) with bits 0..1 (low) or 4..5 (high) of each byte of
// hb as bits 4..5: 1 + q / 64
fn magic6_lo(ql: u32, hb: u32) -> vec4<f32> {
    let a = vec4<u32>(ql << 17u, ql << 9u, ql << 1u, ql >> 7u) & vec4<u32>(0x001E0000u);
    let h = vec4<u32>(hb << 21u, hb << 13u, hb << 5u, hb >> 3u) & vec4<u32>(0x00600000u);
    return bitcast<vec4<f32>>(a | h | ONE_BITS);
}
fn magic6_hi(ql: u32, hb: u32) -> vec4<f32> {
    let a = vec4<u32>(ql << 13u, ql << 5u, ql >> 3u, ql >> 11u) & vec4<u32>(0x001E0000u);
    let h = vec4<u32>(hb << 17u, hb << 9u, hb << 1u, hb >> 7u) & vec4<u32>(0x00600000u);
    return bitcast<vec4<f32>>(a | h | ONE_BITS);
}

// a group's scale pair, folded for its floats (see magic4_lo): d0 * (lo . xa) + m0 * sum(xa)
// + d1 * (hi . xb) + m1 * sum(xb) is the group's dot; other formats: 1, 0 (folded in)
struct Scales { d0: f32, m0: f32, d1: f32, m1: f32 }
fn group_scales(r: Raw, n: u32, u0: u32) -> Scales {
    if (FMT == 12u) {                                 // Q4_K: sub-blocks 2c, 2c + 1 (c = w0 / 8)
        let c = (u0 % 32u) >> 3u;
        let e16 = (c & 1u) * 16u;
        let lo = r.w[1] >> e16;
        let mo = r.w[2] >> e16;
        let hi = r.w[3] >> e16;
        let upper = c >= 2u;
        let sc = select(lo & 0x3F3Fu, (hi & 0x0F0Fu) | ((lo >> 2u) & 0x3030u), upper);
        let mn = select(mo & 0x3F3Fu, ((hi >> 4u) & 0x0F0Fu) | ((mo >> 2u) & 0x3030u), upper);
        let dm = unpack2x16float(r.w[0]);
        let d0 = 16.0 * dm.x * f32(sc & 255u);        // (q = 16 (1 + q / 16) - 16)
        let d1 = 16.0 * dm.x * f32(sc >> 8u);
        return Scales(d0, -dm.y * f32(mn & 255u) - d0, d1, -dm.y * f32(mn >> 8u) - d1);
    }
    if (FMT == 14u) {                                 // Q6_K: int8 scales, q - 32
        let o = group_block(n, u0) * QBYTES;
        let w0 = u0 % 32u;
        let sa = q6_scale_at(o, w0);
        let d = unpack2x16float(r.w[12] >> (((o + 208u) & 2u) * 8u)).x;
        let d0 = d * int8_at(r.w[10] >> ((sa & 3u) * 8u));
        let d1 = d * int8_at(r.w[11] >> (((sa + 4u) & 3u) * 8u));
        return Scales(64.0 * d0, -96.0 * d0, 64.0 * d1, -96.0 * d1);   // (q - 32 = 64 f - 96)
    }
    if (OWN && !Q8_0) {                               // Q4_1: d q + m = 16 d f + m - 16 d
        let dm = unpack2x16float(r.w[0]);
        return Scales(16.0 * dm.x, dm.y - 16.0 * dm.x, 16.0 * dm.x, dm.y - 16.0 * dm.x);
    }
    if (Q8_0) {
        let start = group_block(n, u0) * QBYTES;
        let d = unpack2x16float(r.w[0] >> ((start & 2u) * 8u)).x;
        return Scales(d, 0.0, d, 0.0);
    }
    return Scales(1.0, 0.0, 1.0, 0.0);
}

// unit e of the group: its lo and hi quants as floats (other formats: dequantized)
fn group_unit(r: Raw, n: u32, u0: u32, e: u32, s: bool) -> array<vec4<f32>, 2> {
    if (FMT == 12u) {
        return pair(magic4_lo(r.w[4u + e]), magic4_hi(r.w[4u + e]));
    }
    if (FMT == 14u) {
        let o = group_block(n, u0) * QBYTES;
        let ql = funnel(r, 0u, e, o);
        let bits = funnel(r, 5u, e, o) >> (2u * (((u0 % 32u) >> 3u) & 1u));
        return pair(magic6_lo(ql, bits), magic6_hi(ql, bits));
    }
    if (OWN && !Q8_0) {
        return pair(magic4_lo(r.w[1u + e]), magic4_hi(r.w[1u + e]));
    }
    if (Q8_0) {
        let first = group_block(n, u0) * QBYTES + 2u + (u0 & 3u) * 8u;
        return pair(int8x4(funnel(r, 1u, 2u * e, first)),
                    int8x4(funnel(r, 1u, 2u * e + 1u, first)));
    }
    let q = load_unit(n, u0 + e, s);                  // unit by unit, scales folded in
    return pair(q.lo, q.hi);
}

// a unit's quants q against x rows v: dots into dl (lo) and dh (hi), rows in x..w
fn unit_dots(q: array<vec4<f32>, 2>, v: XUnit, valid: u32, dl: ptr<function, vec4<f32>>,
             dh: ptr<function, vec4<f32>>) {
    (*dl).x += dot(q[0], v.a0);
    (*dh).x += dot(q[1], v.b0);
    if (ROWS > 1u && valid > 1u) { (*dl).y += dot(q[0], v.a1); (*dh).y += dot(q[1], v.b1); }
    if (ROWS > 2u && valid > 2u) { (*dl).z += dot(q[0], v.a2); (*dh).z += dot(q[1], v.b2); }
    if (ROWS > 3u && valid > 3u) { (*dl).w += dot(q[0], v.a3); (*dh).w += dot(q[1], v.b3); }
}
fn apply(c: Scales, dl: vec4<f32>, dh: vec4<f32>, sl: vec4<f32>, sx: vec4<f32>) -> vec4<f32> {
    var r = c.d0 * dl + c.d1 * dh;
    if (MINS) { r += c.m0 * sl + c.m1 * sx; }
    return r;
}

// weight row n's group of units u0.. against x rows r0.. (and w2's under SWIGLU; zero past
// N): its words are fetched first, then each unit is decoded beside its x loads, so that few
// registers hold the group (more threads resident, more loads in flight)
fn group_row(n: u32, u0: u32, r0: u32, valid: u32) -> Dots {
    var d: Dots;
    if (n < p.N) {
        let r = fetch_group(n, u0, false);
        var r2: Raw;
        if (SWIGLU) { r2 = fetch_group(n, u0, true); }
        let one = vec4<f32>(1.0);
        var dl = vec4<f32>(0.0);
        var dh = vec4<f32>(0.0);
        var dl2 = vec4<f32>(0.0);
        var dh2 = vec4<f32>(0.0);
        var sl = vec4<f32>(0.0);
        var sx = vec4<f32>(0.0);
        for (var e = 0u; e < UN; e++) {
            let v = load_x(u0 + e, r0, valid);
            unit_dots(group_unit(r, n, u0, e, false), v, valid, &dl, &dh);
            if (SWIGLU) { unit_dots(group_unit(r2, n, u0, e, true), v, valid, &dl2, &dh2); }
            if (MINS) {
                sl += vec4<f32>(dot(v.a0, one), dot(v.a1, one), dot(v.a2, one), dot(v.a3, one));
                sx += vec4<f32>(dot(v.b0, one), dot(v.b1, one), dot(v.b2, one), dot(v.b3, one));
            }
        }
        d.a = apply(group_scales(r, n, u0), dl, dh, sl, sx);
        if (SWIGLU) { d.b = apply(group_scales(r2, n, u0), dl2, dh2, sl, sx); }
    }
    return d;
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
                let position = u32(row_pos(r0 + j));
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
                    let tpos = row_pos(r);
                    if (tpos >= 0 && u32(tpos) < p.T) {
                        let heads = p.N / p.hd;
                        let h = row_slot(r) * heads + n / p.hd;     // (slot, h) flattened
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

// x row quad r's unit u (loaded once) against weight units q (w2's q2) of row n0 and, RPT = 2,
// qb (qb2) of row n0 + RPW: their dots
struct DotPair { a: Dots, b: Dots }
fn quad_pair(u: u32, q: Unit, q2: Unit, qb: Unit, qb2: Unit, r: u32) -> DotPair {
    var d: DotPair;
    let valid = valid_rows(r);
    if (valid > 0u) {
        let v = load_x(u, r, valid);
        d.a.a = dot_rows(q, v, valid);
        if (SWIGLU) { d.a.b = dot_rows(q2, v, valid); }
        if (RPT > 1u) {
            d.b.a = dot_rows(qb, v, valid);
            if (SWIGLU) { d.b.b = dot_rows(qb2, v, valid); }
        }
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
                a0 = add(a0, group_row(n0, u * UN, r0, valid));
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
            } else if (RQ > 1u) {           // one unit of weight row n0 (RPT = 2: and of row
                let q = load_unit(n0, u, false);    // n0 + RPW, slots RQ..), RQ x row quads
                var q2: Unit;
                if (SWIGLU) { q2 = load_unit(n0, u, true); }
                var qb: Unit;
                var qb2: Unit;
                if (RPT > 1u && n0 + RPW < p.N) {
                    qb = load_unit(n0 + RPW, u, false);
                    if (SWIGLU) { qb2 = load_unit(n0 + RPW, u, true); }
                }
                let d0 = quad_pair(u, q, q2, qb, qb2, r0);
                let d1 = quad_pair(u, q, q2, qb, qb2, r0 + 4u);
                a0 = add(a0, d0.a);
                a1 = add(a1, d1.a);
                if (RPT > 1u && RQ == 2u) { a2 = add(a2, d0.b); a3 = add(a3, d1.b); }
                if (RPT > 1u && RQ == 4u) { a4 = add(a4, d0.b); a5 = add(a5, d1.b); }
                if (RQ > 2u) {
                    let d2 = quad_pair(u, q, q2, qb, qb2, r0 + 8u);
                    a2 = add(a2, d2.a);
                    if (RPT > 1u) { a6 = add(a6, d2.b); }
                }
                if (RQ > 3u) {
                    let d3 = quad_pair(u, q, q2, qb, qb2, r0 + 12u);
                    a3 = add(a3, d3.a);
                    if (RPT > 1u) { a7 = add(a7, d3.b); }
                }
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
        finish(slot_n(n0, j), tid, r, valid_rows(r), acc[j].a, acc[j].b, j % RQ);
    }
}
