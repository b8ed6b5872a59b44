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
// columns), 4 params. K % G == 0, G = 8 G8 a power of two from 32 to 2048.
// grid: (ceil(R K / 2048), 1, 1) (x wraps into y past 65535 workgroups: wid.y * wx); 256
// threads, thread t owns 8 values (a unit: x's two vec4, or deq8's 8 weights), so that
// neighbouring threads read and write neighbouring bytes. A group's G / 8 threads share its
// max: within a subgroup by subgroupShuffleXor (32 lanes: lower_quant.mmq_ok asks for it),
// past 32 (G > 256) through the subgroups' maxima in workgroup memory (a workgroup's 2048
// values hold whole groups: G <= 2048 and K % G == 0).
// Cost: one pass over the rows (x: 4 bytes read, 1 written a value; a weight: its blocks read,
// 1 byte written a weight, the decode by deq8 once). Measured under Dawn on an H200 (the
// 1B-shaped Q4_K_M 512-token prefill, bench/device_dawn.sh mmq, 2026-11-28): a thread a
// 32-value block (strided reads, a quarter of the threads) and x quantized for each product:
// 1.45 ms for x's, 2.72 for the Q4_K weights; a thread a unit and x shared by the products
// that read it (EmitContext.rows_i8): 0.63 and 2.05-2.09 (~0.9 TB/s). Tried: Q4_K / Q6_K
// through the GEMVs' kunit (a word of quants a unit, written at its two 4-aligned k): 2.03 ms,
// no gain (all tests passed under Dawn), dropped.
enable subgroups;

struct Params { R: u32, K: u32, nw: u32, wx: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> q: array<vec2<u32>>;
@group(0) @binding(3) var<storage, read_write> s: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

override WEIGHT: bool = false;
override G8: u32 = 32u;                           // units (8 values) a group: 4 .. 256
var<workgroup> part: array<f32, 8>;               // the subgroups' maxima (G8 > 32)

{{ROWS_I8_UNIT}}
{{QFORMATS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let at = unit_of(wid, lid);                    // (t, tt, row r, unit u)
    let v = unit_values(at.y, at.z, at.w);
    var m = unit_amax(v);
    for (var o = 1u; o < min(G8, 32u); o <<= 1u) { m = max(m, subgroupShuffleXor(m, o)); }
    if (G8 > 32u) {                                // (uniform: an override)
        if (lid % 32u == 0u) { part[lid / 32u] = m; }
        workgroupBarrier();
        let first = (lid / G8) * (G8 / 32u);       // this group's subgroups
        for (var i = 0u; i < G8 / 32u; i++) { m = max(m, part[first + i]); }
    }
    let inv = select(127.0 / m, 0.0, m == 0.0);
    if (at.x >= p.R * (p.K / 8u)) { return; }
    q[at.y] = vec2<u32>(pack4(v[0], inv), pack4(v[1], inv));
    if (at.w % G8 == 0u) { s[(at.w / G8) * p.R + at.z] = m / 127.0; }
}
