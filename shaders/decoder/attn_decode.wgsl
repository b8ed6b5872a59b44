// cached_attention, decode form (flash-decoding): few query rows per kv head.
// out[b, s, h, :] = softmax_k(q[b,s,h,:] . K[b,hk,k,:] * scale) @ V[b,hk], hk = h / G, over the
// keys k < min(T, pos + s + 1); pos is read from its buffer, T is only the capacity.
//
// Work split: one workgroup per (key chunk c, item tile, kv head hk, batch b). An item is a
// (row s, query head g) pair sharing kv head hk, i = s * G + g, so the K/V rows of a chunk
// are read ONCE for the G heads (GQA) and the S rows of a tile. The chunk length follows the
// valid length L = min(T, pos + S) at run time: ceil(L / nsplit) rounded up to `gran` keys,
// so the work is proportional to L; workgroups past the last chunk return at once. A
// workgroup walks its chunk in tiles of KT keys and writes per item a partial (acc[D]
// unnormalized, running max m, sum l), which attn_combine merges (with one chunk, `direct`:
// the normalized output).
//
// Per tile (4 barriers): the K tile is staged in workgroup memory, transposed and padded
// (coalesced global loads; conflict-free reads below); thread (key j, item group) scores key
// j for its items against q (pre-scaled, in workgroup memory) -> P, while the tile's V rows
// load into registers; V is then staged where K was. Thread (item r, key part kp, vec4
// column) runs an online softmax over the keys kp, kp + KP, .. of the tile (the max is
// rescaled only when it grows) and accumulates p * V[j] from workgroup memory. KP key
// parts keep all threads busy when few items run (decode: G of them); the parts merge once
// at the end. All the state of a thread is one (m, l, acc): no register arrays.
// Limits: memory traffic (K and V once per chunk); at short lengths, launch and the combine.
// D % 4 == 0, D <= 256: KT = 32 / 16 / 8 keys for D <= 64 / 128 / 256 keep the padded K
// tile D4 * (KT + 1) <= 576 vec4 (9 KB; 14.3 KB of workgroup memory in all). At D = 256 a
// workgroup holds RW = 2 items (RW * D4 <= WG); Gemma 2/3 use head dim 256.
// Measured on lavapipe only (no discrete GPU here); at pos 2000 (SmolLM2 shapes) ~12 CPU-ms,
// about what the gemv takes per byte there: lane-varying loads bound it, not math.
// H100 (SmolLM2 decode, 30 layers): reading V from global memory inside the p.v loop (a load
// latency per key, in a loop with a data-dependent branch) took 24.7 us a layer; V staged
// through registers into workgroup memory: see the SmolLM2 issue's note for the figure.
// Tried: (1) threads owning a column for RMAX items with register arrays m[], l[], acc[] and
// a tile max taken by every thread from P: the max pass and the dynamically indexed arrays
// cost ~30% more on lavapipe; (2) no K staging (each thread reads its key row from global):
// the same on lavapipe, uncoalesced on GPUs; (3) a separate max pass before the exp loop
// instead of the per-key rescale: no faster; (4) 256 workgroups on lavapipe: the early-exit
// workgroups alone cost ~2 ms, hence few chunks on CPU adapters; (5) attn_prefill with 8
// threads per row is ~20% faster than this kernel on lavapipe even for one row, so CPU
// adapters use that one (the lowering); this layout is for GPUs, where it keeps 128 threads
// busy on 3 rows instead of 24.
// bindings: 0 q (B, S, H, D), 1 kc, 2 vc (B, Hkv, T, D), 3 pos (i32, [1]),
// 4 dst: out (B, S, H, D) when direct, else partials [B, Hkv, nsplit, S*G, D4 + 1] vec4
// (acc..., (m, l, 0, 0)), 5 params. grid: (nsplit, item tiles * Hkv, B).
{{KV_ATTENTION_IO}}

