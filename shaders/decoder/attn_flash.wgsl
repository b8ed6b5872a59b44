// cached_attention, prefill form for GPUs: flash attention over tiles of BI (row, head) items
// x BK keys. Same contract as decoder/attn_prefill.wgsl (bindings, params, grid, partials for
// attn_combine): out[b, s, h, :] = softmax_k(q[b,s,h,:] . K[b,hk,k,:] * scale) @ V[b,hk],
// hk = h / G, over the keys k < min(T, pos + s + 1); items i = s * G + g of one kv head.
// Per key tile, two phases with the tiles in workgroup memory:
//   scores: thread t (ti = t / 8, tk = t % 8) takes items 2 ti, 2 ti + 1 x keys tk + 8 c
//           (c < 4): 8 dots over the head dim, masked (causal, tile ends), into P;
//   update: thread t (item t / 4, quarter qd = t % 4) owns the output vec4s qd + 4 c of its
//           item: online softmax over the tile's 32 scores of its row (a running max m and
//           sum l, rescaled when the max grows), then acc += p_j * V[j].
// Why: attn_prefill's one-item-per-thread-group form runs each key's q.k as one long chain
// per thread, and at SmolLM2's shapes (9 heads / 3 kv heads, D 64) took 63 us at S = 128 and
// 310 us at 512 on an H100 (~1 TFLOP/s), whatever its SPLIT or chunking
// (bench/probes/prefill_attention_probe.py). Here both phases are small register-tiled matmuls over
// workgroup memory with every read broadcast or conflict-free: Q and K rows are padded to 17
// vec4 (8 rows read at once land on distinct banks), P rows to 33 floats, and V is read so the
// 4 quarters of an item read 4 consecutive vec4 (a thread owns d4 = 4 c + qd).
// Measured (H100, bench/probes/prefill_attention_probe.py, SmolLM2's heads, us with the combine):
// S 128: 24.5 (attn_prefill 63-73); 512: 99 (286-318); 2048: 959-1034 (2830-4067), ~5
// TFLOP/s at 2048: the scores phase reads 6 vec4 from workgroup memory per 8 dot4s; a larger
// register tile (4 items x 4 keys) is the next thing to try. Fewer key chunks (one, no
// combine) was slower at 128 (31 us): 36 workgroups.
// Limits: workgroup memory 29.8 KB (the lowering checks the adapter's limit); D % 4 == 0,
// D <= 64; keys split across workgroups in run-time chunks of `gran` (a multiple of BK) as
// attn_decode, merged by attn_combine (`direct` when nsplit == 1).
// bindings: 0 q (B, S, H, D), 1 kc, 2 vc (B, Hkv, T, D), 3 pos (i32, [1]),
// 4 dst: out (B, S, H, D) when direct, else partials [B, Hkv, nsplit, S*G, D4 + 1] vec4
// (acc..., (m, l, 0, 0)), 5 params. grid: (nsplit, item tiles * Hkv, B).
{{KV_ATTENTION_IO}}

