// x rows to int8 for the int8 decode GEMVs (quant/qgemv_i8.wgsl; opt-in, lower_quant.INT8_DECODE):
// per 32 values of a row, q = round(v * 127 / amax) (halfway cases to even) with scale
// d = amax / 127 (q and d 0 where the 32 are all zero): llama.cpp's q8_1. With NORM the row is
// RMS-normalized first: v = x * (1 / sqrt(mean(x^2) + eps)) * g.
// bindings: 0 x (R, K) f32 as vec4, 1 g (K) f32 (a dummy without NORM), 2 q (R, K / 16) vec4:
// 16 int8 a vec4 (4 a word, the first in the low byte), 3 s (R, K / 16) vec2<f32>: for each
// 16 values (d of its 32, d * the sum of its 16 int8s: the term Q4_K's min needs), 4 params.
// K % 32 == 0. grid (R, 1, 1): a workgroup a row, thread t the blocks of 32 t, t + 256, ...
// The numpy rule: webrlx/quant.py quantize_x8.
// Cost: one small dispatch a GEMV input (8 rows of 2048: 64 KB read); the GEMVs it feeds read
// a quarter of the x bytes and multiply 4 int8 pairs an instruction (dot4I8Packed).
struct Params { R: u32, K: u32, eps: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> g: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> q: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> s: array<vec2<f32>>;
@group(0) @binding(4) var<uniform> p: Params;

override NORM: bool = false;
var<workgroup> red: array<f32, 256>;

// 4 values rounded to int8 (|v * inv| <= 127), packed: the first in the low byte
fn pack4(v: vec4<f32>) -> u32 {
    let i = vec4<i32>(v);
    return (u32(i.x) & 255u) | ((u32(i.y) & 255u) << 8u) | ((u32(i.z) & 255u) << 16u) |
           (u32(i.w) << 24u);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = wid.x;
    let row = r * (p.K / 4u);                      // the row's first vec4
    var scale = 1.0;
    if (NORM) {                                    // (uniform: an override)
        var ss = 0.0;
        for (var i = lid; i < p.K / 4u; i += 256u) { let v = x[row + i]; ss += dot(v, v); }
        red[lid] = ss;
        workgroupBarrier();
        for (var o = 128u; o > 0u; o >>= 1u) {
            if (lid < o) { red[lid] += red[lid + o]; }
            workgroupBarrier();
        }
        scale = inverseSqrt(red[0] / f32(p.K) + p.eps);
    }
    for (var b = lid; b < p.K / 32u; b += 256u) {
        var v: array<vec4<f32>, 8>;
        var m = 0.0;
        for (var i = 0u; i < 8u; i++) {
            var a = x[row + 8u * b + i];
            if (NORM) { a = a * scale * g[8u * b + i]; }
            v[i] = a;
            let e = abs(a);
            m = max(m, max(max(e.x, e.y), max(e.z, e.w)));
        }
        let inv = select(127.0 / m, 0.0, m == 0.0);
        let d = m / 127.0;
        for (var h = 0u; h < 2u; h++) {
            var words: vec4<u32>;
            var sum = vec4<f32>(0.0);
            for (var e = 0u; e < 4u; e++) {
                let rv = round(v[4u * h + e] * inv);
                words[e] = pack4(rv);
                sum += rv;
            }
            let at = r * (p.K / 16u) + 2u * b + h;
            q[at] = words;
            s[at] = vec2<f32>(d, d * (sum.x + sum.y + sum.z + sum.w));
        }
    }
}
