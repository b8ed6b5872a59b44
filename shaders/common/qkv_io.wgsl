// The q / k / v projections' dispatch (quant/qgemv_qkv.wgsl for decode rows, quant/
// qmatmul_smat_qkv.wgsl for prefills on tensor cores: variants of one call, so these must
// match): params, bindings (0 x, 1 wq, 2 wk, 3 wv, 4 g, 5 pos, 6 freq, 7 kc, 8 vc, 9 out (q),
// 10 params), NORM, and the segment a workgroup column is in (0 q, 1 k, 2 v: its weight, its
// view `p` and its format), with the weight-word / normed-x readers common/qblocks.wgsl needs.
struct Params { M: u32, K: u32, eps: f32, hd: u32, S: u32, T: u32, nq: u32, nk: u32,
                nv: u32, nwq: u32, nwk: u32, nwv: u32, rq: u32, rk: u32 }
struct View { M: u32, N: u32, K: u32, nw: u32, eps: f32, hd: u32, S: u32, T: u32, G: u32,
              nsplit: u32, gran: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> wq: array<u32>;
@group(0) @binding(2) var<storage, read_write> wk: array<u32>;
@group(0) @binding(3) var<storage, read_write> wv: array<u32>;
@group(0) @binding(4) var<storage, read_write> g: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> pos: array<i32>;
@group(0) @binding(6) var<storage, read_write> freq: array<u32>;
@group(0) @binding(7) var<storage, read_write> kc: array<f32>;
@group(0) @binding(8) var<storage, read_write> vc: array<f32>;
@group(0) @binding(9) var<storage, read_write> out: array<f32>;
@group(0) @binding(10) var<uniform> u: Params;

override NORM: bool = false;

var<private> p: View;             // the segment's view: its N and word count
{{QKV_SEGMENTS}}

// workgroup column wx of a grid whose segments take ceil(n_i / per) columns each: sets seg, p
// and the segment's format; returns the column within the segment
fn segment(wx: u32, per: u32) -> u32 {
    let col = enter_segment(wx, per);
    {{SEGMENT_FORMAT}}
    p = View(u.M, by_seg(u.nq, u.nk, u.nv), u.K, by_seg(u.nwq, u.nwk, u.nwv), u.eps, u.hd, u.S,
             u.T, 0u, 1u, 1u);
    return col;
}
fn wword(i: u32, second: bool) -> u32 { return seg_word(i); }
fn x_vec(r: u32, k4: u32) -> vec4<f32> {         // x times the norm weight under NORM
    var v = vec4<f32>(x[r * (p.K >> 2u) + k4]);
    if (NORM) { v *= g[k4]; }
    return v;
}
