// conv2d's gradient with respect to its input (a transposed convolution): dy [N,O,OH,OW],
// weight [O, C/groups, KH, KW] -> dx [N,C,H,W], f32 math. dx[n,c,y,x] sums dy[n,o,oy,ox] *
// w[o,c',i,j] over the taps whose window lands on (y, x): oy * sh - ph + i * dh = y (and the
// same for x), o over c's group.
// Limits: one thread per input element, gathers (no atomics, deterministic); fine for the
// small CNNs it trains (digits: 8x8 planes). Tried nothing else yet.
// bindings: 0 dy, 1 w, 2 dx, 3 params. grid: 1 thread per input element.
struct Params { total: u32, C: u32, H: u32, W: u32, O: u32, OH: u32, OW: u32, KH: u32, KW: u32,
                sh: u32, sw: u32, ph: u32, pw: u32, dh: u32, dw: u32, groups: u32 }
@group(0) @binding(0) var<storage, read_write> dy: array<f32>;
@group(0) @binding(1) var<storage, read_write> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256;
{{NCHW}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = element(wid, nwg, lid);
    if (e >= p.total) { return; }
    let xx = e % p.W;
    let yy = (e / p.W) % p.H;
    let c = (e / (p.W * p.H)) % p.C;
    let n = e / (p.W * p.H * p.C);
    let cg = p.C / p.groups;
    let og = p.O / p.groups;
    let grp = c / cg;
    var acc = 0.0;
    for (var i = 0u; i < p.KH; i++) {
        let oy = reach(yy, i, p.sh, p.ph, p.dh, p.OH);
        if (oy < 0) { continue; }
        for (var j = 0u; j < p.KW; j++) {
            let ox = reach(xx, j, p.sw, p.pw, p.dw, p.OW);
            if (ox < 0) { continue; }
            for (var o = grp * og; o < (grp + 1u) * og; o++) {
                acc += dy[((n * p.O + o) * p.OH + u32(oy)) * p.OW + u32(ox)] *
                       w[((o * cg + c - grp * cg) * p.KH + i) * p.KW + j];
            }
        }
    }
    dx[e] = acc;
}
