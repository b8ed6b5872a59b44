// Flash attention for GPUs, register-tiled: out[b,h,i,:] = softmax(q[b,h,i,:] . k[b,h]^T * scale
// + mask) @ v[b,h], no score matrix in memory. A workgroup of 16x16 threads owns BQ = 64 query
// rows of one (batch, head) and walks the keys in tiles of BKV = 64:
//   S = Q K^T    thread (tx, ty): rows ty*4 + (0..3) x keys tx*4 + (0..3), a 4x4 block, from
//                Qs [D][16 row quads] (scaled once) and the K tile [D][16 key quads]
//   online softmax: the tile's row max over a row's 16 threads (ROW_TILES: subgroup shuffles
//                where the device's subgroups were checked, else through workgroup memory),
//                O and the per-thread partial sums rescaled by exp(m_old - m_new)
//   O += P V     P [64 keys][16 row quads] takes the K tile's place; thread: rows ty*4 + (0..3)
//                x column quad tx % DQ, keys split KS = 16 / DQ ways (D 32: two halves),
//                the key halves' partial rows summed at the end
// The next tile's K and V are loaded into registers while this tile computes.
// q/k/v/out are vec4 arrays (offsets and strides multiples of 4, which the lowering checks),
// read through (batch, head, row) strides (common/attention_io: views such as
// the heads of one fused QKV projection need no copy; the output may be (B, L, H, D)).
// Head dim D in 4, 8, 16, 32, 64. Workgroup memory: Qs 64 D x 4 B, KP 16 KB, Vs 64 D x 4 B:
// 32 KB at D 32, 48 KB at D 64 (the lowering checks the adapter's limit).
// Limits: the workgroup-memory / L1 pipe, which serves both the tiles' reads (2 vec4 loads
// per 16 FMAs in both products, one of them a broadcast) and the global loads, beside 4
// barriers a key tile. What each step gave (H200, GPU ms by timestamps, matmul path / this;
// bench/probes/attention_paths_probe.py, bench/results/2026-11-26-h200-attention-flash-*.json):
//   first form (scalar q/k/v loads, K read a key per thread, P stored unswizzled):
//     32x12x128x32 masked 0.088 / 0.077, 1x12x512x64 0.065 / 0.067, 1x12x2048x64 0.553 /
//     0.701 (~18 TFLOP/s); without the register prefetch 0.758, 2 row quads a thread (128
//     threads, 8x4 blocks) 0.747, both 0.873: slower, so neither kept
//   vec4 loads and stores (QKV slot) and P swizzled (2-way, not 16-way, bank conflicts):
//     0.090 / 0.056, 0.065 / 0.049, 0.530 / 0.516
//   K loaded two quads of a key side by side (whole 32 B sectors): 2048: 0.530 / 0.499
//   key chunks (SPLITS) where query tiles are few: 1x12x1024x64 0.172 -> 0.145 with 2;
//     at 1x12x2048x64 (384 tiles) 2 chunks cost 0.496 -> 0.546
// The rule of which shapes take it (lower_attention.attention_path) holds the comparison.
// Loops that index the private arrays (s, o, kr, vr) or vectors by their variable are marked
// `// @unroll` (webrlx/wgsl_unroll.py): under Tint's robustness such an index is clamped, and
// the driver then keeps the whole array in local memory, the hot loops' constant indices too.
// bindings: 0 q, 1 k, 2 v, 3 mask [B, Lk] i32 (0 = masked; a dummy when HAS_MASK is false),
// 4 out (or the chunks' partials), 5 params. grid: (ceil(Lq / 64) x SPLITS, H, B).
{{ATTENTION_IO}}
const BQ: u32 = 64u;              // query rows a workgroup
const NT: u32 = 256u;             // threads (16 x 16)
const BKV: u32 = 64u;             // keys a tile
const D: u32 = {{D}}u;            // head dim
const DQ: u32 = D / 4u;           // column quads of a row of the output
const KS: u32 = 16u / DQ;         // ways the keys of a tile are split in O += P V
const KPS: u32 = BKV / KS;        // keys of a tile per split
const NL: u32 = (D * 16u + NT - 1u) / NT;  // vec4s of K (and of V) a thread loads a tile
// SPLITS > 1: the keys are cut into SPLITS chunks (whole tiles), one workgroup each (grid x
// = query tiles x SPLITS): more workgroups where one per query tile leaves SMs idle. Each
// writes its rows' unnormalized output and (max, sum) into `out`, then [SPLITS][B H Lq]
// [DQ + 1] vec4 (f32), which attention/flash_combine merges.
override SPLITS: u32 = 1u;
const NEG: f32 = -3.4028234663852886e38;
// Two-level arrays, not flat ones, for Tint's robustness (on in Chrome), which clamps every
// index into workgroup memory: indexed [row][column], the products' loops (unrolled) index
// rows by constants and columns by the thread's quad, so no clamp is left inside them
// (decoder/attn_flash.wgsl measured what flat indices cost under Dawn)
var<workgroup> Qs: array<array<vec4<f32>, 16>, D>;    // [d][row quad]: rows 4 rq .. 4 rq + 3,
                                                      // scaled
