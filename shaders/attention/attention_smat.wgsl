// Flash attention on tensor cores (subgroup matrices, Dawn's
// chromium_experimental_subgroup_matrix): out[b,h,i,:] = softmax(q[b,h,i,:] . k[b,h]^T * scale
// + mask) @ v[b,h] for f16 q, k, v, out with f32 products and softmax; no score matrix in
// memory. attention_flash's signature and grid (common/attention_io: vec4<f16> q/k/v/out read
// through (batch, head, row) strides, the output (B, H, L, D) or (B, L, H, D)); chosen only where
// the adapter offers f16 -> f32 16x16x16 subgroup matrices with 32-lane subgroups
// (lower_attention: the "flash" path of an f16 attention), every other adapter keeps
// attention_flash.
// A workgroup of NSG subgroups owns BQ = 64 query rows of one (batch, head) and walks the keys
// in tiles of BKV = 64: NSG = 8 (256 threads) at head dims 32 and 64, 4 (128) at 16. The
// products are split across the subgroups so that each loaded Q and K tile feeds two products
// (compiler/smat._attention_split_slots writes them out; at 8 subgroups):
//   S = Q K^T   subgroup s: rows 32 (s / 4) .. x keys 16 (s % 4) .., 2 result tiles from its
//               2 x D/16 Q tiles (loaded once, kept as left matrices; scaled) and D/16 K tiles
//               read column-major from Ks [key][d]; stored (f32) into the Ss panels of their
//               16 rows
//   softmax     each lane takes a quarter of a row (8 rows a subgroup; 2 lanes a row, halves,
//               at 4 subgroups): masks, the tile's max (the row's lanes through
//               subgroupShuffleXor), the running max and sum, P = exp(S - m) as f16 into the
//               Ps panel of its row; its part of the row of O (D / LPR f32 in registers)
//               rescaled by exp(m_old - m_new)
//   O += P V    subgroup s: O's rows 32 (s / 4) .. x dims 16 (s % 4) .. at D 64 (rows 16 (s / 2)
//               .. x dims 16 (s % 2) .. at D 32), each tile 4 products of P's key tiles and
//               V's [key][d]; stored into the Ss panels of their rows, added to the lanes' O
// Subgroup matrices have no per-row scale, so O lives in the lanes' registers, and each tile's
// P V goes through workgroup memory. The next tile's K and V are loaded into registers while
// this tile computes. Rows of the tiles are padded (K/V/P by 8 halves, S by 4 floats) so that
// 16-element loads and the lanes' reads touch distinct banks; a lane reads its part of a row
// of S and O starting at column `rot` (ROT), so the 32 lanes read 32 banks at once.
// Workgroup memory at D 64: Ks, Vs 9 KB each, Ps 9 KB, Ss 17 KB: 44 KB (48 KB on the H100).
// Measured (H100 under Dawn, bench/device_dawn.sh asmat, bench/results/
// 2026-11-28-h100-dawn-attention-smat.json), the first form (4 subgroups, each its own 16
// rows): 1x12x2048x64 0.283 ms (attention_flash in f16 0.511, in f32 0.49; torch SDPA f16
// 0.040: 0.14x), 1x12x512x64 0.043 (0.079), 1x12x128x64 0.031 (0.034). On an H200, A/Bs in
// one process or call (bench/results/2026-11-28-h200-dawn-attention-smat-split.json, -8-
// subgroups.json): products split 2 x 2, 0.30 -> 0.27 ms; 8 subgroups, 0.27 -> 0.22 (SDPA
// 0.041: 0.19x; MiniLM f16 32x128 1.43 -> 1.35 ms). What limits it: the lanes' phases more
// than the matrix loads (halving each lane's share gained 19%, adding 32 reads a lane cost
// 55%); and every tile's S, P and P V go through workgroup memory (WGSL's subgroup matrices
// have an opaque lane layout, so a row's max and sum and O's per-row rescale need the values
// in memory), about 160 KB of traffic a key tile a workgroup, with 4
// barriers; 44 KB a workgroup leaves few warps an SM to hide them. Tried (2026-11-28, H200,
// bench/results/2026-11-28-h200-dawn-attention-smat-lazy-tried.json): both products split 2x2
// across the subgroups (each loaded Q, K, P, V tile feeding two products) with O kept in result
// matrices across the key tiles and rescaled through memory only when a row's max moved by
// more than 8: 0.38 ms against 0.30 at 1x12x2048x64, and wrong from the first tile (its
// result-matrix loads and stores of O); its 47 KB left 4 workgroups an SM against 5.
// Also tried (same day, bench/results/2026-11-28-h200-dawn-attention-smat-reread-tried.json):
// S read twice from Ss instead of kept in sv (32 registers a lane fewer) with O's rescale
// skipped where the max did not move: 0.42 ms against 0.27. The key flags as two ballot words
// (one load a lane a tile, not 32) with scores in log2 units: 3% faster but NaN (not debugged;
// -ballot-tried.json). 16 subgroups at D 64 (a row over 8 lanes, no tile reused): 0.24-0.25
// ms against 0.22 (-16-subgroups-tried.json). Not tried yet: S kept in f16.
// The first product of each tile is subgroupMatrixMultiply, not an accumulate into a zeroed
// `var` declared in the loop: that form kept the previous tile's sums under Dawn on the H100
// (outputs wrong past the first key tile; bench/probes/attention_smat_probe.py found it).
// Head dims 16, 32, 64 (the lowering checks). Robustness (Tint, in Chrome): the matrix loads
// and stores sit in fixed-size arrays or panels at offsets that depend on the subgroup only;
// loops over the lanes' private arrays are `// @unroll`.
// SGID gives the subgroup and the lane (`subgroup_id`, `subgroup_invocation_id`) where Tint has
// them, else SGID_LET from the thread index (runs of 32 consecutive threads).
// bindings: 0 q, 1 k, 2 v, 3 mask [B, Lk] i32 (0 = masked; a dummy when HAS_MASK is false),
// 4 out, 5 params. grid: (ceil(Lq / 64), H, B).
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
{{ATTENTION_IO}}
const BQ: u32 = 64u;              // query rows a workgroup
const BKV: u32 = 64u;             // keys a tile
const NSG: u32 = {{NSG}}u;          // subgroups of 32: 8 (D 32, 64) or 4 (D 16)
const NT: u32 = NSG * 32u;        // threads
const LPR: u32 = NT / BQ;         // lanes a row: 4 (quarters) or 2 (halves)
const RPS: u32 = 32u / LPR;       // rows a subgroup's lanes take: 8 or 16
const KPL: u32 = BKV / LPR;       // a lane's keys of a tile
const D: u32 = {{D}}u;            // head dim: 16, 32 or 64
const DQ: u32 = D / 4u;           // vec4s of a row
const DPL: u32 = D / LPR;         // a lane's columns of O
const SK: u32 = D + 8u;           // Ks / Vs row stride, halves
const SP: u32 = BKV + 8u;         // Ps row stride, halves (Q's too: D <= BKV)
const SS: u32 = BKV + 4u;         // Ss row stride, floats
const NL: u32 = BKV * DQ / NT;    // vec4s of K (and of V) a thread loads a tile
const NEG: f32 = -3.4028234663852886e38;
var<workgroup> Ks: array<f16, BKV * SK>;               // K tile [key][d]
var<workgroup> Vs: array<f16, BKV * SK>;               // V tile [key][d]
var<workgroup> Mk: array<u32, BKV>;                    // 1: key t0 + j is in range, not masked
var<workgroup> Ps: array<array<f16, 16u * SP>, 4>;     // [subgroup][row][key] P (first: Q [row][d])
var<workgroup> Ss: array<array<f32, 16u * SS>, 4>;     // [subgroup][row][key] S, then [row][d] P V

