// Flash attention on tensor cores (subgroup matrices, Dawn's
// chromium_experimental_subgroup_matrix): out[b,h,i,:] = softmax(q[b,h,i,:] . k[b,h]^T * scale
// + mask) @ v[b,h] for f16 q, k, v, out with f32 products and softmax; no score matrix in
// memory. attention_flash's signature and grid (common/attention_io: vec4<f16> q/k/v/out read
// through (batch, head, row) strides, the output (B, H, L, D) or (B, L, H, D)); chosen only where
// the adapter offers f16 -> f32 16x16x16 subgroup matrices with 32-lane subgroups
// (lower_attention: the "flash" path of an f16 attention), every other adapter keeps
// attention_flash.
// A workgroup of 4 subgroups (128 threads) owns BQ = 64 query rows of one (batch, head) and
// walks the keys in tiles of BKV = 64. The products split the tiles in two dimensions, so that
// each loaded matrix feeds two products (compiler/smat.attention_slots writes them out):
//   S = Q K^T   subgroup s: rows 32 (s / 2) .. + 32 x keys 32 (s % 2) .. + 32, 4 result tiles
//               from its 2 x D/16 Q tiles (loaded once, scaled) and 2 x D/16 K tiles read
//               column-major from Ks[s % 2] [key][d]; stored (f32) into its Ss panel
//   softmax     each lane takes half a row (sg * 16 + lane % 16; keys 0..31 or 32..63 by
//               lane / 16): masks, the tile's max (its partner lane by subgroupShuffleXor),
//               P = exp(S - m) as f16 into the Ps panel of its rows
//   O += P V    subgroup s owns a block of O (rows OR x dims OC, see O_AT) as result matrices
//               that stay in registers across the key tiles: P's tiles of its rows x the
//               V tiles of its dims from Vs[s % (D / OC)] [key][d]
// Lazy rescale: m, the max a row's P is taken against, moves only when a tile's max passes it
// by more than TAU (P <= e^TAU = 2981 fits f16; O and l sum in f32). Then, and only then, the
// workgroup (a flag read by workgroupUniformLoad) stores O through Ss, each lane scales its
// half row by exp(m_old - m_new), and the result matrices are loaded back. Random inputs
// rescale at most once or twice a row; the per-tile round trip of O that the earlier form
// (O in the lanes' registers, each tile's P V added through Ss) paid is gone.
// Rows of the tiles are padded (K/V/P by 8 halves, S by 4 floats) so that 16-element loads
// and the lanes' reads touch distinct banks; a lane reads its half row of S and O starting at
// column `rot`, so the 32 lanes read 32 banks at once.
// Workgroup memory at D 64: Ks 9 KB, Vs 10 KB, Ps 9 KB, Ss 18 KB: 46.3 KB (48 KB on NVIDIA).
// What limits it, and what was tried: see compiler/smat.attention_slots's measured table.
// Head dims 16, 32, 64 (the lowering checks). Robustness (Tint, in Chrome): every matrix load
// and store is at a constant offset into one fixed-size panel (the panel's index clamped), so
// it needs no bounds check (compiler/smat.py); loops over the lanes' private arrays are
// `// @unroll`.
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
const NT: u32 = 128u;             // threads: 4 subgroups of 32
const D: u32 = {{D}}u;            // head dim: 16, 32 or 64
const DQ: u32 = D / 4u;           // vec4s of a row
const DH: u32 = D / 2u;           // a lane's columns of O (half a row)
const OR: u32 = {{OR}}u;          // rows of O a subgroup owns (32, or 16 at D 16)
const OC: u32 = {{OC}}u;          // ... and dims (D / 2, or 16)
const NV: u32 = D / OC;           // V panels (dims OC each)
const SK: u32 = D + 8u;           // Ks row stride, halves
const SV: u32 = OC + 8u;          // Vs row stride, halves
const SP: u32 = BKV + 8u;         // Ps row stride, halves (Q's too: D <= BKV)
const SS: u32 = 36u;              // Ss row stride, floats (panels of 32 x 32)
const NL: u32 = BKV * DQ / NT;    // vec4s of K (and of V) a thread loads a tile
const NEG: f32 = -3.4028234663852886e38;
const TAU: f32 = 8.0;             // how far a tile's max may pass m before O is rescaled
var<workgroup> Ks: array<array<f16, 32u * SK>, 2>;    // [keys half][key][d] K tile
var<workgroup> Vs: array<array<f16, BKV * SV>, NV>;   // [dims panel][key][d] V tile
var<workgroup> Mk: array<u32, BKV>;                   // 1: key t0 + j is in range, not masked
var<workgroup> Ps: array<array<f16, 16u * SP>, 4>;    // [16 rows][row][key] P (first: Q [row][d])
var<workgroup> Ss: array<array<f32, 32u * SS>, 4>;    // [panel][32 rows][32] S, or O (O_AT)
var<workgroup> resc: u32;                             // 1: some row's m moves this tile

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
    let key = e / DQ;
    let d = (e % DQ) * 4u;
    let ka = (key % 32u) * SK + d;
    let kh = key / 32u;
    Ks[kh][ka] = kq.x; Ks[kh][ka + 1u] = kq.y; Ks[kh][ka + 2u] = kq.z; Ks[kh][ka + 3u] = kq.w;
    let va = key * SV + d % OC;
    let vp = d / OC;
    Vs[vp][va] = vq.x; Vs[vp][va + 1u] = vq.y; Vs[vp][va + 2u] = vq.z; Vs[vp][va + 3u] = vq.w;
}

