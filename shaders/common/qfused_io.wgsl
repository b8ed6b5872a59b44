// The signature shared by the fused quantized kernels (quant/qgemv_fused for decode rows,
// quant/qmatmul_fused for prefills: variants of one call, so these must match): params,
// bindings (0 x, 1 w, 2 w2, 3 g, 4 res, 5 pos, 6 freq, 7 out, 8 params), the epilogue
// switches, and the weight-word / normed-x readers common/qblocks.wgsl needs.
struct Params { M: u32, N: u32, K: u32, nw: u32, eps: f32, hd: u32, S: u32, T: u32, G: u32,
                nsplit: u32, gran: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> w2: array<u32>;
@group(0) @binding(3) var<storage, read_write> g: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> res: array<f32>;
@group(0) @binding(5) var<storage, read_write> pos: array<i32>;
@group(0) @binding(6) var<storage, read_write> freq: array<u32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

override NORM: bool = false;
override SWIGLU: bool = false;
override RES: bool = false;
override ROPE: bool = false;
override CACHE: bool = false;
// COMBINE (quant/qgemv_fused, one x row): x is cached_attention's per-chunk partials [Hkv,
// nsplit, G, hd / 4 + 1] vec4 (decoder/attn_decode.wgsl; hd, G, nsplit, gran, S, T its
// params): the workgroup merges them into xs first (XS = K / 4), as decoder/attn_combine would
override COMBINE: bool = false;
override XS: u32 = 1u;
var<workgroup> xs: array<vec4<f32>, XS>;

fn wword(i: u32, second: bool) -> u32 {
    if (second) { return w2[i]; }
    return w[i];
}
fn x_vec(r: u32, k4: u32) -> vec4<f32> {         // x times the norm weight under NORM
    if (COMBINE) { return xs[k4]; }
    var v = vec4<f32>(x[r * (p.K >> 2u) + k4]);
    if (NORM) { v *= g[k4]; }
    return v;
}
