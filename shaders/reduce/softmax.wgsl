// softmax / log_softmax over rows of a contiguous [rows, n] input, f32 math.
// bindings: 0 x, 1 out, 2 params. grid: one workgroup per row (rows spread over x and y).
// LOG: false -> exp(x - max) / sum, true -> x - max - log(sum).
struct Params { rows: u32, n: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<uniform> p: Params;

override LOG: bool = false;
const WG: u32 = 256u;
{{ROW_REDUCE}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = wid.y * nwg.x + wid.x;
    if (row >= p.rows) { return; }
    let base = row * p.n;
    var m = -3.4028234663852886e38;
    for (var j = lid; j < p.n; j += WG) { m = max(m, f32(x[base + j])); }
    m = reduce_max(lid, m);
    var s = 0.0;
    for (var j = lid; j < p.n; j += WG) { s += exp(f32(x[base + j]) - m); }
    s = reduce_sum(lid, s);
    let inv = 1.0 / s;
    let ls = log(s);
    for (var j = lid; j < p.n; j += WG) {
        let v = f32(x[base + j]) - m;
        out[base + j] = {{T}}(select(exp(v) * inv, v - ls, LOG));
    }
}
