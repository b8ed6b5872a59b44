// The int8 decode GEMV (opt-in, compiler/int8_decode.INT8_DECODE): out[r, n] = x8[r, :] .
// w[n, :] for the MR x rows of a batched decode step, x8 = x quantized to int8 per 32 values
// by quant/qx8.wgsl (llama.cpp's q8_1), w a Q4_K, Q6_K, Q4_1 or Q8_0 weight as stored (the
// pieces: common/qi8_pieces.wgsl; q / k / v: quant/qgemv_i8_qkv.wgsl); then SWIGLU
// (out = silu(x8 . w) * (x8 . w2), w2 the up projection of the same format) and RES
// (+ res[r, n]). The products are dot4I8Packed of the weight's quants (Q6_K's made signed)
// with x's int8s, exact in i32 within a 16- or 32-value piece; each piece's sum is then
// scaled by the weight's (sub-)block scale and x's block scale in f32, and Q4_K's min term
// (and Q4_1's) comes from qx8's per-16 sums. The numpy rule: quant.int8_decode_reference.
// bindings: 0 xq (MR, K / 16) vec4<u32>, 1 xs (MR, K / 16) vec2<f32>, 2 w, 3 w2 (SWIGLU, else
// a dummy), 4 res (MR, N) (RES), 5 out (MR, N), 6 params. w / w2 as {{W}}: Q4_K as vec4<u32>
// (144-byte blocks, 9 vec4), the others as u32 words (Q6_K's 210-byte and Q8_0's 34-byte
// blocks are 2-byte aligned, read by funnel shifts; nw words: no read past the last).
// grid (ceil(N / (RPT 256 / TPR)), 1, 1): a workgroup 256 threads, TPR of them a group of RPT
// weight rows (g, g + 256 / TPR, ..: RPT 256 / TPR rows a workgroup), each thread the pieces
// j, j + TPR, ... of its rows for all MR x rows (a weight word is decoded once for every x row,
// an x piece loaded once for the RPT weight rows); the TPR partial sums of each (row, x row)
// meet in workgroup memory, added in turn by the output's thread or, under TREE, by a tree of
// log2(TPR) steps.
// Why (H200, natively, bench/probes/qgemv_i8_staged_probe.py, 8 rows, Q4_K, us): the f32
// GEMVs at 8 rows cost 2.5-3x their 1-row time (gate+up 77.6 against 29.4, down 65.2 against
// 19.0, head 538 against 216: production's best variants, qgemv_variants_probe.py in the same
// call), bound by the instructions per weight each x row adds (an f32 x load and FMA a value
// and row). Here a row adds a quarter of the x bytes and one instruction per 4 products: gate+up
// 41.2 us (tpr 8), down 33.0 (tpr 32), head 258 (tpr 8). Tried in the probe: x staged once a
// workgroup in workgroup memory (gate+up 36.2 with 64 weight rows a workgroup, but the head
// 280 and down 28-84 by shape), x quantized in each workgroup's prologue (slower: 52.6).
// Tried (H200, bench/device_dawn.sh i8batch): the SwiGLU kernel writing its result as down's
// int8 x itself (a workgroup's 32 rows one block, so TPR 8): no qx8 dispatch for down (16 a
// step, 0.1 ms), but gate+up at TPR 8 took 0.97 ms a step against 0.69 at the tuned TPR 16:
// the 1B-shaped 8-row step went 3.24 -> 3.34 GPU ms. Taken out.
// Then (H200, bench/device_dawn.sh i8var: every variant timed by the autotuner at 8 rows, us):
// x loads bound it more than weight bytes, so two weight rows a thread (RPT 2: each x piece
// loaded feeds both) and a tree for TPR 64 / 128's partials (TREE): gate+up 53.2 -> 42.3
// (16, RPT 2), down (Q6_K) 46.6 -> 40.3 (64, tree), o-proj 22.0 -> 15.6 (64, tree), the Q6_K
// head 413.5 -> 276.8 (8, RPT 2); the 1B-shaped 8-sequence decode 4.64-4.67x -> 5.82-5.98x
// one sequence (bench/results/2026-11-29-h200-int8-decode-two-rows-a-thread.json). RPT 2 at
// TPR 64-128 loses (too few workgroups: the head at 128 x 2 took 2.1 ms).
// The cost: x rounded to 8 bits, ~5e-3 x max|y| a product (the probe's vs_f32_x), which is why
// it is opt-in.
struct Params { N: u32, K: u32, nw: u32 }
@group(0) @binding(0) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> xs: array<vec2<f32>>;
@group(0) @binding(2) var<storage, read_write> w: array<{{W}}>;
@group(0) @binding(3) var<storage, read_write> w2: array<{{W}}>;
@group(0) @binding(4) var<storage, read_write> res: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

