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
// Limits: workgroup memory, 29.8 KB (29828 bytes) at every head dim (the lowering checks the
// adapter's limit, else attn_prefill or attn_decode run); D % 4 == 0, D <= 256. Keys split
// across workgroups in run-time chunks of `gran` (a multiple of BK) as attn_decode, merged by
// attn_combine (`direct` when nsplit == 1).
// Head dims past 64 (Phi-3 96, Qwen3 / Llama-3 / Mistral 128, Gemma 256): the tiles stay the
// ones above and the head dim is walked in CW-vec4 chunks (CW = DV4 / ceil(DV4 / 16): D 96
// -> 2 x 12, 128 -> 2 x 16, 256 -> 4 x 16): per key tile and chunk, Q and K chunks are staged
// and the 2 x 4 scores accumulate; then per chunk V is staged and acc[chunk][4] (16 vec4 at
// D 256, in registers) gains p V, p recomputed per chunk (one exp per 4 x CW FMAs). Costs
// against D <= 64: Q is re-read from global memory per key tile (1.5x the loads) and 4 barriers
// a chunk. At D <= 64 (CW >= DV4: one chunk) the code is the old one: Q staged once, K and V
// staged together, 2 barriers a tile.
// Measured past 64 on lavapipe only (not this kernel's adapter: CPU adapters run attn_prefill),
// S 512 (bench/probes/prefill_attention_probe.py --d D --s 512, CPU-ms): D 128 (32 / 8 heads)
// 1841 against attn_decode's 3255; D 256 (16 / 8) 1509 against 4692. On an H200 (same probe,
// us) the chunked form LOST to attn_prefill: D 128 S 512 810 vs 338, S 2048 10753 vs 3888; D
// 256 S 2048 11632 vs 5582 (attn_decode 11156 / 19717). So GPUs run attn_flash up to D 64 only
// (lower_decoder.FLASH_MAX_D); past it the chunked path runs only when forced (tests, probes).
// Tried (on paper, by bytes): whole rows with fewer keys a tile: Q and K rows of 33 vec4 at
// D 128 alone take 33.8 KB for 32 items x 32 keys (54 KB with V and P), past 32 KB (lavapipe,
// most browsers) even at 16 keys, and 256 would need 8-key tiles (a 2 x 1 register tile).
// Next to try where 48 KB are allowed (H100): Q staged whole once (37.8 KB at D 128).
// The loops that index acc or s0 / s1 by their variable are marked `// @unroll`
// (webrlx/wgsl_unroll.py; the chunk loops run over 4 chunks, those past nch doing nothing):
// under Tint's robustness a non-constant index is clamped, and the driver then keeps the whole
// array in local memory.
// bindings: 0 q (B, S, H, D), 1 kc, 2 vc (B, Hkv, T, D), 3 pos (i32, [1]),
// 4 dst: out (B, S, H, D) when direct, else partials [B, Hkv, nsplit, S*G, D4 + 1] vec4
// (acc..., (m, l, 0, 0)), 5 params. grid: (nsplit, item tiles * Hkv, B).
{{KV_ATTENTION_IO}}

override DV4: u32 = 16u;                        // D / 4 (<= 64): constant loop bounds unroll
override CW: u32 = 16u;                         // head-dim chunk, vec4 (<= 16; >= DV4: one)
const WG: u32 = 128u;
const BI: u32 = 32u;                            // items per workgroup
const BK: u32 = 32u;                            // keys per tile
const RS: u32 = 17u;                            // row stride of Qs / Ks, vec4
const PS: u32 = 33u;                            // row stride of P, floats
const NEG: f32 = -3.4028234663852886e38;
// Two-level arrays, not flat ones, for Tint's robustness (on in Chrome): it clamps every index
// into workgroup memory. Indexed [row][column], the row's clamp (the thread's item or key) is
// the same on every pass of the inner loops, which are unrolled, so the clamps leave them
// (flat, `Ks[(tk + 8) * RS + d4]` took a clamp a load: the kernel ran 6.2 ms of the 1B-shaped
// prefill under Dawn, 2.5 with robustness off, 2.4 natively).
var<workgroup> Qs: array<array<vec4<f32>, RS>, BI>;  // [item][d4], pre-scaled (a chunk)
var<workgroup> Ks: array<array<vec4<f32>, RS>, BK>;  // [key][d4] (a chunk)
var<workgroup> Vs: array<array<vec4<f32>, 16>, BK>;  // [key][d4] (a chunk): quarter qd reads
                                                     // 4 c + qd
var<workgroup> P: array<array<f32, PS>, BI>;         // [item][key]: scores of the tile
var<workgroup> wpos: i32;

