// clamp: out[i] = min(max(x[i], lo), hi) over a contiguous input, f32 math; NaN stays NaN.
// bindings: 0 x, 1 out, 2 params. grid: 1 thread per element (continued in y).
struct Params { n: u32, lo: f32, hi: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<uniform> p: Params;

override WG: u32 = 256;
{{IEEE}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid;
    if (i >= p.n) { return; }
    let v = f32(x[i]);
    out[i] = {{T}}(select(min(max(v, p.lo), p.hi), v, isnan_(v)));
}