// the tile's key flags: in range and not masked (threads 0..63)
fn put_keys(b: u32, t0: u32, lid: u32) {
    if (lid < BKV) {
        let key = t0 + lid;
        let ok = key < p.Lk && (!HAS_MASK || mask[b * p.Lk + min(key, p.Lk - 1u)] != 0);
        Mk[lid] = select(0u, 1u, ok);
    }
}

// where O[r][d] (r < 64, d < D) sits in Ss while it goes through memory: the panel of the
// subgroup that owns it (rows OR, dims OC a subgroup), and the index in it
fn o_at(r: u32, d: u32) -> vec2<u32> {
    return vec2<u32>((r / OR) * NV + d / OC, (r % OR) * SS + d % OC);
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        {{SGID}}) {
    {{SGID_LET}}
    let rl = lane % 16u;                    // this lane's row of its subgroup's 16
    let half = lane / 16u;                  // ... and which half of the keys / dims
    let rot = (rl / 8u) * 2u + half;        // where its reads start (distinct banks)
    let rw = sg * 16u + rl;                 // its row in the workgroup's 64
    let b = wid.z;
    let h = wid.y;
    let r0 = wid.x * BQ;
    let row = r0 + rw;
    let qb = p.q_o + b * p.q_b + h * p.q_h;
    let kb = p.k_o + b * p.k_b + h * p.k_h;
    let vb = p.v_o + b * p.v_b + h * p.v_h;
    // Q, scaled, into the Ps panels as [row][d]; each subgroup keeps its rows' tiles
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
    // O starts at zero, loaded from a zeroed Ss (an explicit zero, not the zero-initialized
    // `var` of a result matrix: see compiler/smat.attention_slots)
    for (var e = lid; e < 4u * 32u * SS; e += NT) { Ss[e / (32u * SS)][e % (32u * SS)] = 0.0; }
    // causal: the workgroup needs the keys its last row sees
    let kv_end = key_end(min(r0 + BQ, p.Lq) - 1u);
    // @unroll
    for (var u = 0u; u < NL; u++) {
        put_kv(lid + NT * u, k_quad(kb, 0u, lid + NT * u), v_quad(vb, 0u, lid + NT * u));
    }
    put_keys(b, 0u, lid);
    workgroupBarrier();
{{Q_LOAD}}
{{O_DECL}}
{{O_LOAD}}
    let end = key_end(min(row, p.Lq - 1u));  // keys this lane's row sees
    var kr: array<vec4<f16>, NL>;
    var vr: array<vec4<f16>, NL>;
    var m = NEG;                            // the max the row's P is taken against
    var l = 0.0;                            // this lane's part of the row's sum of P
    var sv: array<f32, 32>;                 // the tile's scores of this lane's keys
    for (var t0 = 0u; t0 < kv_end; t0 += BKV) {
        let more = t0 + BKV < kv_end;
        if (lid == 0u) { resc = 0u; }       // (every read of last tile's flag is done)
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
        let sp = 2u * (rw / 32u) + half;    // the Ss panel of this lane's keys
        // @unroll
        for (var i = 0u; i < 32u; i++) {
            let c = (i + rot) % 32u;
            let ok = Mk[half * 32u + c] != 0u && t0 + half * 32u + c < end;
            sv[i] = select(NEG, Ss[sp][(rw % 32u) * SS + c], ok);
            mx = max(mx, sv[i]);
        }
        mx = max(mx, subgroupShuffleXor(mx, 16u));
        if (m == NEG) { m = mx; }           // nothing summed yet: O and l are 0
        var corr = 1.0;
        if (mx > m + TAU) {                 // (both lanes of a row decide alike)
            corr = exp(m - mx);
            m = mx;
            l *= corr;
            resc = 1u;
        }
        // @unroll
        for (var i = 0u; i < 32u; i++) {
            let c = half * 32u + (i + rot) % 32u;
            let pr = select(0.0, exp(sv[i] - m), sv[i] > NEG);
            l += pr;
            Ps[sg][rl * SP + c] = f16(pr);
        }
        if (workgroupUniformLoad(&resc) != 0u) {   // (its barrier publishes Ps too)
{{O_SAVE}}
            workgroupBarrier();
            // @unroll
            for (var i = 0u; i < DH; i++) {
                let at = o_at(rw, half * DH + (i + rot) % DH);
                Ss[at.x][at.y] *= corr;
            }
            workgroupBarrier();
{{O_LOAD}}
        }
{{PV_MMA}}
        workgroupBarrier();
        if (more) {
            // @unroll
            for (var u = 0u; u < NL; u++) { put_kv(lid + NT * u, kr[u], vr[u]); }
            put_keys(b, t0 + BKV, lid);
        }
        workgroupBarrier();
    }
    // normalized rows through Ss, then written as vec4s, a row's quads by consecutive threads
    let lt = l + subgroupShuffleXor(l, 16u);
    let inv = select(1.0 / lt, 0.0, lt == 0.0);
{{O_SAVE}}
    workgroupBarrier();
    // @unroll
    for (var i = 0u; i < DH; i++) {
        let at = o_at(rw, half * DH + (i + rot) % DH);
        Ss[at.x][at.y] *= inv;
    }
    workgroupBarrier();
    for (var e = lid; e < BQ * DQ; e += NT) {
        let r = e / DQ;
        let c = e % DQ;
        if (r0 + r < p.Lq) {
            let at = o_at(r, c * 4u);
            out[(b * p.o_b + h * p.o_h + (r0 + r) * p.o_i) / 4u + c] = vec4<f16>(vec4<f32>(
                Ss[at.x][at.y], Ss[at.x][at.y + 1u], Ss[at.x][at.y + 2u], Ss[at.x][at.y + 3u]));
        }
    }
}
