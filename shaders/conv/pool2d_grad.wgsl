// max_pool2d / avg_pool2d gradient: dy [N,C,OH,OW] (and x [N,C,H,W] for max) -> dx [N,C,H,W],
// f32 math. avg: each window spreads dy / (KH*KW) over its taps (padding counted, as the
// forward). max: each window's dy goes to its first maximal tap in scan order (torch's
// choice; padding is -inf), so each input element sums the windows it wins.
// Limits: one thread per input element re-scanning the windows that cover it (KH*KW each);
// fine for 2x2 / 3x3 pools. Tried nothing else yet.
// bindings: 0 dy, 1 x (a dummy for avg), 2 dx, 3 params. grid: 1 thread per input element.
struct Params { total: u32, H: u32, W: u32, OH: u32, OW: u32, KH: u32, KW: u32, sh: u32,
                sw: u32, ph: u32, pw: u32 }
@group(0) @binding(0) var<storage, read_write> dy: array<f32>;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> dx: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

override WG: u32 = 256;
override MAX: bool = true;
{{NCHW}}

// the window (oy, ox)'s first maximal tap, as y * W + x (-1: padding won, or none)
fn winner(plane: u32, oy: u32, ox: u32) -> i32 {
    var best = 0.0;
    var at = -1;
    var seen = false;
    for (var i = 0u; i < p.KH; i++) {
        for (var j = 0u; j < p.KW; j++) {
            let iy = tap_y(oy, i, 1u);
            let ix = tap_x(ox, j, 1u);
            if (iy < 0 || ix < 0) { continue; }            // -inf: never the first maximum
            let v = x[(plane * p.H + u32(iy)) * p.W + u32(ix)];
            if (!seen || v > best) {
                best = v;
                at = iy * i32(p.W) + ix;
                seen = true;
            }
        }
    }
    return at;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = element(wid, nwg, lid);
    if (e >= p.total) { return; }
    let xx = e % p.W;
    let yy = (e / p.W) % p.H;
    let plane = e / (p.W * p.H);
    var acc = 0.0;
    for (var i = 0u; i < p.KH; i++) {
        let oy = reach(yy, i, p.sh, p.ph, 1u, p.OH);
        if (oy < 0) { continue; }
        for (var j = 0u; j < p.KW; j++) {
            let ox = reach(xx, j, p.sw, p.pw, 1u, p.OW);
            if (ox < 0) { continue; }
            let g = dy[(plane * p.OH + u32(oy)) * p.OW + u32(ox)];
            if (MAX) {
                if (winner(plane, u32(oy), u32(ox)) == i32(yy * p.W + xx)) { acc += g; }
            } else {
                acc += g / f32(p.KH * p.KW);
            }
        }
    }
    dx[e] = acc;
}
