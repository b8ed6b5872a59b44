// A decoder layer's q, k and v projections of a batched decode step on int8 x (opt-in,
// compiler/int8_decode.INT8_DECODE): quant/qgemv_qkv.wgsl's job with quant/qgemv_i8.wgsl's
// products. x8 = the layer's normed x rounded to int8 per 32 values (quant/qx8.wgsl with its
// RMSNorm); each weight (Q4_K, Q6_K, Q4_1 or Q8_0; a format each: common/qformat_segments)
// its own segment of workgroups along x:
//   segment 0: q = x8 . wq, rotated (where rq) into out (B, S, Hq, hd);
//   segment 1: k = x8 . wk, rotated (where rk) into the KV cache kc at each row's position;
//   segment 2: v = x8 . wv into the KV cache vc.
// Rotary pairs are neighbouring weight rows (GGUF's llama order), so both of a pair are in one
// workgroup (256 / TPR rows, an even count) and each output reads its partner's sums from
// workgroup memory: no extra barrier.
// bindings: 0 xq, 1 xs (quant/qx8.wgsl), 2 wq, 3 wk, 4 wv (u32 words), 5 pos (i32 [1], or
// [2, B] under KV_ROWS: common/row_positions.wgsl), 6 freq (u32 [hd]), 7 kc, 8 vc, 9 out (q),
// 10 params: ten storage bindings, as quant/qgemv_qkv.wgsl.
// grid: (sum over the segments of ceil(n_i / (256 / TPR)), 1, 1).
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

override TPR: u32 = 8u;             // threads a weight row: 8, 16, 32 or 64
const MR: u32 = {{MR}}u;            // x rows
const RPT: u32 = 1u;                // weight rows a thread (common/qi8_pieces.wgsl)
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

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let rpw = 256u / TPR;                          // weight rows a workgroup (even)
    let n0 = segment(wid.x, rpw) * rpw;
    let j = lid % TPR;
    let n = min(n0 + lid / TPR, p.N - 1u);         // (rows past N compute and are dropped)
    let a = row_dots(array<u32, 1>(n), j, false);
    for (var r = 0u; r < MR; r++) { red[r * 256u + lid] = a[r]; }
    workgroupBarrier();
    for (var t = 0u; t < 2u; t++) {                // outputs (weight row i, x row r), 2 a thread
        let o = lid + 256u * t;
        let i = o / MR;
        let r = o % MR;
        let nn = n0 + i;
        if (i >= rpw || nn >= p.N) { continue; }
        var v = 0.0;
        var other = 0.0;                           // the rotary partner's (row i ^ 1)
        for (var q = 0u; q < TPR; q++) {
            v += red[r * 256u + i * TPR + q];
            other += red[r * 256u + (i ^ 1u) * TPR + q];
        }
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