override KT: u32 = 32u;                 // keys per tile: 32 / 16 / 8 for D <= 64 / 128 / 256
override RW: u32 = 8u;                  // items per workgroup, RW * D4 <= WG
override KP: u32 = 1u;                  // key parts of the p.v phase, KP * RW' * D4 <= WG
const WG: u32 = 128u;
const KTMAX: u32 = 32u;
const VREG: u32 = 4u;                   // V values a thread stages per tile: KT * D4 <= 512
const NEG: f32 = -3.4028234663852886e38;
var<workgroup> Qs: array<vec4<f32>, 256>;    // [RW][D4], scaled
var<workgroup> Ks: array<vec4<f32>, 576>;    // [D4][KT + 1]: transposed, padded; merge scratch
var<workgroup> P: array<f32, 256>;           // [RW][KTMAX] scores; (m, l) merge scratch
var<workgroup> wpos: i32;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if (lid == 0u) { wpos = max(row_pos(wid.z), 0); }
    let p0 = u32(workgroupUniformLoad(&wpos));
    let c = wid.x;
    let it = wid.y / p.Hkv;
    let hk = wid.y % p.Hkv;
    let b = wid.z;
    let D4 = p.D4;
    let RI = p.S * p.G;                              // items per kv head
    let i0 = it * RW;
    let R = min(RW, RI - i0);                        // items of this workgroup
    let L = valid_keys(p0);
    let cl = chunk_len(L);
    if (c * cl >= L) { return; }                     // past the last chunk: nothing to do
    let s_last = (i0 + R - 1u) / p.G;
    let k0 = c * cl;
    let k1 = min(min(k0 + cl, L), p0 + s_last + 1u);
    let kbase = (row_slot(b) * p.Hkv + hk) * p.T * D4;
    for (var e = lid; e < R * D4; e += WG) {
        let i = i0 + e / D4;
        Qs[e] = q[((b * p.S + i / p.G) * p.H + item_head(hk, i)) * D4 + e % D4] * p.scale;
    }
    let j = lid % KT;                                // scores: this thread's key
    let rg = lid / KT;                               // and its items rg, rg + WG / KT, ...
    let r = lid / (KP * D4);                         // p.v: this thread's item,
    let kp = (lid / D4) % KP;                        // key part
    let col = lid % D4;                              // and output column
    let mine = r < R;
    let my_end = p0 + (i0 + r) / p.G + 1u;           // item r sees keys < my_end
    let my_start = key_start(my_end - 1u);           // and keys >= my_start
    var m = NEG;
    var l = 0.0;
    var acc = vec4<f32>(0.0);
    for (var t0 = k0; t0 < k1; t0 += KT) {
        let n = min(KT, k1 - t0);
        for (var e = lid; e < KT * D4; e += WG) {
            let jj = e / D4;
            var v = vec4<f32>(0.0);
            if (jj < n) { v = kc[kbase + (t0 + jj) * D4 + e % D4]; }
            Ks[(e % D4) * (KT + 1u) + jj] = v;
        }
        workgroupBarrier();
        // this tile's V rows, loaded now (independent loads, in flight together with the
        // scores below) and staged once the scores no longer need Ks: the p.v loop reading
        // them from global memory key by key waited a load latency per key
        var vr: array<vec4<f32>, VREG>;
        for (var u = 0u; u < VREG; u++) {
            let e = lid + u * WG;
            vr[u] = vec4<f32>(0.0);
            if (e < KT * D4 && e / D4 < n) { vr[u] = vc[kbase + (t0 + e / D4) * D4 + e % D4]; }
        }
        for (var rr = rg; rr < R; rr += WG / KT) {
            var sc = NEG;
            let qp = p0 + (i0 + rr) / p.G;
            if (j < n && t0 + j <= qp && t0 + j >= key_start(qp)) {
                var dot = vec4<f32>(0.0);
                for (var cc = 0u; cc < D4; cc++) {
                    dot += Qs[rr * D4 + cc] * Ks[cc * (KT + 1u) + j];
                }
                sc = capped(dot.x + dot.y + dot.z + dot.w);
            }
            P[rr * KTMAX + j] = sc;
        }
        workgroupBarrier();
        for (var u = 0u; u < VREG; u++) {            // V tile [KT][D4] where K was
            let e = lid + u * WG;
            if (e < KT * D4) { Ks[e] = vr[u]; }
        }
        workgroupBarrier();
        if (mine) {
            let nn = min(n, select(0u, my_end - t0, my_end > t0));   // causal: keys < my_end
            for (var jj = kp; jj < nn; jj += KP) {
                if (t0 + jj < my_start) { continue; }       // before the sliding window
                let sj = P[r * KTMAX + jj];
                if (sj > m) {
                    let corr = exp(m - sj);
                    l *= corr;
                    acc *= corr;
                    m = sj;
                }
                let pj = exp(sj - m);
                l += pj;
                acc += pj * Ks[jj * D4 + col];
            }
        }
        workgroupBarrier();                          // Ks is the next tile's K staging
    }
    if (KP > 1u) {                                   // merge the key parts of (item, column)
        workgroupBarrier();
        Ks[lid] = acc;
        P[lid] = m;
        P[WG + lid] = l;
        workgroupBarrier();
        if (kp == 0u) {
            var mm = m;
            for (var t = 1u; t < KP; t++) { mm = max(mm, P[lid + t * D4]); }
            acc = vec4<f32>(0.0);
            l = 0.0;
            for (var t = 0u; t < KP; t++) {
                let w = exp(P[lid + t * D4] - mm);
                acc += w * Ks[lid + t * D4];
                l += w * P[WG + lid + t * D4];
            }
            m = mm;
        }
    }
    if (mine && kp == 0u) {
        let i = i0 + r;
        if (p.direct != 0u) {
            let o = ((b * p.S + i / p.G) * p.H + item_head(hk, i)) * D4 + col;
            dst[o] = select(acc / l, vec4<f32>(0.0), l == 0.0);
        } else {
            let row = (((b * p.Hkv + hk) * p.nsplit + c) * RI + i) * (D4 + 1u);
            dst[row + col] = acc;
            if (col == 0u) { dst[row + D4] = vec4<f32>(m, l, 0.0, 0.0); }
        }
    }
}