override TPR: u32 = 8u;             // threads a weight row: 8 .. 128, a power of two
override TREE: bool = false;        // the TPR partials added by a tree (for TPR 64, 128)
override SWIGLU: bool = false;
override RES: bool = false;
const MR: u32 = {{MR}}u;            // x rows
const RPT: u32 = {{RPT}}u;          // weight rows a thread (1 or 2)
var<workgroup> red: array<f32, 256 * MR>;     // partial sums: (x row, thread)

{{WORDS}}
{{QFORMATS}}
{{QI8_PIECES}}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

// the totals of this thread's 2 outputs (weight row i of group q, x row r; o = i MR + r =
// lid, lid + 256) from every thread's partial sums `part` (row_dots'). Every thread calls it
// (barriers); red is free again when it returns.
fn totals(lid: u32, part: array<f32, MR * RPT>, q: u32) -> array<f32, 2> {
    let rows = 256u / TPR;
    for (var r = 0u; r < MR; r++) { red[r * 256u + lid] = part[r * RPT + q]; }
    workgroupBarrier();
    if (TREE) {                                    // (uniform: an override)
        for (var h = TPR / 2u; h > 0u; h >>= 1u) {
            if (lid % TPR < h) {
                for (var r = 0u; r < MR; r++) { red[r * 256u + lid] += red[r * 256u + lid + h]; }
            }
            workgroupBarrier();
        }
    }
    var v: array<f32, 2>;
    for (var t = 0u; t < 2u; t++) {
        let o = lid + 256u * t;
        let at = (o % MR) * 256u + min(o / MR, rows - 1u) * TPR;
        if (TREE) {
            v[t] = red[at];
        } else {
            var sum = 0.0;
            for (var k = 0u; k < TPR; k++) { sum += red[at + k]; }
            v[t] = sum;
        }
    }
    workgroupBarrier();                            // (red was read)
    return v;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let rows = 256u / TPR;                         // weight rows of a group a workgroup
    let j = lid % TPR;
    let n0 = wid.x * rows * RPT;
    var ns: array<u32, RPT>;                       // (rows past N compute and are dropped)
    for (var q = 0u; q < RPT; q++) { ns[q] = min(n0 + q * rows + lid / TPR, p.N - 1u); }
    let a = row_dots(ns, j, false);
    var first: array<array<f32, 2>, RPT>;
    for (var q = 0u; q < RPT; q++) { first[q] = totals(lid, a, q); }
    var up: array<array<f32, 2>, RPT>;
    if (SWIGLU) {                                  // (uniform: an override)
        let b = row_dots(ns, j, true);
        for (var q = 0u; q < RPT; q++) { up[q] = totals(lid, b, q); }
    }
    for (var q = 0u; q < RPT; q++) {
        for (var t = 0u; t < 2u; t++) {            // outputs (weight row, x row): o = i MR + r
            let o = lid + 256u * t;
            let i = o / MR;
            let r = o % MR;
            let nn = n0 + q * rows + i;
            if (i >= rows || nn >= p.N) { continue; }
            var v = first[q][t];
            if (SWIGLU) { v = silu(v) * up[q][t]; }
            if (RES) { v += res[r * p.N + nn]; }
            out[r * p.N + nn] = v;
        }
    }
}
