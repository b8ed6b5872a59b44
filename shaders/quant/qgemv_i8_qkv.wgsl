// A decoder layer's q, k and v projections of a batched decode step on int8 x (opt-in,
// compiler/int8_decode.INT8_DECODE): quant/qgemv_qkv.wgsl's job with quant/qgemv_i8.wgsl's
// products. x8 = the layer's normed x rounded to int8 per 32 values (quant/qx8.wgsl with its
// RMSNorm); each weight (Q4_K, Q6_K, Q4_1 or Q8_0; a format each: common/qformat_segments)
// its own segment of workgroups along x:
//   segment 0: q = x8 . wq, rotated (where rq) into out (B, S, Hq, hd);
//   segment 1: k = x8 . wk, rotated (where rk) into the KV cache kc at each row's position;
//   segment 2: v = x8 . wv into the KV cache vc.
// Rotary pairs are neighbouring weight rows (GGUF's llama order), so both of a pair are in one
// workgroup's group of rows (RPT groups of 256 / TPR rows, an even count: quant/qgemv_i8.wgsl's
// threads, weight rows a thread and TREE) and each output reads its partner's sums from
// workgroup memory: no extra barrier.
// bindings: 0 xq, 1 xs (quant/qx8.wgsl), 2 wq, 3 wk, 4 wv (u32 words), 5 pos (i32 [1], or
// [2, B] under KV_ROWS: common/row_positions.wgsl), 6 freq (u32 [hd]), 7 kc, 8 vc, 9 out (q),
// 10 params: ten storage bindings, as quant/qgemv_qkv.wgsl.
// grid: (sum over the segments of ceil(n_i / (RPT 256 / TPR)), 1, 1).
// Why: at 8 rows the f32 q/k/v kernel took 0.64-0.86 ms of the 1B-shaped step's 3.6-3.9
// (H200, bench/results/2026-11-29-h200-int8-decode-batched.json).
struct Params { K: u32, hd: u32, S: u32, T: u32, M: u32, nq: u32, nk: u32, nv: u32, nwq: u32,
                nwk: u32, nwv: u32, rq: u32, rk: u32 }
struct View { M: u32, N: u32, K: u32, nw: u32, S: u32 }
@group(0) @binding(0) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> xs: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> wq: array<u32>;
@group(0) @binding(3) var<storage, read_write> wk: array<u32>;
@group(0) @binding(4) var<storage, read_write> wv: array<u32>;
@group(0) @binding(5) var<storage, read_write> pos: array<i32>;
@group(0) @binding(6) var<storage, read_write> freq: array<u32>;
@group(0) @binding(7) var<storage, read_write> kc: array<f32>;
@group(0) @binding(8) var<storage, read_write> vc: array<f32>;
@group(0) @binding(9) var<storage, read_write> out: array<f32>;
@group(0) @binding(10) var<uniform> u: Params;

override TPR: u32 = 8u;             // threads a weight row: 8 .. 128, a power of two
override TREE: bool = false;        // the TPR partials added by a tree (for TPR 64, 128)
const MR: u32 = {{MR}}u;            // x rows
const RPT: u32 = {{RPT}}u;          // weight rows a thread (1 or 2)
var<workgroup> red: array<f32, 256 * MR>;     // partial sums: (x row, thread)

var<private> p: View;               // the segment's view: its N and word count
{{QKV_SEGMENTS}}

// workgroup column wx (common/qkv_segments.wgsl): sets seg, p and the segment's format
// (common/qformat_segments.wgsl: FMT_Q .. OWN_V); returns the column within the segment
fn segment(wx: u32, per: u32) -> u32 {
    let col = enter_segment(wx, per);
    set_format(seg);
    p = View(u.M, by_seg(u.nq, u.nk, u.nv), u.K, by_seg(u.nwq, u.nwk, u.nwv), u.S);
    return col;
}
fn wword(i: u32, second: bool) -> u32 { return seg_word(i); }
fn quad(i: u32, second: bool) -> vec4<u32> {
    return vec4<u32>(wword(4u * i, second), wword(4u * i + 1u, second),
                     wword(4u * i + 2u, second), wword(4u * i + 3u, second));
}

{{QFORMATS}}
{{QI8_PIECES}}
{{ROPE_TURN}}
{{ROW_POSITIONS}}

// the totals of this thread's 2 outputs (weight row i of group q, x row r; o = i MR + r =
// lid, lid + 256), each with its rotary partner's (row i ^ 1), from every thread's partial
// sums `part`. Every thread calls it (barriers); red is free again when it returns.
fn totals(lid: u32, part: array<f32, MR * RPT>, q: u32) -> array<vec2<f32>, 2> {
    let rows = 256u / TPR;
    for (var r = 0u; r < MR; r++) { red[r * 256u + lid] = part[r * RPT + q]; }
    workgroupBarrier();
    if (TREE) {                                    // (uniform: an override)
        for (var h = TPR / 2u; h > 0u; h >>= 1u) {
            if (lid % TPR < h) {
                for (var r = 0u; r < MR; r++) { red[r * 256u + lid] += red[r * 256u + lid + h]; }
            }
            workgroupBarrier();
        }
    }
    var v: array<vec2<f32>, 2>;
    for (var t = 0u; t < 2u; t++) {
        let o = lid + 256u * t;
        let i = min(o / MR, rows - 1u);
        let at = (o % MR) * 256u + i * TPR;
        let partner = (o % MR) * 256u + (i ^ 1u) * TPR;
        if (TREE) {
            v[t] = vec2<f32>(red[at], red[partner]);
        } else {
            var sum = vec2<f32>(0.0);
            for (var k = 0u; k < TPR; k++) { sum += vec2<f32>(red[at + k], red[partner + k]); }
            v[t] = sum;
        }
    }
    workgroupBarrier();                            // (red was read)
    return v;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let rows = 256u / TPR;                         // weight rows of a group (even)
    let n0 = segment(wid.x, rows * RPT) * rows * RPT;
    let j = lid % TPR;
    var ns: array<u32, RPT>;                       // (rows past N compute and are dropped)
    for (var q = 0u; q < RPT; q++) { ns[q] = min(n0 + q * rows + lid / TPR, p.N - 1u); }
    let a = row_dots(ns, j, false);
    for (var q = 0u; q < RPT; q++) {
        let tot = totals(lid, a, q);
        for (var t = 0u; t < 2u; t++) {            // outputs (weight row i, x row r), 2 a thread
            let o = lid + 256u * t;
            let i = o / MR;
            let r = o % MR;
            let nn = n0 + q * rows + i;
            if (i >= rows || nn >= p.N) { continue; }
            var v = tot[t].x;
            let other = tot[t].y;                  // the rotary partner's (row i ^ 1)
            let tpos = row_pos(r);
            if (rotates()) {
                let h = (nn % u.hd) / 2u;
                let position = u32(tpos);
                let sc = sincos_turn(position * freq[2u * h] + mulhi(position, freq[2u * h + 1u]));
                // even row: x1 cos - x2 sin (x2 = partner); odd row: x1 sin + x2 cos (x1 = partner)
                v = select(v * sc.y - other * sc.x, other * sc.x + v * sc.y, (nn & 1u) == 1u);
            }
            if (seg == 0u) {
                out[r * p.N + nn] = v;
            } else if (tpos >= 0 && u32(tpos) < u.T) {
                let heads = p.N / u.hd;
                let at = ((row_slot(r) * heads + nn / u.hd) * u.T + u32(tpos)) * u.hd + nn % u.hd;
                if (seg == 1u) { kc[at] = v; } else { vc[at] = v; }
            }
        }
    }
}
