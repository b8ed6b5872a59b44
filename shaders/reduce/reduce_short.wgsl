// reduce of short rows: out[r] = OP(x[r, 0..n]) * scale, one thread per row (reduce/reduce
// gives each row a 256-thread workgroup, which for MiniLM's mean pooling (1152 rows of 12) cost
// 100 ms of a 880 ms run on SwiftShader, where every workgroup has a fixed cost). Same
// Params, bindings and NaN rules as reduce/reduce (common/reduce_ops.wgsl); rows of up to
// lower_rows.SHORT_ROW_N elements. grid: rows threads over x and y.
struct Params { rows: u32, n: u32, x_off: u32, out_off: u32, scale: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{OUT}}>;
@group(0) @binding(2) var<uniform> p: Params;

override OP: u32 = 0u;
override WG: u32 = 64u;
{{IEEE}}
{{REDUCE_OPS}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let row = (wid.y * nwg.x + wid.x) * WG + lid;
    if (row >= p.rows) { return; }
    let base = p.x_off + row * p.n;
    var acc = identity();
    var best = 0xffffffffu;
    for (var j = 0u; j < p.n; j++) {
        let v = {{ACC}}(x[base + j]);
        if (OP == 4u) {
            if (best == 0xffffffffu || beats(v, j, acc, best)) { acc = v; best = j; }
        } else {
            acc = combine(acc, v);
        }
    }
    if (OP == 4u) {
        out[p.out_off + row] = {{OUT}}(best);
    } else {
        out[p.out_off + row] = {{OUT}}({{SCALE}});
    }
}