// Qs <- head-dim columns d0 .. d0 + w of items i0 .. i0 + BI, pre-scaled (zero past the last)
fn stage_q(t: u32, b: u32, hk: u32, i0: u32, d0: u32, w: u32) {
    let RI = p.S * p.G;
    for (var e = t; e < BI * w; e += WG) {
        let ii = e / w;
        let i = i0 + ii;
        var v = vec4<f32>(0.0);
        if (i < RI) {
            let h = item_head(hk, i);
            v = q[((b * p.S + i / p.G) * p.H + h) * DV4 + d0 + e % w] * p.scale;
        }
        Qs[ii][e % w] = v;
    }
}

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
    let wide = DV4 > CW;                        // (per pipeline) head-dim chunks restaged
    let nch = (DV4 + CW - 1u) / CW;

    if (!wide) { stage_q(t, b, hk, i0, 0u, DV4); }
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
    var acc: array<vec4<f32>, 16>;              // [chunk][4]: column chunk * CW + 4 c + qd

    for (var t0 = k0; t0 < k1; t0 += BK) {
        let n = min(BK, k1 - t0);
        // scores: 2 items x 4 keys a thread, over the head-dim chunks
        var s0 = vec4<f32>(0.0);                // item 2 ti, keys tk + 8 c in c = x..w
        var s1 = vec4<f32>(0.0);
        for (var d0 = 0u; d0 < DV4; d0 += CW) {
            let w = min(CW, DV4 - d0);
            if (wide) { stage_q(t, b, hk, i0, d0, w); }
            for (var e = t; e < BK * w; e += WG) {
                let j = e / w;
                let d4 = e % w;
                var kk = vec4<f32>(0.0);
                var vv = vec4<f32>(0.0);
                if (j < n) {
                    kk = kc[kbase + (t0 + j) * DV4 + d0 + d4];
                    if (!wide) { vv = vc[kbase + (t0 + j) * DV4 + d4]; }
                }
                Ks[j][d4] = kk;
                if (!wide) { Vs[j][d4] = vv; }
            }
            workgroupBarrier();
            for (var d4 = 0u; d4 < w; d4++) {
                let q0 = Qs[2u * ti][d4];
                let q1 = Qs[2u * ti + 1u][d4];
                let kx = Ks[tk][d4];
                let ky = Ks[tk + 8u][d4];
                let kz = Ks[tk + 16u][d4];
                let kw = Ks[tk + 24u][d4];
                s0 += vec4<f32>(dot(q0, kx), dot(q0, ky), dot(q0, kz), dot(q0, kw));
                s1 += vec4<f32>(dot(q1, kx), dot(q1, ky), dot(q1, kz), dot(q1, kw));
            }
            if (wide) { workgroupBarrier(); }   // (Qs / Ks are restaged next chunk)
        }
        // @unroll
        for (var cc = 0u; cc < 4u; cc++) {
            let j = tk + 8u * cc;
            P[2u * ti][j] = select(NEG, capped(s0[cc]), t0 + j < end0 && t0 + j >= start0);
            P[2u * ti + 1u][j] = select(NEG, capped(s1[cc]), t0 + j < end1 &&
                                        t0 + j >= start1);
        }
        workgroupBarrier();
        // online softmax of row ui over the tile, and acc += p V, a V chunk at a time
        var mt = NEG;
        for (var j = 0u; j < BK; j++) { mt = max(mt, P[ui][j]); }
        let live = mt > NEG;                    // some key of this tile is the item's
        let mn = max(m, mt);
        if (live) {
            let corr = exp(m - mn);             // 0 on the first tile (m = NEG)
            l *= corr;
            // @unroll
            for (var x = 0u; x < 16u; x++) { if (x < 4u * nch) { acc[x] *= corr; } }
            m = mn;
        }
        // @unroll
        for (var ch = 0u; ch < 4u; ch++) {     // (nch = ceil(DV4 / 16) <= 4: DV4 <= 64)
            if (ch < nch) {
            let d0 = ch * CW;
            if (wide) {
                let w = min(CW, DV4 - d0);
                workgroupBarrier();             // (readers of the last chunk are done)
                for (var e = t; e < BK * w; e += WG) {
                    let j = e / w;
                    var vv = vec4<f32>(0.0);
                    if (j < n) { vv = vc[kbase + (t0 + j) * DV4 + d0 + e % w]; }
                    Vs[j][e % w] = vv;
                }
                workgroupBarrier();
            }
            if (live) {
                for (var j = 0u; j < BK; j++) {
                    let pj = exp(P[ui][j] - mn);  // 0 where masked (NEG - mn)
                    if (ch == 0u) { l += pj; }
                    acc[4u * ch] += pj * Vs[j][qd];
                    acc[4u * ch + 1u] += pj * Vs[j][qd + 4u];
                    acc[4u * ch + 2u] += pj * Vs[j][qd + 8u];
                    acc[4u * ch + 3u] += pj * Vs[j][qd + 12u];
                }
            }
            }
        }
        workgroupBarrier();                     // (the tiles and P are rewritten next)
    }
    let i = i0 + ui;
    if (i >= RI) { return; }
    let s = i / p.G;
    let h = item_head(hk, i);
    let inv = select(1.0 / l, 0.0, l == 0.0);
    let ob = ((b * p.S + s) * p.H + h) * DV4;
    let row = (((b * p.Hkv + hk) * p.nsplit + c) * RI + i) * (DV4 + 1u);
    // @unroll
    for (var x = 0u; x < 16u; x++) {
        let d4 = (x / 4u) * CW + 4u * (x % 4u) + qd;
        if (x < 4u * nch && 4u * (x % 4u) + qd < CW && d4 < DV4) {
            if (p.direct != 0u) { dst[ob + d4] = acc[x] * inv; } else { dst[row + d4] = acc[x]; }
        }
    }
    if (p.direct == 0u && qd == 0u) { dst[row + DV4] = vec4<f32>(m, l, 0.0, 0.0); }
}
