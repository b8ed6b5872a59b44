// cached_attention, prefill form: many query rows per kv head (a prompt of S rows).
// out[b, s, h, :] = softmax_k(q[b,s,h,:] . K[b,hk,k,:] * scale) @ V[b,hk], hk = h / G, over the
// keys k < min(T, pos + s + 1) (causal; pos from its buffer, T only the capacity).
//
// Items i = s * G + g (row s, query head g of the G sharing kv head hk) in tiles of
// BQ = WG / (SPLIT * DS) per workgroup, so each K/V tile staged in workgroup memory serves G
// heads and BQ / G rows. SPLIT threads per item each take every SPLIT-th key of a tile and keep q
// (pre-scaled), a running max / sum and the output row in registers (online softmax,
// rescaling only when the max grows); the SPLIT partial states merge at the end. The key
// range is the causal one of the tile's last row, cut into the same run-time chunks as
// attn_decode (`nsplit` > 1 adds workgroups when few item tiles run, merged by
// attn_combine; `direct` writes the normalized output when nsplit == 1).
// Head dims past 64: DS = 2 (D <= 128) or 4 (D <= 256) threads share an item, each holding
// the columns ds + DS * cc (<= 16 vec4 of q and of acc, as at 64), and keys come in tiles of
// KT = 16 (D <= 132) or 8. Per tile each thread writes its partial q.k of every key it takes
// into Sx; after a barrier each of the DS threads sums the DS partials of a key (in the same
// order: identical m and l) and runs the online softmax and p.v on its columns. DS = 1 (D <=
// 64) leaves that phase out: the old fused loop, 32-key tiles, the same constants.
// Limits: the q.k and p.v FMAs out of workgroup memory; 16 vec4 of q and of acc per thread
// (so D4 / DS <= 16), D % 4 == 0, D <= 256. Workgroup bytes (the lowering checks them against
// the adapter's limit, else attn_decode runs): 17928 at D <= 64 (K/V tiles 2 x 544 vec4,
// m / l 512, Sx 4, pos 4); 22020 at 68..132 (Sx 16 keys x 64 threads); 19972 at 136..256 (Sx
// 8 x 64). So not on a 16 KB adapter. Causal tiles: a workgroup stops at its last row's key,
// so early item tiles do less work. On lavapipe a 512-row prompt (9 heads, D 64) takes ~185
// CPU-ms, the generic `attention` (two matmuls around a masked softmax) ~240.
// Tried: only this layout (attention_rows' one-row-per-thread flash form with GQA items and
// run-time key ranges); the decode kernel's layout keeps per-workgroup state per item and is
// used below PREFILL_FROM_ITEMS items.
// Past 64 on lavapipe (bench/probes/prefill_attention_probe.py --d D --s 512, CPU-ms): D 128
// (32 / 8 heads) 1178 against attn_decode's 3255; D 256 (16 / 8) 1350 against 4692; D 64 (9 / 3)
// 136 against 390. One row at pos 500: D 128 15.0 against 18.6, D 256 13.3 against 24.9, so
// CPU adapters run this kernel for any S at every D. Tried: DS = 1 with 32-vec4 q / acc arrays
// at D 128 (lavapipe, S 256): 336 ms against DS = 2's 425 (the exchange, a barrier a tile and
// DS reads a key, costs ~20% there; DS = 2 forced at D 64: 60 against 44); not taken: 64 vec4
// of registers a thread on GPUs, and the SPLIT merge would need twice the scratch.
// bindings: 0 q (B, S, H, D), 1 kc, 2 vc (B, Hkv, T, D), 3 pos (i32, [1]),
// 4 dst: out (B, S, H, D) when direct, else partials [B, Hkv, nsplit, S*G, D4 + 1] vec4
// (acc..., (m, l, 0, 0)), 5 params. grid: (nsplit, item tiles * Hkv, B).
{{KV_ATTENTION_IO}}