var<workgroup> KP: array<array<vec4<f32>, 16>, 64>;   // K tile [d][key quad], then P
                                                      // [key][row quad]
var<workgroup> Vs: array<array<vec4<f32>, DQ>, 64>;   // V tile [key][column quad]
{{ROW_TILES}}

// K tile quad e: key j and dim quad c, KW quads of one key side by side (a 32 B sector), then
// the next key: the loads use whole sectors and the transposed writes into KP conflict at
// most KW ways (keys one word apart)
const KW: u32 = min(2u, DQ);
fn k_pos(e: u32) -> vec2<u32> {
    return vec2<u32>((e / KW) % BKV, (e / (KW * BKV)) * KW + e % KW);
}

fn k_quad(kb: u32, t0: u32, e: u32) -> vec4<f32> {
    let jc = k_pos(e);
    if (e >= D * 16u || t0 + jc.x >= p.Lk) { return vec4<f32>(0.0); }
    return vec4<f32>(k_at((kb + (t0 + jc.x) * p.k_i) / 4u + jc.y));
}

// V tile quad: (key, dim quad) with the dim quad fastest (coalesced, stored as is)
fn v_quad(vb: u32, t0: u32, e: u32) -> vec4<f32> {
    let j = e / DQ;
    let c = e % DQ;
    if (e >= D * 16u || t0 + j >= p.Lk) { return vec4<f32>(0.0); }
    return vec4<f32>(v_at((vb + (t0 + j) * p.v_i) / 4u + c));
}

