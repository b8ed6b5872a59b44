// rows quantized to int8 in groups of G along K, for quant/qmatmul_mmq.wgsl (the int8
// tensor-core prefill, lower_quant.mmq_ok): q[r, k] = round(v[r, k] / s[g, r]) with
// s[g, r] = max |v[r, g G .. g G + G - 1]| / 127 (0 where the group is all zeros, q then 0).
// The numpy rule is webrlx/quant.py's quantize_rows_i8 (same rounding: half to even).
// Source (WEIGHT): false: x rows, f32 (R = M rows of K); true: the rows of an (N, K) GGUF
// weight of any format of common/qformats.wgsl, decoded by deq8 (its scales folded in), so
// every format's weight reaches the kernel as int8 with one scale a group.
// bindings: 0 x f32 (as vec4) or 1 w (raw blocks as u32 words; the other a dummy), 2 q: R x K/4
// words (4 int8 a word, k's order, the first in the low byte), 3 s: K/G x R f32 (transposed:
// a group's scales of consecutive rows are neighbours, as the matmul's epilogue reads 8
// columns), 4 params. K % G == 0, G = 32 G32 with G32 a power of two <= 32.
// grid: (ceil(R K / 32 / 256), 1, 1) (x wraps into y past 65535 workgroups: wid.y * 65535);
// 256 threads, thread t owns 32 values (one 32-k block), the G32 threads of a group are
// neighbouring lanes of one subgroup (32 lanes: lower_quant.mmq_ok asks for it) and share the
// group's max through subgroupShuffleXor.
// Cost: one pass over the rows (x: 4 bytes read, 1 written a value; a weight: its blocks read,
// 1 byte written a weight, the decode by deq8 once).
enable subgroups;

struct Params { R: u32, K: u32, nw: u32, wx: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> q: array<u32>;
@group(0) @binding(3) var<storage, read_write> s: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

override WEIGHT: bool = false;
override G32: u32 = 8u;                           // 32-k blocks a group

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
    let blocks = p.K / 32u;                        // 32-k blocks a row
    let t = (wid.y * p.wx + wid.x) * 256u + lid;   // this thread's block: row r, block j
    let live = t < p.R * blocks;
    let tt = min(t, p.R * blocks - 1u);            // (lanes past the end compute and drop)
    let r = tt / blocks;
    let j = tt % blocks;
    var v: array<vec4<f32>, 8>;
    if (WEIGHT) {
        for (var u = 0u; u < 4u; u++) {            // 4 units of 8 weights
            let k = 32u * j + 8u * u;
            let d = deq8(r * (p.K / QK) + k / QK, (k % QK) / 8u, false);
            v[2u * u] = d[0];
            v[2u * u + 1u] = d[1];
        }
    } else {
        for (var i = 0u; i < 8u; i++) { v[i] = x[(r * p.K + 32u * j) / 4u + i]; }
    }
    var m = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let a = abs(v[i]);
        m = max(m, max(max(a.x, a.y), max(a.z, a.w)));
    }
    for (var o = 1u; o < G32; o <<= 1u) { m = max(m, subgroupShuffleXor(m, o)); }
    let inv = select(127.0 / m, 0.0, m == 0.0);
    if (!live) { return; }
    let base = (r * p.K + 32u * j) / 4u;
    for (var i = 0u; i < 8u; i++) { q[base + i] = pack4(v[i], inv); }
    if (j % G32 == 0u) { s[(j / G32) * p.R + r] = m / 127.0; }
}
