// layer_norm / rms_norm of long rows, pass 2 of 2 (after norm/norm_parts.wgsl): each
// workgroup combines its row's chunk statistics (count c_p = chunk size, sum s_p, q_p) into
// mean = sum s_p / n and var = sum (q_p + c_p (s_p / c_p - mean)^2) / n (RMS: mean square
// sum q_p / n, no centring), then writes its chunk: y = (v - mean) / sqrt(var + eps) * w + b
// with v = x (+ r).
// bindings: 0 x, 1 r, 2 w, 3 b (dummies when HAS_RES / HAS_W / HAS_B are false), 4 parts,
// 5 out, 6 params. grid: (nparts, rows, 1).
struct Params { rows: u32, n: u32, chunk: u32, nparts: u32, eps: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> r: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> w: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> b: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> parts: array<vec2<f32>>;
@group(0) @binding(5) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(6) var<uniform> p: Params;

override RMS: bool = false;
override HAS_W: bool = false;
override HAS_B: bool = false;
override HAS_RES: bool = false;
const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let part = wid.x;
    let row = wid.y;
    let pb = row * p.nparts;
    let n = f32(p.n);
    // every thread combines the row's few parts itself (nparts = n / chunk)
    var s = 0.0;
    for (var i = 0u; i < p.nparts; i++) { s += parts[pb + i].x; }
    let mean = select(s / n, 0.0, RMS);
    var q = 0.0;
    for (var i = 0u; i < p.nparts; i++) {
        let c = f32(min(p.chunk, p.n - i * p.chunk));
        let d = parts[pb + i].x / c - mean;
        q += parts[pb + i].y + select(c * d * d, 0.0, RMS);
    }
    let inv = inverseSqrt(q / n + p.eps);
    let j0 = part * p.chunk;
    let j1 = min(j0 + p.chunk, p.n);
    let base = row * p.n;
    for (var j = j0 + lid; j < j1; j += WG) {
        var v = f32(x[base + j]);
        if (HAS_RES) { v += f32(r[base + j]); }
        var y = (v - mean) * inv;
        if (HAS_W) { y *= f32(w[j]); }
        if (HAS_B) { y += f32(b[j]); }
        out[base + j] = {{T}}(y);
    }
}
