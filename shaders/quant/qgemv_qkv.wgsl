// A decoder layer's q, k and v projections in ONE dispatch (decode rows, M <= 15): three
// quantized GEMVs of one normed x (common/qgemv_body.wgsl, as quant/qgemv_fused.wgsl runs
// each of them), each weight its own segment of workgroups along x:
//   segment 0: q = x' . wq, rotated (ROPE, where rq) into out (B, S, Hq, hd);
//   segment 1: k = x' . wk, rotated (where rk) into the KV cache kc at pos (CACHE);
//   segment 2: v = x' . wv into the KV cache vc at pos.
// x' is x rms-normalized (NORM). The three weights share K and the x rows, and one format
// or one each (SEGMENT_FORMAT `set_format(seg);` with QFORMAT_DECLS common/qformat_segments:
// a Q4_K_M file's v in Q6_K beside q and k in Q4_K). Each segment has ceil(N_i / (RPW * RPT))
// workgroups, found here from the override RPT so that every GEMV shape (TPR, RPT) is a
// variant of one call with one uniform.
// bindings: 0 x, 1 wq, 2 wk, 3 wv, 4 g, 5 pos (i32 [1], or [2, B] under KV_ROWS: see
// common/row_positions.wgsl), 6 freq (u32 [hd]), 7 kc, 8 vc, 9 out (q), 10 params: ten storage
// bindings, so the compiler offers this kernel only where
// maxStorageBuffersPerShaderStage >= 10 (Chromium and Dawn allow 10; WebGPU's default is 8).
// grid: (sum of the segments' workgroups, ceil(M / ROWS), 1).
// Why: SmolLM2's decode step was ~250 dispatches at ~8 us each (H100, Vulkan) for ~80 MB of
// weights; the q / k / v GEMVs are each latency-bound (9, 3 and 3 workgroups), so running
// them as one grid saves two dispatch latencies a layer (60 of ~250 a step).
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
const SWIGLU: bool = false;
const RES: bool = false;
const ROPE: bool = true;          // (the pair exchange runs; rotates() says where it applies)
const CACHE: bool = true;         // (caches() says which segments write a cache)
const COMBINE: bool = false;
var<workgroup> xs: array<vec4<f32>, 1>;

var<private> p: View;             // the segment's view: its N and word count
var<private> seg: u32;            // 0 q, 1 k, 2 v

fn enter(wx: u32) -> u32 {
    let per = RPW * RPT;
    let gq = (u.nq + per - 1u) / per;
    let gk = (u.nk + per - 1u) / per;
    seg = select(select(2u, 1u, wx < gq + gk), 0u, wx < gq);
    {{SEGMENT_FORMAT}}
    p = View(u.M, select(select(u.nv, u.nk, seg == 1u), u.nq, seg == 0u), u.K,
               select(select(u.nwv, u.nwk, seg == 1u), u.nwq, seg == 0u), u.eps, u.hd, u.S,
               u.T, 0u, 1u, 1u);
    return wx - select(select(gq + gk, gq, seg == 1u), 0u, seg == 0u);
}
fn rotates() -> bool { return select(u.rk != 0u, u.rq != 0u, seg == 0u) && seg < 2u; }
fn caches() -> bool { return seg > 0u; }
fn put(i: u32, e: f32) {
    if (seg == 0u) { out[i] = e; } else if (seg == 1u) { kc[i] = e; } else { vc[i] = e; }
}
fn res_at(i: u32) -> f32 { return 0.0; }
fn wword(i: u32, second: bool) -> u32 {
    if (seg == 0u) { return wq[i]; }
    if (seg == 1u) { return wk[i]; }
    return wv[i];
}
fn x_vec(r: u32, k4: u32) -> vec4<f32> {         // x times the norm weight under NORM
    var v = vec4<f32>(x[r * (p.K >> 2u) + k4]);
    if (NORM) { v *= g[k4]; }
    return v;
}
{{QGEMV_BODY}}