fn k_quad(kb: u32, t0: u32, e: u32) -> vec4<f16> {
    let j = e / DQ;
    if (t0 + j >= p.Lk) { return vec4<f16>(0.0); }
    return k_at((kb + (t0 + j) * p.k_i) / 4u + e % DQ);
}

fn v_quad(vb: u32, t0: u32, e: u32) -> vec4<f16> {
    let j = e / DQ;
    if (t0 + j >= p.Lk) { return vec4<f16>(0.0); }
    return v_at((vb + (t0 + j) * p.v_i) / 4u + e % DQ);
}

// quad e of the K and V tiles (key e / DQ, dims 4 (e % DQ) ..) into Ks and Vs
fn put_kv(e: u32, kq: vec4<f16>, vq: vec4<f16>) {
    let at = (e / DQ) * SK + (e % DQ) * 4u;
    Ks[at] = kq.x; Ks[at + 1u] = kq.y; Ks[at + 2u] = kq.z; Ks[at + 3u] = kq.w;
    Vs[at] = vq.x; Vs[at + 1u] = vq.y; Vs[at + 2u] = vq.z; Vs[at + 3u] = vq.w;
}

// the tile's key flags: in range and not masked (threads 0..63)
fn put_keys(b: u32, t0: u32, lid: u32) {
    if (lid < BKV) {
        let key = t0 + lid;
        let ok = key < p.Lk && (!HAS_MASK || mask[b * p.Lk + min(key, p.Lk - 1u)] != 0);
        Mk[lid] = select(0u, 1u, ok);
    }
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        {{SGID}}) {
    {{SGID_LET}}
    let rl = lane % RPS;                    // this lane's row of its subgroup's RPS
    let part = lane / RPS;                  // ... and which part of the keys / dims
    let rot = {{ROT}};        // where its reads start (32 banks at once)
    let rw = sg * RPS + rl;                 // its row of the workgroup's 64
    let pn = rw / 16u;                      // ... its 16-row panel of Ps and Ss
    let ri = rw % 16u;                      // ... and its row there
    let b = wid.z;
    let h = wid.y;
    let r0 = wid.x * BQ;
    let row = r0 + rw;
    let qb = p.q_o + b * p.q_b + h * p.q_h;
    let kb = p.k_o + b * p.k_b + h * p.k_h;
    let vb = p.v_o + b * p.v_b + h * p.v_h;
    // Q, scaled, into the Ps panels as [row][d]; each subgroup keeps its rows' D / 16 tiles
    for (var e = lid; e < BQ * DQ; e += NT) {
        let r = e / DQ;
        let c = e % DQ;
        var x = vec4<f16>(0.0);
        if (r0 + r < p.Lq) {
            x = vec4<f16>(vec4<f32>(q[(qb + (r0 + r) * p.q_i) / 4u + c]) * p.scale);
        }
        let at = (r % 16u) * SP + c * 4u;
        Ps[r / 16u][at] = x.x; Ps[r / 16u][at + 1u] = x.y;
        Ps[r / 16u][at + 2u] = x.z; Ps[r / 16u][at + 3u] = x.w;
    }
    // causal: the workgroup needs the keys its last row sees
    let kv_end = key_end(min(r0 + BQ, p.Lq) - 1u);
    // @unroll
    for (var u = 0u; u < NL; u++) {
        put_kv(lid + NT * u, k_quad(kb, 0u, lid + NT * u), v_quad(vb, 0u, lid + NT * u));
    }
    put_keys(b, 0u, lid);
    workgroupBarrier();
{{Q_LOAD}}
    let end = key_end(min(row, p.Lq - 1u));  // keys this lane's row sees
    var kr: array<vec4<f16>, NL>;
    var vr: array<vec4<f16>, NL>;
    var m = NEG;                            // the row's running max
    var l = 0.0;                            // this lane's part of the row's running sum
    var o: array<f32, DPL>;                 // O of the row, columns part * DPL + (i + rot) % DPL
    var sv: array<f32, KPL>;                // the tile's scores of this lane's keys
    for (var t0 = 0u; t0 < kv_end; t0 += BKV) {
        let more = t0 + BKV < kv_end;
        if (more) {                         // the next tile, into registers
            // @unroll
            for (var u = 0u; u < NL; u++) {
                kr[u] = k_quad(kb, t0 + BKV, lid + NT * u);
                vr[u] = v_quad(vb, t0 + BKV, lid + NT * u);
            }
        }
        // (the Ps panels are free: their Q tiles were loaded, or last tile's P used)
{{S_MMA}}
        workgroupBarrier();
        var mx = NEG;
        // @unroll
        for (var i = 0u; i < KPL; i++) {
            let c = part * KPL + (i + rot) % KPL;
            let ok = Mk[c] != 0u && t0 + c < end;
            sv[i] = select(NEG, Ss[pn][ri * SS + c], ok);
            mx = max(mx, sv[i]);
        }
        mx = max(mx, subgroupShuffleXor(mx, 16u));   // (the row's lanes: xor 16, and 8)
        if (LPR == 4u) { mx = max(mx, subgroupShuffleXor(mx, 8u)); }
        let m_new = max(m, mx);
        let corr = exp(m - m_new);
        m = m_new;
        l *= corr;
        // @unroll
        for (var i = 0u; i < KPL; i++) {
            let c = part * KPL + (i + rot) % KPL;
            let pr = select(0.0, exp(sv[i] - m_new), sv[i] > NEG);
            l += pr;
            Ps[pn][ri * SP + c] = f16(pr);
        }
        // @unroll
        for (var i = 0u; i < DPL; i++) { o[i] *= corr; }
        workgroupBarrier();
{{PV_MMA}}
        workgroupBarrier();
        // @unroll
        for (var i = 0u; i < DPL; i++) { o[i] += Ss[pn][ri * SS + part * DPL + (i + rot) % DPL]; }
        if (more) {
            // @unroll
            for (var u = 0u; u < NL; u++) { put_kv(lid + NT * u, kr[u], vr[u]); }
            put_keys(b, t0 + BKV, lid);
        }
        workgroupBarrier();
    }
    // normalized rows through Ss (f32 [row][d]), then written as vec4s, a row's quads by
    // consecutive threads
    var lt = l + subgroupShuffleXor(l, 16u);
    if (LPR == 4u) { lt += subgroupShuffleXor(lt, 8u); }
    let inv = select(1.0 / lt, 0.0, lt == 0.0);
    // @unroll
    for (var i = 0u; i < DPL; i++) { Ss[pn][ri * SS + part * DPL + (i + rot) % DPL] = o[i] * inv; }
    workgroupBarrier();
    for (var e = lid; e < BQ * DQ; e += NT) {
        let r = e / DQ;
        let c = e % DQ;
        if (r0 + r < p.Lq) {
            let at = (r % 16u) * SS + c * 4u;
            let t = r / 16u;
            out[(b * p.o_b + h * p.o_h + (r0 + r) * p.o_i) / 4u + c] =
                vec4<f16>(vec4<f32>(Ss[t][at], Ss[t][at + 1u], Ss[t][at + 2u], Ss[t][at + 3u]));
        }
    }
}
