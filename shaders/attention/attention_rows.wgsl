// Fused attention for many query rows (encoders, prefill): SPLIT threads per query row.
// out[b,h,i,:] = softmax(q[b,h,i,:] . k[b,h,:,:]^T * scale + mask) @ v[b,h]; flash style:
// key/value tiles of KT rows are staged in workgroup memory and shared by the workgroup;
// each thread takes every SPLIT-th key of a tile, keeping a running max, sum and output row
// in registers; the SPLIT partial states of a row are merged at the end. Head dim D <= 64.
// Workgroup storage: 2 x KT x D4 vec4 + KT x 4 + 512 B: 8.6 KB at head dim 32 (KT 32), 17 KB
// at 64 (the lowering checks the adapter's limit). The arrays are sized to the head dim, and
// software adapters take KT = 16, because Chromium's SwiftShader spends about 75 ms per KB of
// workgroup memory compiling a pipeline (tiles sized for head dim 64 took 1.75 s; for 32,
// 0.85 s). The SPLIT partial rows merge in turns through the K/V tiles (BQ x D4 vec4 a turn).
// q/k/v/out are read through (batch, head, row) strides (dim stride 1).
// bindings: 0 q, 1 k, 2 v, 3 mask [B, Lk] i32 (0 = masked; a dummy when HAS_MASK is false),
// 4 out, 5 params. grid: (ceil(Lq / (WG / SPLIT)), H, B).
{{ATTENTION_IO}}
override DV4: u32 = 8u;                         // ceil(D / 4): constant loop bounds unroll
override SPLIT: u32 = 1u;                         // threads per query row: 1, 2, 4 or 8
const WG: u32 = 64u;
const KT: u32 = {{KT}}u;          // keys per tile: 32, 16 on software adapters
const KD: u32 = {{KD}}u;          // KT * D4
const D4: u32 = {{D4}}u;                          // DV4, fixed in the text: arrays are
var<workgroup> Ks: array<vec4<f32>, {{KD}}>;     // sized to the head dim. [KT][D4]
var<workgroup> Vs: array<vec4<f32>, {{KD}}>;     // (KD = KT * D4)
var<workgroup> keep: array<u32, {{KT}}>;            // key j of the tile is not masked
var<workgroup> ms: array<f32, 64>;              // partial running max / sum per thread
var<workgroup> ls: array<f32, 64>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let b = wid.z;
    let h = wid.y;
    let BQ = WG / SPLIT;
    let part = lid % SPLIT;
    let i = wid.x * BQ + lid / SPLIT;
    let d4 = DV4;
    let scale = p.scale;
    let qb = p.q_o + b * p.q_b + h * p.q_h + i * p.q_i;
    let kb = p.k_o + b * p.k_b + h * p.k_h;
    let vb = p.v_o + b * p.v_b + h * p.v_h;
    var qr: array<vec4<f32>, D4>;
    var acc: array<vec4<f32>, D4>;
    var m = -3.4028234663852886e38;
    var l = 0.0;
    if (i < p.Lq) {
        for (var c = 0u; c < d4; c++) {
            var t = vec4<f32>(0.0);
            for (var e = 0u; e < 4u; e++) {
                if (c * 4u + e < p.D) { t[e] = f32(q[qb + c * 4u + e]); }
            }
            qr[c] = t * scale;
        }
    }
    // causal: query i sees keys up to i + (Lk - Lq); the workgroup needs its last row's
    let last = min(wid.x * BQ + BQ, p.Lq) - 1u;   // (the workgroup's last row)
    let kv_end = key_end(last);
    let my_end = key_end(i);
    for (var t0 = 0u; t0 < kv_end; t0 += KT) {
        let n = min(KT, kv_end - t0);
        for (var e = lid; e < KT * d4; e += WG) {
            let j = e / d4;
            let c = e % d4;
            var kk = vec4<f32>(0.0);
            var vv = vec4<f32>(0.0);
            if (j < n) {
                for (var x = 0u; x < 4u; x++) {
                    if (c * 4u + x < p.D) {
                        kk[x] = f32(k_at(kb + (t0 + j) * p.k_i + c * 4u + x));
                        vv[x] = f32(v_at(vb + (t0 + j) * p.v_i + c * 4u + x));
                    }
                }
            }
            Ks[j * D4 + c] = kk;
            Vs[j * D4 + c] = vv;
        }
        if (lid < KT) {
            keep[lid] = u32(lid < n && (!HAS_MASK || mask[b * p.Lk + t0 + lid] != 0));
        }
        workgroupBarrier();
        if (i < p.Lq) {
            // online softmax per key; acc is rescaled only when the running max grows
            for (var j = part; j < KT; j += SPLIT) {     // keep[j] is 0 past the tile's end
                if (keep[j] == 0u || t0 + j >= my_end) { continue; }
                var dot = vec4<f32>(0.0);
                for (var c = 0u; c < d4; c++) { dot += qr[c] * Ks[j * D4 + c]; }
                let sj = dot.x + dot.y + dot.z + dot.w;
                if (sj > m) {
                    let corr = exp(m - sj);
                    l *= corr;
                    for (var c = 0u; c < d4; c++) { acc[c] *= corr; }
                    m = sj;
                }
                let pj = exp(sj - m);
                l += pj;
                for (var c = 0u; c < d4; c++) { acc[c] += pj * Vs[j * D4 + c]; }
            }
        }
        workgroupBarrier();
    }
    // merge the SPLIT partial states of each row: part s > 0 hands its acc over through the
    // K/V tiles (BQ rows x D4 a turn, which fits them for SPLIT >= 2), part 0 sums
    ms[lid] = m;
    ls[lid] = l;
    workgroupBarrier();
    var mm = m;
    var lt = 0.0;
    if (part == 0u) {
        for (var s = 1u; s < SPLIT; s++) { mm = max(mm, ms[lid + s]); }
        for (var s = 0u; s < SPLIT; s++) { lt += ls[lid + s] * exp(ms[lid + s] - mm); }
        let own = exp(m - mm);
        for (var c = 0u; c < d4; c++) { acc[c] *= own; }
    }
    let row = lid / SPLIT;                           // this thread's row of the workgroup
    for (var s = 1u; s < SPLIT; s++) {
        if (part == s) {
            for (var c = 0u; c < d4; c++) {
                let e = row * D4 + c;
                if (e < KD) { Ks[e] = acc[c]; } else { Vs[e - KD] = acc[c]; }
            }
        }
        workgroupBarrier();
        if (part == 0u) {
            let f = exp(ms[lid + s] - mm);
            for (var c = 0u; c < d4; c++) {
                let e = row * D4 + c;
                acc[c] += f * select(Vs[max(e, KD) - KD], Ks[min(e, KD - 1u)], e < KD);
            }
        }
        workgroupBarrier();
    }
    if (i < p.Lq && part == 0u) {
        let inv = select(1.0 / lt, 0.0, lt == 0.0);
        let ob = b * p.o_b + h * p.o_h + i * p.o_i;
        for (var c = 0u; c < d4; c++) {
            for (var e = 0u; e < 4u; e++) {
                if (c * 4u + e < p.D) { out[ob + c * 4u + e] = {{T}}(acc[c][e] * inv); }
            }
        }
    }
}
