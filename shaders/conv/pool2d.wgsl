// max_pool2d / avg_pool2d over NCHW [N,C,H,W] -> [N,C,OH,OW], f32 math.
// bindings: 0 x, 1 out, 2 params. grid: 1 thread per output element.
// Padding is -inf for max (a NaN in the window gives NaN, as torch) and 0 for avg; avg divides by KH*KW (count_include_pad, as torch).
struct Params { total: u32, H: u32, W: u32, OH: u32, OW: u32, KH: u32, KW: u32, sh: u32,
                sw: u32, ph: u32, pw: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<uniform> p: Params;

override WG: u32 = 256;
override MAX: bool = true;
{{NCHW}}
{{IEEE}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let e = element(wid, nwg, lid);
    if (e >= p.total) { return; }
    let ox = e % p.OW;
    let oy = (e / p.OW) % p.OH;
    let plane = e / (p.OW * p.OH);
    var acc = select(0.0, inf_(0x80000000u), MAX);
    for (var i = 0u; i < p.KH; i++) {
        let iy = tap_y(oy, i, 1u);
        if (iy < 0) { continue; }
        for (var j = 0u; j < p.KW; j++) {
            let ix = tap_x(ox, j, 1u);
            if (ix < 0) { continue; }
            let v = f32(x[(plane * p.H + u32(iy)) * p.W + u32(ix)]);
            acc = select(acc + v, fmax_(acc, v), MAX);
        }
    }
    out[e] = {{T}}(select(acc / f32(p.KH * p.KW), acc, MAX));
}
