// Rows to int8 in groups of G along K, for the int8 prefill without tensor cores
// (quant/qmatmul_i8.wgsl; opt-in compiler/int8_prefill.INT8_PREFILL): per G values of a row,
// q = round(v * inv) (halfway cases to even), inv = 127 / amax rounded as f32 division
// rounds, with scale amax / 127 (0 where the G are all zero, q then 0). v: x's f32 rows, or
// (WEIGHT) a GGUF weight's rows as common/qformats.wgsl's deq8 decodes them (any format, its
// scales folded in). The numpy rule: webrlx/quant.py quantize_rows_i8(v, G).
// No subgroup operations (quant/qrows_i8.wgsl's form for Dawn on NVIDIA): a group's G / 8
// threads share their maxima by a tree in workgroup memory, so every adapter runs it (the
// tests run it on lavapipe and SwiftShader).
// WGSL's division may be 2.5 ulp off, so a value exactly halfway between two int8 steps (the
// small-integer formats, Q4_0 to Q3_K, have many) may round either way: the tests allow one
// step there (tests/backend/test_int8_prefill.py). Tried: a Newton step on inv, which on
// lavapipe (an fma not fused) moved correct quotients by an ulp.
// bindings: 0 x f32 (as vec4) or 1 w (raw blocks as u32 words; the other a dummy), 2 q: R x K/4
// words (4 int8 a word, k's order, the first in the low byte; bound as vec2: a thread's 8),
// 3 s: R x K/G f32 (row-major), 4 params. K % G == 0, G = 8 G8, G8 a power of two 4 .. 32.
// grid: (ceil(R K / 2048), 1, 1), x wrapping into y past wx workgroups; 256 threads, thread t
// a unit of 8 values, G8 neighbouring threads a group.
// Cost: one pass over the rows (a weight: its blocks read, ~1 byte a weight written), each
// call: the int8 copy of a weight is not kept, to hold GPU memory at the file's size.
struct Params { R: u32, K: u32, nw: u32, wx: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> q: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> s: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

override WEIGHT: bool = true;
override G8: u32 = 32u;                           // units (8 values) a group: 4 .. 32
var<workgroup> part: array<f32, 256>;             // the threads' max |v|, then their group's

{{ROWS_I8_UNIT}}
{{QFORMATS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let at = unit_of(wid, lid);                    // (t, tt, row r, unit u)
    let v = unit_values(at.y, at.z, at.w);
    part[lid] = unit_amax(v);
    workgroupBarrier();
    for (var o = G8 / 2u; o > 0u; o >>= 1u) {      // (groups start at multiples of G8)
        if (lid % G8 < o) { part[lid] = max(part[lid], part[lid + o]); }
        workgroupBarrier();
    }
    let m = part[lid & ~(G8 - 1u)];
    let inv = select(127.0 / m, 0.0, m == 0.0);
    if (at.x >= p.R * (p.K / 8u)) { return; }
    q[at.y] = vec2<u32>(pack4(v[0], inv), pack4(v[1], inv));
    if (at.w % G8 == 0u) { s[at.z * (p.K / (8u * G8)) + at.w / G8] = m / 127.0; }
}
