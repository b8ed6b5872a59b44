// quantized matmul for prefill (M > 4): out[M, N] = x[M, K] @ dequant(w)[N, K]^T (+ bias[N]).
// w: raw GGUF blocks of an (N, K) weight as u32 words: Q4_1 or Q8_0 by this kernel's own
// decoding (OWN, see quant/qgemv.wgsl), any other format of common/qformats.wgsl by its deq8
// (no prefetch of raw words there); x f32 or f16 (vec4: K % QK == 0), out f32, math f32;
// M and N are free (edges masked).
// bindings: 0 x, 1 w, 2 bias [N] (a dummy when HAS_BIAS is false), 3 out, 4 params.
// One source, two tile sizes ({{R}}), as matmul/matmul_tiled.wgsl: R = 1 -> 64x64 tiles, 4x4
// outputs a thread, a K step of one block (BK 32); R = 2 -> 128x128 tiles, 8x8 a thread, half
// a block a step (BK 16). grid: (ceil(N / TM), ceil(M / TM), 1); 16x16 threads, each owns
// R x R blocks of 4x4: rows i*64 + ty*4 + (0..3) x column quads j*16 + tx.
// Each step the workgroup dequantizes its TM weight rows' slice of K once into Ws (8
// consecutive weights a thread) and stages x's TM x BK tile in Xs, both k-major, so the inner
// loop reads R vec4s of each per 4 R^2 vec4 FMAs.
// Limits: workgroup memory: Xs + Ws = 16 KiB, WebGPU's default ceiling, which fixes TM x BK;
// then shared-memory bandwidth, as for the f32 matmul. On lavapipe R = 1 runs as fast as the
// f32 64x64 kernel on the same shapes (the FMA loop is ~85% of the time). Tried: prefetching
// the next step's raw words and x into registers during the FMAs (no change on lavapipe, where
// nothing hides load latency; kept for GPUs, as in the f32 kernel); for R = 2, a quarter block
// a step (BK 8, the f32 kernel's shape): no change. R = 2 measured ~20% slower than R = 1
// on lavapipe at M = 128, N = 576..1536, while the f32 128x128 kernel is ~1.6x faster than its
// 64x64 one there (cause not found). On an H100 (Vulkan) R = 1 ran ~6% faster than the f32
// 64x64 kernel at M = 128 (142 vs 151 us at N = 1536, K = 576), R = 2 ~5x slower there (too few
// workgroups). Both tile sizes go to the autotuner; R = 2 is the default only for grids of
// >= BIG_GRID 128x128 tiles, as for the f32 matmul.
struct Params { M: u32, N: u32, K: u32, nw: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

override HAS_BIAS: bool = false;
const R: u32 = {{R}}u;
const TM: u32 = 64u * R;          // tile rows = tile columns
const BK: u32 = 32u / R;          // k per step: the tiles hold 2048 values each
const Q: u32 = 16u * R;           // vec4s per k row of Xs / Ws
const WT: u32 = 4u / R;           // threads per weight row in a step
var<workgroup> Xs: array<vec4<f32>, 512>;   // [k][m / 4]: BK x Q
var<workgroup> Ws: array<vec4<f32>, 512>;   // [k][n / 4]: BK x Q

fn wword(i: u32, second: bool) -> u32 { return w[i]; }
{{QFORMATS}}

// the raw words of weights 8j..8j+7 of block b: Q4_1: (d m, the two nibble words whose low
// (j < 2) or high nibbles they are); Q8_0: (the word holding d, three words holding the
// 8 int8 at a byte shift of 0 or 16)
fn load_raw(b: u32, j: u32) -> vec4<u32> {
    if (Q8_0) {
        let start = b * 34u;
        let a = (start + 2u + j * 8u) / 4u;
        return vec4<u32>(w[start / 4u], w[a], w[a + 1u], w[min(a + 2u, p.nw - 1u)]);
    }
    let q = b * 5u + 1u + (j % 2u) * 2u;
    return vec4<u32>(w[b * 5u], w[q], w[q + 1u], 0u);
}

// weights 8j..8j+3 in [0], 8j+4..8j+7 in [1]
fn dequant(raw: vec4<u32>, b: u32, j: u32) -> array<vec4<f32>, 2> {
    if (Q8_0) {
        let start = b * 34u;
        let d = unpack2x16float(raw.x >> ((start & 2u) * 8u)).x;
        let sh = ((start + 2u) & 2u) * 8u;            // (v << 16) << (16 - sh) is 0 at sh = 0
        return array<vec4<f32>, 2>(
            d * int8x4((raw.y >> sh) | ((raw.z << 16u) << (16u - sh))),
            d * int8x4((raw.z >> sh) | ((raw.w << 16u) << (16u - sh))));
    }
    let dm = unpack2x16float(raw.x);
    let sh = (j / 2u) * 4u;
    return array<vec4<f32>, 2>(dm.x * bytes4((raw.y >> sh) & 0x0F0F0F0Fu) + dm.y,
                               dm.x * bytes4((raw.z >> sh) & 0x0F0F0F0Fu) + dm.y);
}

fn load_x(m: u32, k4: u32) -> vec4<f32> {
    if (m >= p.M) { return vec4<f32>(0.0); }
    return vec4<f32>(x[m * (p.K / 4u) + k4]);
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tx = lid.x;
    let ty = lid.y;
    let tid = ty * 16u + tx;
    let row0 = wid.y * TM;
    let col0 = wid.x * TM;
    let steps = p.K / BK;
    // this thread's loads: x rows xm and xm + TM / 2 at k quad xq of the step; weight row
    // col0 + wn, weights 8 * wj.. of the step (unit j = wj + (step % R) * WT of the block)
    let xm = tid / (BK / 4u);
    let xq = tid % (BK / 4u);
    let wn = tid / WT;
    let wj = tid % WT;
    let w_ok = col0 + wn < p.N;
    let wb = min(col0 + wn, p.N - 1u) * (p.K / QK);     // first block of the weight row
    var acc: array<vec4<f32>, 4u * R * R>;
    var xa = load_x(row0 + xm, xq);
    var xb = load_x(row0 + xm + TM / 2u, xq);
    var raw = vec4<u32>(0u);
    if (OWN) { raw = load_raw(wb, wj); }
    for (var s = 0u; s < steps; s++) {
        for (var c = 0u; c < 4u; c++) {
            Xs[(xq * 4u + c) * Q + xm / 4u][xm % 4u] = xa[c];
            Xs[(xq * 4u + c) * Q + (xm + TM / 2u) / 4u][xm % 4u] = xb[c];
        }
        var v: array<vec4<f32>, 2>;
        if (OWN) {
            v = dequant(raw, wb + s / R, wj + (s % R) * WT);
        } else {                                     // unit u of the row: 8 weights
            let u = s * (BK / 8u) + wj;
            v = deq8(wb + u / (QK / 8u), u % (QK / 8u), false);
        }
        if (!w_ok) { v = array<vec4<f32>, 2>(vec4<f32>(0.0), vec4<f32>(0.0)); }
        for (var c = 0u; c < 4u; c++) {
            Ws[(wj * 8u + c) * Q + wn / 4u][wn % 4u] = v[0][c];
            Ws[(wj * 8u + 4u + c) * Q + wn / 4u][wn % 4u] = v[1][c];
        }
        workgroupBarrier();
        if (s + 1u < steps) {                        // next step's loads overlap the FMAs
            let t = s + 1u;
            xa = load_x(row0 + xm, t * (BK / 4u) + xq);
            xb = load_x(row0 + xm + TM / 2u, t * (BK / 4u) + xq);
            if (OWN) { raw = load_raw(wb + t / R, wj + (t % R) * WT); }
        }
        for (var k = 0u; k < BK; k++) {
            var a: array<vec4<f32>, R>;
            var b: array<vec4<f32>, R>;
            for (var i = 0u; i < R; i++) {
                a[i] = Xs[k * Q + i * 16u + ty];
                b[i] = Ws[k * Q + i * 16u + tx];
            }
            for (var i = 0u; i < R; i++) {
                for (var j = 0u; j < R; j++) {
                    let at = i * 4u * R + j;
                    acc[at] += a[i].x * b[j];
                    acc[at + R] += a[i].y * b[j];
                    acc[at + 2u * R] += a[i].z * b[j];
                    acc[at + 3u * R] += a[i].w * b[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var j = 0u; j < R; j++) {
        let col = col0 + (j * 16u + tx) * 4u;
        var bv = vec4<f32>(0.0);
        for (var c = 0u; c < 4u; c++) {
            if (HAS_BIAS && col + c < p.N) { bv[c] = bias[col + c]; }
        }
        for (var i = 0u; i < R; i++) {
            for (var r = 0u; r < 4u; r++) {
                let row = row0 + i * 64u + ty * 4u + r;
                let v = acc[(i * 4u + r) * R + j] + bv;
                for (var c = 0u; c < 4u; c++) {
                    if (row < p.M && col + c < p.N) { out[row * p.N + col + c] = v[c]; }
                }
            }
        }
    }
}