fn put_kv(e: u32, kq: vec4<f32>, vq: vec4<f32>) {
    if (e >= D * 16u) { return; }
    let jc = k_pos(e);
    let j = jc.x;
    let c = jc.y * 4u;
    KP[c][j / 4u][j % 4u] = kq.x;
    KP[c + 1u][j / 4u][j % 4u] = kq.y;
    KP[c + 2u][j / 4u][j % 4u] = kq.z;
    KP[c + 3u][j / 4u][j % 4u] = kq.w;
    Vs[e / DQ][e % DQ] = vq;
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l3: vec3<u32>,
        @builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) nwg: vec3<u32>) {
    let tx = l3.x;
    let ty = l3.y;                          // this thread's row quad: rows ty*4 + (0..3)
    let b = wid.z;
    let h = wid.y;
    let sp = wid.x % SPLITS;                // this workgroup's key chunk
    let r0 = (wid.x / SPLITS) * BQ;
    let qb = p.q_o + b * p.q_b + h * p.q_h;
    let kb = p.k_o + b * p.k_b + h * p.k_h;
    let vb = p.v_o + b * p.v_b + h * p.v_h;
    // Q, scaled, transposed into Qs: consecutive threads take consecutive rows
    for (var e = lid; e < BQ * DQ; e += NT) {
        let row = e % BQ;
        let c = e / BQ;
        var x = vec4<f32>(0.0);
        if (r0 + row < p.Lq) { x = vec4<f32>(q[(qb + (r0 + row) * p.q_i) / 4u + c]) * p.scale; }
        // @unroll
        for (var z = 0u; z < 4u; z++) { Qs[4u * c + z][row / 4u][row % 4u] = x[z]; }
    }
    // causal: the workgroup needs the keys its last row sees; SPLITS: those of its chunk
    let chunk = ((p.Lk + SPLITS - 1u) / SPLITS + BKV - 1u) / BKV * BKV;
    let k_lo = sp * chunk;
    let kv_end = min(key_end(min(r0 + BQ, p.Lq) - 1u), k_lo + chunk);
    var kr: array<vec4<f32>, NL>;
    var vr: array<vec4<f32>, NL>;
    // @unroll
    for (var u = 0u; u < NL; u++) {
        put_kv(lid + NT * u, k_quad(kb, k_lo, lid + NT * u), v_quad(vb, k_lo, lid + NT * u));
    }
    workgroupBarrier();
    var m = vec4<f32>(NEG);                 // running max of rows ty*4 + (0..3)
    var l = vec4<f32>(0.0);                 // this thread's part of their running sums
    var o: array<vec4<f32>, 4>;             // O rows ty*4 + r, column quad tx % DQ (this split)
    let dq = tx % DQ;
    let ks = tx / DQ;
    for (var t0 = k_lo; t0 < kv_end; t0 += BKV) {
        let more = t0 + BKV < kv_end;
        if (more) {                         // the next tile, into registers
            // @unroll
            for (var u = 0u; u < NL; u++) {
                kr[u] = k_quad(kb, t0 + BKV, lid + NT * u);
                vr[u] = v_quad(vb, t0 + BKV, lid + NT * u);
            }
        }
        // s[r][c]: row ty*4 + r, key t0 + tx*4 + c (zeroed explicitly: naga declares a loop
        // body's vars once, so a bare `var` there keeps the last iteration's value)
        var s = array<vec4<f32>, 4>(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0),
                                    vec4<f32>(0.0));
        // @unroll
        for (var d = 0u; d < D; d++) {
            let qv = Qs[d][ty];
            let kv = KP[d][tx];
            s[0] += qv.x * kv;
            s[1] += qv.y * kv;
            s[2] += qv.z * kv;
            s[3] += qv.w * kv;
        }
        // keys this thread's columns stand for: in range and not masked (causal: per row)
        var keep = vec4<bool>(false);
        // @unroll
        for (var c = 0u; c < 4u; c++) {
            let key = t0 + tx * 4u + c;
            keep[c] = key < p.Lk && (!HAS_MASK || mask[b * p.Lk + min(key, p.Lk - 1u)] != 0);
        }
        var mx = vec4<f32>(NEG);
        // @unroll
        for (var r = 0u; r < 4u; r++) {
            let end = key_end(r0 + ty * 4u + r);
            // @unroll
            for (var c = 0u; c < 4u; c++) {
                let ok = keep[c] && t0 + tx * 4u + c < end;
                s[r][c] = select(NEG, s[r][c], ok);
                mx[r] = max(mx[r], s[r][c]);
            }
        }
        workgroupBarrier();                 // every read of the K tile done: KP takes P
        let m_new = max(m, rows_max(ty, tx, mx));
        let corr = exp(m - m_new);
        m = m_new;
        l *= corr;
        // @unroll
        for (var r = 0u; r < 4u; r++) {
            o[r] *= corr[r];
            let pr = select(vec4<f32>(0.0), exp(s[r] - m_new[r]), s[r] > vec4<f32>(NEG));
            s[r] = pr;
            l[r] += pr.x + pr.y + pr.z + pr.w;
        }
        // P [key][row quad ^ (key / 4)]: the swizzle spreads a warp's 16 keys tx*4 + c over
        // the banks (2-way, not 16-way, conflicts)
        // @unroll
        for (var c = 0u; c < 4u; c++) {
            KP[tx * 4u + c][ty ^ tx] = vec4<f32>(s[0][c], s[1][c], s[2][c], s[3][c]);
        }
        workgroupBarrier();
        // @unroll
        for (var jj = 0u; jj < KPS; jj++) {
            let j = ks * KPS + jj;
            let pv = KP[j][ty ^ (j / 4u)];
            let vv = Vs[j][dq];
            o[0] += pv.x * vv;
            o[1] += pv.y * vv;
            o[2] += pv.z * vv;
            o[3] += pv.w * vv;
        }
        workgroupBarrier();
        if (more) {
            // @unroll
            for (var u = 0u; u < NL; u++) { put_kv(lid + NT * u, kr[u], vr[u]); }
            workgroupBarrier();
        }
    }
    let lt = rows_sum(ty, tx, l);
    // the key splits' partial rows: splits 1.. hand theirs over through KP, split 0 adds
    if (KS > 1u) {
        if (ks > 0u) {
            // @unroll
            for (var r = 0u; r < 4u; r++) {
                let e = ((ks - 1u) * BQ + ty * 4u + r) * DQ + dq;
                KP[e / 16u][e % 16u] = o[r];
            }
        }
        workgroupBarrier();
        if (ks == 0u) {
            for (var w = 1u; w < KS; w++) {
                // @unroll
                for (var r = 0u; r < 4u; r++) {
                    let e = ((w - 1u) * BQ + ty * 4u + r) * DQ + dq;
                    o[r] += KP[e / 16u][e % 16u];
                }
            }
        }
    }
    if (ks != 0u) { return; }
    // @unroll
    for (var r = 0u; r < 4u; r++) {
        let i = r0 + ty * 4u + r;
        if (i >= p.Lq) {                    // (no `continue`: the loop is written out)
        } else if (SPLITS > 1u) {           // the partial row and its (max, sum)
            let at = (sp * nwg.z * nwg.y * p.Lq + (b * nwg.y + h) * p.Lq + i) * (DQ + 1u);
            out[at + dq] = vec4<{{T}}>(o[r]);
            if (dq == 0u) { out[at + DQ] = vec4<{{T}}>(vec4<f32>(m[r], lt[r], 0.0, 0.0)); }
        } else {
            let inv = select(1.0 / lt[r], 0.0, lt[r] == 0.0);
            out[(b * p.o_b + h * p.o_h + i * p.o_i) / 4u + dq] = vec4<{{T}}>(o[r] * inv);
        }
    }
}
