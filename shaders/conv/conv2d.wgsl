// conv2d, NCHW input [N,C,H,W], weight [O, C/groups, KH, KW], out [N,O,OH,OW], f32 math.
// bindings: 0 x, 1 w, 2 bias [O] (a dummy when HAS_BIAS is false), 3 out, 4 params.
// grid: 1 thread per output element; zero padding; stride, dilation and groups in params.
struct Params { total: u32, C: u32, H: u32, W: u32, O: u32, OH: u32, OW: u32, KH: u32, KW: u32,
                sh: u32, sw: u32, ph: u32, pw: u32, dh: u32, dw: u32, groups: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> w: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> bias: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(4) var<uniform> p: Params;

override WG: u32 = 256;
override HAS_BIAS: bool = false;
{{NCHW}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = element(wid, nwg, lid);
    if (e >= p.total) { return; }
    let ox = e % p.OW;
    let oy = (e / p.OW) % p.OH;
    let o = (e / (p.OW * p.OH)) % p.O;
    let n = e / (p.OW * p.OH * p.O);
    let cg = p.C / p.groups;
    let c0 = (o / (p.O / p.groups)) * cg;
    var acc = 0.0;
    for (var c = 0u; c < cg; c++) {
        let xc = (n * p.C + c0 + c) * p.H;
        let wc = (o * cg + c) * p.KH;
        for (var i = 0u; i < p.KH; i++) {
            let iy = tap_y(oy, i, p.dh);
            if (iy < 0) { continue; }
            for (var j = 0u; j < p.KW; j++) {
                let ix = tap_x(ox, j, p.dw);
                if (ix < 0) { continue; }
                acc += f32(x[(xc + u32(iy)) * p.W + u32(ix)]) * f32(w[(wc + i) * p.KW + j]);
            }
        }
    }
    if (HAS_BIAS) { acc += f32(bias[o]); }
    out[e] = {{T}}(acc);
}
