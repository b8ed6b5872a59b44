// A GGUF weight's rows to int8 in blocks of 32 along K, for the int8 prefill without tensor
// cores (quant/qmatmul_i8.wgsl; opt-in compiler/int8_prefill.INT8_PREFILL): per 32 values of a
// row, q = round(v * 127 / amax) (halfway cases to even) with scale amax / 127 (0 where the 32
// are all zero, q then 0), v the weight as decoded by common/qformats.wgsl's deq8 (any format,
// its scales folded in). The numpy rule: webrlx/quant.py quantize_rows_i8(w, 32).
// Why 32 (llama.cpp's block) and not quant/qrows_i8.wgsl's groups of up to 2048: a weight
// re-quantized per 2048 values loses the per-sub-block scales of Q4_K / Q6_K (its logits moved
// 4e-2 x max on the 1B-shaped prefill); per 32 the int8 copy keeps ~8 bits of every sub-block.
// And no subgroup operations: a block's 4 threads share their maxima through workgroup
// memory, so every adapter runs it (the tests run it on lavapipe and SwiftShader).
// bindings: 0 w (raw blocks as u32 words), 1 q: R x K/4 words (4 int8 a word, k's order, the
// first in the low byte; bound as vec2: a thread's 8), 2 s: R x K/32 f32 (row-major), 3 params.
// K % 32 == 0. grid: (ceil(R K / 2048), 1, 1), x wrapping into y past wx workgroups; 256
// threads, thread t a unit of 8 values (deq8's), 4 neighbouring threads a block.
// Cost: one pass over the weight (its blocks read, 1.125 bytes a weight written), each call:
// the int8 copy is not kept, to hold GPU memory at the file's size.
struct Params { R: u32, K: u32, nw: u32, wx: u32 }
@group(0) @binding(0) var<storage, read_write> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> q: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read_write> s: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> part: array<f32, 256>;             // each thread's max |v|

fn wword(i: u32, second: bool) -> u32 { return w[i]; }
{{QFORMATS}}

// 4 values rounded to int8 (|v * inv| <= 127), packed: the first in the low byte
fn pack4(v: vec4<f32>, inv: f32) -> u32 {
    let i = vec4<i32>(round(v * inv));
    return (u32(i.x) & 255u) | ((u32(i.y) & 255u) << 8u) | ((u32(i.z) & 255u) << 16u) |
           (u32(i.w) << 24u);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let units = p.K / 8u;                          // units a row
    let t = (wid.y * p.wx + wid.x) * 256u + lid;   // this thread's unit: row r, unit u
    let live = t < p.R * units;
    let tt = min(t, p.R * units - 1u);             // (threads past the end compute and drop)
    let r = tt / units;
    let u = tt % units;
    let k = 8u * u;
    let d = deq8(r * (p.K / QK) + k / QK, (k % QK) / 8u, false);
    let e = max(abs(d[0]), abs(d[1]));
    part[lid] = max(max(e.x, e.y), max(e.z, e.w));
    workgroupBarrier();
    let b0 = lid & ~3u;                            // the block's 4 threads (units 4j .. 4j + 3)
    let m = max(max(part[b0], part[b0 + 1u]), max(part[b0 + 2u], part[b0 + 3u]));
    let inv = select(127.0 / m, 0.0, m == 0.0);
    if (!live) { return; }
    q[tt] = vec2<u32>(pack4(d[0], inv), pack4(d[1], inv));
    if (u % 4u == 0u) { s[r * (p.K / 32u) + u / 4u] = m / 127.0; }
}
