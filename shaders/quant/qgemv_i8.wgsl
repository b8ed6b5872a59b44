// The int8 decode GEMV (opt-in, lower_quant.INT8_DECODE): out[r, n] = x8[r, :] . w[n, :] for
// the MR x rows of a batched decode step, x8 = x quantized to int8 per 32 values by
// quant/qx8.wgsl (llama.cpp's q8_1), w a Q4_K or Q6_K weight as stored; then SWIGLU
// (out = silu(x8 . w) * (x8 . w2), w2 the up projection of the same format) and RES
// (+ res[r, n]). The products are dot4I8Packed of the weight's quants (Q6_K's made signed)
// with x's int8s, exact in i32 within a 16- or 32-value piece; each piece's sum is then
// scaled by the weight's (sub-)block scale and x's block scale in f32, and Q4_K's min term
// comes from qx8's per-16 sums. The numpy rule: quant.int8_decode_reference.
// bindings: 0 xq (MR, K / 16) vec4<u32>, 1 xs (MR, K / 16) vec2<f32>, 2 w, 3 w2 (SWIGLU, else
// a dummy), 4 res (MR, N) (RES), 5 out (MR, N), 6 params. w / w2 as {{W}}: Q4_K as vec4<u32>
// (144-byte blocks, 9 vec4), Q6_K as u32 words (210-byte blocks: 2-byte aligned, read by
// funnel shifts; nw words: no read past the last).
// grid (ceil(N / (256 / TPR)), 1, 1): a workgroup 256 threads, TPR of them a weight row (256 /
// TPR rows), each thread the pieces j, j + TPR, ... of its row for all MR x rows (a weight
// word is decoded once for every row); the TPR partial sums of each (row, x row) meet in
// workgroup memory.
// Why (H200, natively, bench/probes/qgemv_i8_staged_probe.py, 8 rows, Q4_K, us): the f32
// GEMVs at 8 rows cost 2.5-3x their 1-row time (gate+up 77.6 against 29.4, down 65.2 against
// 19.0, head 538 against 216: production's best variants, qgemv_variants_probe.py in the same
// call), bound by the instructions per weight each x row adds (an f32 x load and FMA a value
// and row). Here a row adds a quarter of the x bytes and one instruction per 4 products: gate+up
// 41.2 us (tpr 8), down 33.0 (tpr 32), head 258 (tpr 8). Tried in the probe: x staged once a
// workgroup in workgroup memory (gate+up 36.2 with 64 weight rows a workgroup, but the head
// 280 and down 28-84 by shape), x quantized in each workgroup's prologue (slower: 52.6).
// The cost: x rounded to 8 bits, ~5e-3 x max|y| a product (the probe's vs_f32_x), which is why
// it is opt-in.
struct Params { N: u32, K: u32, nw: u32 }
@group(0) @binding(0) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> xs: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> w: array<{{W}}>;
@group(0) @binding(3) var<storage, read_write> w2: array<{{W}}>;
@group(0) @binding(4) var<storage, read_write> res: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

override FMT: u32 = 12u;            // 12 Q4_K, 14 Q6_K (compiler: format_overrides)
override QK: u32 = 256u;
override QBYTES: u32 = 144u;
override OWN: bool = false;
override TPR: u32 = 8u;             // threads a weight row: 4, 8, 16 or 32
override SWIGLU: bool = false;
override RES: bool = false;
const MR: u32 = {{MR}}u;            // x rows
var<workgroup> red: array<f32, 256 * MR>;     // partial sums: (x row, thread)

{{WORDS}}

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

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
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

// this thread's partial dots of weight row n (w, or w2 when second) with every x row
fn row_dots(n: u32, j: u32, second: bool) -> array<f32, MR> {
    var acc: array<f32, MR>;
    for (var r = 0u; r < MR; r++) { acc[r] = 0.0; }
    let nb = p.K / 256u;
    if (FMT == 12u) {
        for (var c = j; c < nb * 8u; c += TPR) { q4k_piece(n, nb, c / 8u, c % 8u, second, &acc); }
    } else {
        for (var c = j; c < nb * 4u; c += TPR) { q6k_piece(n, nb, c / 4u, c % 4u, second, &acc); }
    }
    return acc;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let rpw = 256u / TPR;                          // weight rows a workgroup
    let j = lid % TPR;
    let n0 = wid.x * rpw;
    let n = min(n0 + lid / TPR, p.N - 1u);         // (rows past N compute and are dropped)
    let a = row_dots(n, j, false);
    for (var r = 0u; r < MR; r++) { red[r * 256u + lid] = a[r]; }
    workgroupBarrier();
    // outputs (weight row, x row): o = i MR + r for i < rpw; 2 a thread at most (MR <= 15)
    var first: array<f32, 2>;
    for (var t = 0u; t < 2u; t++) {
        let o = lid + 256u * t;
        let i = min(o / MR, rpw - 1u);
        let r = o % MR;
        var v = 0.0;
        for (var q = 0u; q < TPR; q++) { v += red[r * 256u + i * TPR + q]; }
        first[t] = v;
    }
    if (SWIGLU) {                                  // (uniform: an override)
        let b = row_dots(n, j, true);
        workgroupBarrier();
        for (var r = 0u; r < MR; r++) { red[r * 256u + lid] = b[r]; }
        workgroupBarrier();
    }
    for (var t = 0u; t < 2u; t++) {
        let o = lid + 256u * t;
        let i = o / MR;
        let r = o % MR;
        let nn = n0 + i;
        if (i >= rpw || nn >= p.N) { continue; }
        var v = first[t];
        if (SWIGLU) {
            var u = 0.0;
            for (var q = 0u; q < TPR; q++) { u += red[r * 256u + i * TPR + q]; }
            v = silu(v) * u;
        }
        if (RES) { v += res[r * p.N + nn]; }
        out[r * p.N + nn] = v;
    }
}
