// conv2d's gradient with respect to its weight: dy [N,O,OH,OW], x [N,C,H,W] -> dw [O, C/groups,
// KH, KW], f32 math: dw[o,c',i,j] sums dy[n,o,oy,ox] * x[n,c,oy*sh-ph+i*dh,ox*sw-pw+j*dw] over
// n, oy, ox (c = c' in o's group; padding reads 0).
// Limits: one thread per weight element looping over N * OH * OW (a batch of 64 digits: 4096
// terms; the lowering refuses loops past an adapter's loop cap); a split-K over the batch
// would serve big batches and images. Tried nothing else yet.
// bindings: 0 dy, 1 x, 2 dw, 3 params. grid: 1 thread per weight element.
struct Params { total: u32, N: u32, C: u32, H: u32, W: u32, O: u32, OH: u32, OW: u32, KH: u32,
                KW: u32, sh: u32, sw: u32, ph: u32, pw: u32, dh: u32, dw: u32, groups: u32 }
@group(0) @binding(0) var<storage, read_write> dy: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> dwt: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256;
{{NCHW}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = element(wid, nwg, lid);
    if (e >= p.total) { return; }
    let j = e % p.KW;
    let i = (e / p.KW) % p.KH;
    let cg = p.C / p.groups;
    let c_ = (e / (p.KW * p.KH)) % cg;
    let o = e / (p.KW * p.KH * cg);
    let c = (o / (p.O / p.groups)) * cg + c_;
    var acc = 0.0;
    for (var n = 0u; n < p.N; n++) {
        for (var oy = 0u; oy < p.OH; oy++) {
            let iy = tap_y(oy, i, p.dh);
            if (iy < 0) { continue; }
            for (var ox = 0u; ox < p.OW; ox++) {
                let ix = tap_x(ox, j, p.dw);
                if (ix < 0) { continue; }
                acc += dy[((n * p.O + o) * p.OH + oy) * p.OW + ox] *
                       x[((n * p.C + c) * p.H + u32(iy)) * p.W + u32(ix)];
            }
        }
    }
    dwt[e] = acc;
}