override DV4: u32 = 16u;                        // D / 4 (<= 16): constant loop bounds unroll
const WG: u32 = 128u;
const BI: u32 = 32u;                            // items per workgroup
const BK: u32 = 32u;                            // keys per tile
const RS: u32 = 17u;                            // row stride of Qs / Ks, vec4
const PS: u32 = 33u;                            // row stride of P, floats
const NEG: f32 = -3.4028234663852886e38;
var<workgroup> Qs: array<vec4<f32>, 544>;       // [item][RS], pre-scaled
var<workgroup> Ks: array<vec4<f32>, 544>;       // [key][RS]
var<workgroup> Vs: array<vec4<f32>, 512>;       // [key][16]: quarter qd reads d4 = 4 c + qd
var<workgroup> P: array<f32, 1056>;             // [item][PS]: scores of the tile
var<workgroup> wpos: i32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    if (t == 0u) { wpos = max(row_pos(wid.z), 0); }
    let p0 = u32(workgroupUniformLoad(&wpos));
    let c = wid.x;
    let it = wid.y / p.Hkv;
    let hk = wid.y % p.Hkv;
    let b = wid.z;
    let RI = p.S * p.G;                         // items of a kv head
    let i0 = it * BI;
    let L = valid_keys(p0);
    let cl = chunk_len(L);
    if (c * cl >= L) { return; }                // (uniform: the workgroup's chunk)
    let s_last = (min(i0 + BI, RI) - 1u) / p.G;
    let k0 = c * cl;
    let k1 = min(min(k0 + cl, L), p0 + s_last + 1u);
    let kbase = (row_slot(b) * p.Hkv + hk) * p.T * DV4;

    // the Q tile, pre-scaled (zero past the last item)
    for (var e = t; e < BI * DV4; e += WG) {
        let ii = e / DV4;
        let i = i0 + ii;
        var v = vec4<f32>(0.0);
        if (i < RI) {
            let h = item_head(hk, i);
            v = q[((b * p.S + i / p.G) * p.H + h) * DV4 + e % DV4] * p.scale;
        }
        Qs[ii * RS + e % DV4] = v;
    }
    // scores-phase roles
    let ti = t / 8u;
    let tk = t % 8u;
    var end0 = 0u;                              // causal ends of items 2 ti, 2 ti + 1
    var end1 = 0u;
    if (i0 + 2u * ti < RI) { end0 = min(k1, p0 + (i0 + 2u * ti) / p.G + 1u); }
    if (i0 + 2u * ti + 1u < RI) { end1 = min(k1, p0 + (i0 + 2u * ti + 1u) / p.G + 1u); }
    let start0 = key_start(p0 + (i0 + 2u * ti) / p.G);     // sliding-window starts
    let start1 = key_start(p0 + (i0 + 2u * ti + 1u) / p.G);
    // update-phase roles
    let ui = t / 4u;
    let qd = t % 4u;
    var m = NEG;
    var l = 0.0;
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);

    for (var t0 = k0; t0 < k1; t0 += BK) {
        let n = min(BK, k1 - t0);
        for (var e = t; e < BK * DV4; e += WG) {
            let j = e / DV4;
            let d4 = e % DV4;
            var kk = vec4<f32>(0.0);
            var vv = vec4<f32>(0.0);
            if (j < n) {
                kk = kc[kbase + (t0 + j) * DV4 + d4];
                vv = vc[kbase + (t0 + j) * DV4 + d4];
            }
            Ks[j * RS + d4] = kk;
            Vs[j * 16u + d4] = vv;
        }
        workgroupBarrier();
        // scores: 2 items x 4 keys a thread
        var s0 = vec4<f32>(0.0);                // item 2 ti, keys tk + 8 c in c = x..w
        var s1 = vec4<f32>(0.0);
        for (var d4 = 0u; d4 < DV4; d4++) {
            let q0 = Qs[(2u * ti) * RS + d4];
            let q1 = Qs[(2u * ti + 1u) * RS + d4];
            let kx = Ks[tk * RS + d4];
            let ky = Ks[(tk + 8u) * RS + d4];
            let kz = Ks[(tk + 16u) * RS + d4];
            let kw = Ks[(tk + 24u) * RS + d4];
            s0 += vec4<f32>(dot(q0, kx), dot(q0, ky), dot(q0, kz), dot(q0, kw));
            s1 += vec4<f32>(dot(q1, kx), dot(q1, ky), dot(q1, kz), dot(q1, kw));
        }
        for (var cc = 0u; cc < 4u; cc++) {
            let j = tk + 8u * cc;
            P[(2u * ti) * PS + j] = select(NEG, capped(s0[cc]), t0 + j < end0 &&
                                           t0 + j >= start0);
            P[(2u * ti + 1u) * PS + j] = select(NEG, capped(s1[cc]), t0 + j < end1 &&
                                               t0 + j >= start1);
        }
        workgroupBarrier();
        // online softmax of row ui over the tile, and acc += p V
        var mt = NEG;
        for (var j = 0u; j < BK; j++) { mt = max(mt, P[ui * PS + j]); }
        if (mt > NEG) {                         // some key of this tile is the item's
            let mn = max(m, mt);
            let corr = exp(m - mn);             // 0 on the first tile (m = NEG)
            l *= corr;
            a0 *= corr;
            a1 *= corr;
            a2 *= corr;
            a3 *= corr;
            m = mn;
            for (var j = 0u; j < BK; j++) {
                let pj = exp(P[ui * PS + j] - mn);  // 0 where masked (NEG - mn)
                l += pj;
                let vb = j * 16u + qd;
                a0 += pj * Vs[vb];
                a1 += pj * Vs[vb + 4u];
                a2 += pj * Vs[vb + 8u];
                a3 += pj * Vs[vb + 12u];
            }
        }
        workgroupBarrier();                     // (the tiles and P are rewritten next)
    }
    let i = i0 + ui;
    if (i >= RI) { return; }
    let s = i / p.G;
    let h = item_head(hk, i);
    let acc = array<vec4<f32>, 4>(a0, a1, a2, a3);
    if (p.direct != 0u) {
        let inv = select(1.0 / l, 0.0, l == 0.0);
        let ob = ((b * p.S + s) * p.H + h) * DV4;
        for (var cc = 0u; cc < 4u; cc++) {
            let d4 = 4u * cc + qd;
            if (d4 < DV4) { dst[ob + d4] = acc[cc] * inv; }
        }
    } else {
        let row = (((b * p.Hkv + hk) * p.nsplit + c) * RI + i) * (DV4 + 1u);
        for (var cc = 0u; cc < 4u; cc++) {
            let d4 = 4u * cc + qd;
            if (d4 < DV4) { dst[row + d4] = acc[cc]; }
        }
        if (qd == 0u) { dst[row + DV4] = vec4<f32>(m, l, 0.0, 0.0); }
    }
}
