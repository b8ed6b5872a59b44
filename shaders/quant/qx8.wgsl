// x rows to int8 for the int8 decode GEMVs (quant/qgemv_i8.wgsl; opt-in int8_decode.INT8_DECODE):
// per 32 values of a row, q = round(v * 127 / amax) (halfway cases to even) with scale
// d = amax / 127 (q and d 0 where the 32 are all zero): llama.cpp's q8_1. With NORM the row is
// RMS-normalized first: v = x * (1 / sqrt(mean(x^2) + eps)) * g.
// bindings: 0 x (R, K) f32 as vec4, 1 g (K) f32 (a dummy without NORM), 2 q (R, K / 16) vec4
// of 16 int8 (4 a word, the first in the low byte; bound here as vec2: 8 a thread), 3 s
// (R, K / 16) vec2<f32>: for each
// 16 values (d of its 32, d * the sum of its 16 int8s: the term Q4_K's min needs), 4 params.
// K % 32 == 0 (the blocks of 4 threads past K are all past it). grid (R, 1, 1): a workgroup a row; per 2048
// values of it, thread t holds 8 (a quarter of a block of 32): the 4 of a block share their
// maxima, the 2 of a half their sums, through workgroup memory. Tried first: a thread a block
// (only K / 32 of 256 threads busy, 8 loads each in a row): 6.4 us a call on an H200 (the 1B
// shape's 8-row step: 49 calls, 0.31 ms); this form measured 6.1-6.6 us, the same: what a
// dispatch costs there whatever it does (bench/results/2026-11-29-h200-int8-decode-batched.json).
// So the lever is fewer of them (decoder/attn_combine.wgsl's QOUT writes one input itself).
// The numpy rule: webrlx/quant.py quantize_x8.
// Cost: one small dispatch a GEMV input (8 rows of 2048: 64 KB read); the GEMVs it feeds read
// a quarter of the x bytes and multiply 4 int8 pairs an instruction (dot4I8Packed).
struct Params { R: u32, K: u32, eps: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> g: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> q: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> s: array<vec2<f32>>;
@group(0) @binding(4) var<uniform> p: Params;

override NORM: bool = false;
var<workgroup> red: array<f32, 256>;

// 4 rounded values (|v| <= 127) packed as int8: the first in the low byte
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
        workgroupBarrier();                        // (red is reused below)
    }
    for (var c = 0u; c < p.K; c += 2048u) {
        let k = c + 8u * lid;                      // this thread's 8 values
        let live = k < p.K;
        let at = row + min(k, p.K - 8u) / 4u;
        var a = x[at];
        var b = x[at + 1u];
        if (NORM) {
            let gi = min(k, p.K - 8u) / 4u;
            a = a * scale * g[gi];
            b = b * scale * g[gi + 1u];
        }
        let e = max(abs(a), abs(b));
        red[lid] = max(max(e.x, e.y), max(e.z, e.w));
        workgroupBarrier();
        let f = lid & ~3u;                         // the block's first thread
        let m = max(max(red[f], red[f + 1u]), max(red[f + 2u], red[f + 3u]));
        let inv = select(127.0 / m, 0.0, m == 0.0);
        let ra = round(a * inv);
        let rb = round(b * inv);
        let t = ra + rb;
        workgroupBarrier();
        red[lid] = t.x + t.y + t.z + t.w;
        workgroupBarrier();
        if (live) {
            q[r * (p.K / 8u) + k / 8u] = vec2<u32>(pack4(ra), pack4(rb));
            if ((lid & 1u) == 0u) {                // the first of a half's 2 threads
                let d = m / 127.0;
                s[r * (p.K / 16u) + k / 16u] = vec2<f32>(d, d * (red[lid] + red[lid + 1u]));
            }
        }
        workgroupBarrier();
    }
}