override SPLIT: u32 = 1u;                       // key parts per item: 1, 2, 4 or 8
override DS: u32 = 1u;                          // head-dim slices per item: 1, 2 or 4
override DV4: u32 = 16u;                        // D / 4: constant loop bounds unroll
override KT: u32 = 32u;                         // keys per tile: KT x ROW <= TILE
const WG: u32 = 64u;
const D4M: u32 = 16u;                           // q / acc vec4 a thread holds: DV4 / DS <= 16
// Rows of the K/V tiles are ROW = max(D4M, DV4) + PAD vec4 apart. PAD 1: the SPLIT threads of
// an item read SPLIT different key rows at once; 16 vec4 apart they all hit the same 4 banks
// (an 8-way conflict at SPLIT 8), 17 apart they spread over all 32 banks.
override PAD: u32 = 1u;
const TILE: u32 = 544u;                         // KT x ROW; 64 x (D4M + 1) for the merge
override SX: u32 = select(1u, KT * WG, DS > 1u);    // partial scores of a tile (DS > 1)
const NEG: f32 = -3.4028234663852886e38;
var<workgroup> Ks: array<vec4<f32>, TILE>;      // [KT][ROW]
var<workgroup> Vs: array<vec4<f32>, TILE>;
var<workgroup> ms: array<f32, 64>;              // partial running max / sum per thread
var<workgroup> ls: array<f32, 64>;
var<workgroup> Sx: array<f32, SX>;              // [key][thread]: partial q.k of its columns
var<workgroup> wpos: i32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) { wpos = max(row_pos(wid.z), 0); }
    let p0 = u32(workgroupUniformLoad(&wpos));
    let c = wid.x;
    let it = wid.y / p.Hkv;
    let hk = wid.y % p.Hkv;
    let b = wid.z;
    let BQ = WG / (SPLIT * DS);
    let ROW = max(D4M, DV4) + PAD;
    let NC = (DV4 + DS - 1u) / DS;                  // columns ds + DS * cc of a thread
    let RI = p.S * p.G;
    let i = it * BQ + lid / (SPLIT * DS);           // this thread's item
    let part = (lid / DS) % SPLIT;
    let ds = lid % DS;
    let L = valid_keys(p0);
    let cl = chunk_len(L);
    if (c * cl >= L) { return; }
    let s_last = (min(it * BQ + BQ, RI) - 1u) / p.G;
    let k0 = c * cl;
    let k1 = min(min(k0 + cl, L), p0 + s_last + 1u);
    let kbase = (row_slot(b) * p.Hkv + hk) * p.T * DV4;
    let s = i / p.G;
    let h = item_head(hk, i);
    let my_end = min(k1, p0 + s + 1u);
    let my_start = key_start(p0 + s);
    var qr: array<vec4<f32>, D4M>;
    var acc: array<vec4<f32>, D4M>;
    var m = NEG;
    var l = 0.0;
    if (i < RI) {
        let qb = ((b * p.S + s) * p.H + h) * DV4;
        for (var cc = 0u; cc < NC; cc++) {
            if (ds + DS * cc < DV4) { qr[cc] = q[qb + ds + DS * cc] * p.scale; }
        }
    }
    for (var t0 = k0; t0 < k1; t0 += KT) {
        let n = min(KT, k1 - t0);
        for (var e = lid; e < KT * DV4; e += WG) {
            let j = e / DV4;
            var kk = vec4<f32>(0.0);
            var vv = vec4<f32>(0.0);
            if (j < n) {
                kk = kc[kbase + (t0 + j) * DV4 + e % DV4];
                vv = vc[kbase + (t0 + j) * DV4 + e % DV4];
            }
            Ks[j * ROW + e % DV4] = kk;
            Vs[j * ROW + e % DV4] = vv;
        }
        workgroupBarrier();
        if (DS > 1u) {                              // partial dots over this slice's columns
            if (i < RI) {
                for (var j = part; j < n && t0 + j < my_end; j += SPLIT) {
                    var dot = vec4<f32>(0.0);
                    for (var cc = 0u; cc < NC; cc++) {
                        let d4 = ds + DS * cc;
                        if (d4 < DV4) { dot += qr[cc] * Ks[j * ROW + d4]; }
                    }
                    Sx[j * WG + lid] = dot.x + dot.y + dot.z + dot.w;
                }
            }
            workgroupBarrier();
        }
        if (i < RI) {
            for (var j = part; j < n && t0 + j < my_end; j += SPLIT) {
                if (t0 + j < my_start) { continue; }        // before the sliding window
                var sj = 0.0;
                if (DS == 1u) {
                    var dot = vec4<f32>(0.0);
                    for (var cc = 0u; cc < DV4; cc++) { dot += qr[cc] * Ks[j * ROW + cc]; }
                    sj = dot.x + dot.y + dot.z + dot.w;
                } else {                                    // the same sum in each slice
                    for (var x = 0u; x < DS; x++) { sj += Sx[j * WG + lid - ds + x]; }
                }
                sj = capped(sj);
                if (sj > m) {
                    let corr = exp(m - sj);
                    l *= corr;
                    for (var cc = 0u; cc < NC; cc++) { acc[cc] *= corr; }
                    m = sj;
                }
                let pj = exp(sj - m);
                l += pj;
                for (var cc = 0u; cc < NC; cc++) {
                    let d4 = ds + DS * cc;
                    if (d4 < DV4) { acc[cc] += pj * Vs[j * ROW + d4]; }
                }
            }
        }
        workgroupBarrier();
    }
    // merge the SPLIT partial states of each (item, slice) (K/V tiles are reused as scratch)
    ms[lid] = m;
    ls[lid] = l;
    for (var cc = 0u; cc < NC; cc++) {
        let e = lid * (D4M + PAD) + cc;              // 64 threads x (D4M + PAD): Ks then Vs
        if (e < TILE) { Ks[e] = acc[cc]; } else { Vs[e - TILE] = acc[cc]; }
    }
    workgroupBarrier();
    if (i < RI && part == 0u) {
        var mm = ms[lid];
        for (var t = 1u; t < SPLIT; t++) { mm = max(mm, ms[lid + t * DS]); }
        var w: array<f32, 8>;
        var lt = 0.0;
        for (var t = 0u; t < SPLIT; t++) {
            w[t] = exp(ms[lid + t * DS] - mm);
            lt += ls[lid + t * DS] * w[t];
        }
        let inv = select(1.0 / lt, 0.0, lt == 0.0);
        let row = (((b * p.Hkv + hk) * p.nsplit + c) * RI + i) * (DV4 + 1u);
        let ob = ((b * p.S + s) * p.H + h) * DV4;
        for (var cc = 0u; cc < NC; cc++) {
            var o = vec4<f32>(0.0);
            for (var t = 0u; t < SPLIT; t++) {
                let e = (lid + t * DS) * (D4M + PAD) + cc;
                let a = select(Vs[max(e, TILE) - TILE], Ks[min(e, TILE - 1u)], e < TILE);
                o += a * w[t];
            }
            let d4 = ds + DS * cc;
            if (d4 >= DV4) { continue; }
            if (p.direct != 0u) { dst[ob + d4] = o * inv; } else { dst[row + d4] = o; }
        }
        if (p.direct == 0u && ds == 0u) { dst[row + DV4] = vec4<f32>(mm, lt, 0.0, 0.0); }
    }
}
