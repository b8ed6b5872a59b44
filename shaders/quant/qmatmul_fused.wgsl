// quantized matmul for prefills (M of 16..256 rows) with the fused neighbours of
// quant/qgemv_fused.wgsl (NORM, SWIGLU, RES, ROPE, CACHE: same bindings, params and meaning;
// the two kernels are variants of one call).
// out[r, n] = epilogue(x'[r, :] . dequant(w)[n, :]); w, w2 (N, K) GGUF blocks as u32 words
// (any format of common/qformats.wgsl, see common/qblocks.wgsl), x [M, K] (K % QK == 0), all
// f32 math.
// bindings: 0 x, 1 w, 2 w2, 3 g, 4 res, 5 pos (i32 [1]), 6 freq (u32 [hd]), 7 out, 8 params.
// grid: (ceil(N / 64), ceil(M / (4 * RG)), 1); 256 threads = KS K-groups x RG row quads x 16
// column quads. A workgroup owns a tile of 4 RG rows x 64 columns; thread (g, ty, tx) owns
// rows r0 + 4 ty .. + 3 x columns n0 + 4 tx .. + 3 (rope pairs are never split) over the
// units u = g, g + KS, ... of K (8 weights each), then the KS partial tiles are summed through
// workgroup memory as a tree and group 0 applies the epilogue.
// Why: a prefill of 128 rows through the GEMV reached only 3-4 TFLOP/s on an H100 (each
// thread did 4 rows x 1 weight row a unit: 8 x loads + 2 weight words per 32 FMAs), and the
// 64x64-tile kernel (quant/qmatmul_tiled.wgsl) gets 48 workgroups at M = 128, N = 1536 and
// has no epilogues. Here a thread does 4 x 4 outputs a unit (8 x loads, shared by the 16
// threads of a row quad, + 8 weight words per 128 FMAs) and the K split within the workgroup
// gives 256 threads per 4 RG x 64 tile without a second pass. No workgroup tiles: the x
// loads of a warp hit 2 addresses (broadcast) and the weight words are read once per row
// quad from L1/L2; the workgroup memory is the 4 KiB reduction buffer.
// Measured on an H100 (bench/probes/qmatmul_fused_probe.py, 128 rows, us; GEMV's best shape first):
// q 576x576 + norm + rope 48.5 -> 26.1 (RG 1); gate+up 2 x 1536x576 + swiglu 101.7 -> 62.2
// (RG 2); down 576x1536 + res 56.0 -> 40.9 (RG 1); o 32.9 -> 21.3 (RG 1). A 128-token prefill
// went from 14.5 to 8.5 ms of GPU time (bench/probes/prefill_probe.py). Taller tiles (RG 4, 8)
// lose:
// fewer workgroups. Limits: the k / v projections (N = 192: 3 column tiles) stay
// latency-bound at ~25 us, where the GEMV is as fast; per thread the x loads (8 vec4 a unit,
// broadcast in a warp) and the dequantization of 4 weight rows. On lavapipe the GEMV's CPU
// shape (1x8) is ~1.7x faster than this kernel, so CPU adapters keep it.
{{QFUSED_IO}}
override RG: u32 = 4u;            // row quads per workgroup: 1, 2, 4 or 8
override KS: u32 = 4u;            // K-groups: 16 / RG (set by the host)
const ROWS: u32 = 4u;             // (common/qblocks.wgsl: x rows per load_x)
const RPT: u32 = 1u;
const RQ: u32 = 1u;
const RPW: u32 = 8u;
var<workgroup> red: array<vec4<f32>, 256>;    // a partial sum (4 rows) per thread
var<workgroup> scale: array<vec4<f32>, 8>;    // 1/rms of each row quad's rows (NORM)

{{QBLOCKS}}
{{ROPE_TURN}}
{{ROW_POSITIONS}}

fn silu(v: vec4<f32>) -> vec4<f32> {
    return v / (1.0 + exp(-v));
}

// the sum over the KS K-groups of every thread's `v` (threads tid, tid + 16 RG, ...), for
// group 0; every thread calls it (barriers)
fn sum_groups(tid: u32, v: vec4<f32>) -> vec4<f32> {
    workgroupBarrier();                     // (red was read)
    red[tid] = v;
    workgroupBarrier();
    for (var h = KS / 2u; h > 0u; h >>= 1u) {
        if (tid < h * 16u * RG) { red[tid] += red[tid + h * 16u * RG]; }
        workgroupBarrier();
    }
    return red[tid];
}

{{QFUSED_STORE}}

// rotate the pair (columns n, n + 1; n even) of rows r0.. by their positions' angles
fn rope_pair(n: u32, r0: u32, a: ptr<function, vec4<f32>>, b: ptr<function, vec4<f32>>) {
    let i = (n % p.hd) / 2u;
    for (var j = 0u; j < 4u; j++) {
        let position = u32(row_pos(r0 + j));
        let sc = sincos_turn(position * freq[2u * i] + mulhi(position, freq[2u * i + 1u]));
        let even = (*a)[j];
        let odd = (*b)[j];
        (*a)[j] = even * sc.y - odd * sc.x;
        (*b)[j] = even * sc.x + odd * sc.y;
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let tx = tid % 16u;
    let ty = (tid / 16u) % RG;
    let grp = tid / (16u * RG);
    let n0 = wid.x * 64u + 4u * tx;         // this thread's first column
    let r0 = (wid.y * RG + ty) * 4u;        // this thread's first row
    let valid = valid_rows(r0);
    if (NORM) {                             // sums of squares of the rows, then 1/rms
        let k4 = p.K / 4u;
        var sq = vec4<f32>(0.0);
        for (var j = grp * 16u + tx; j < k4; j += 16u * KS) {
            for (var i = 0u; i < valid; i++) {
                let b = vec4<f32>(x[(r0 + i) * k4 + j]);
                sq[i] += dot(b, b);
            }
        }
        red[tid] = sq;                      // over tx, then over the groups
        workgroupBarrier();
        for (var h = 8u; h > 0u; h >>= 1u) {
            if (tx < h) { red[tid] += red[tid + h]; }
            workgroupBarrier();
        }
        let s = sum_groups(tid, red[tid - tx]);
        if (tid < 16u * RG && tx == 0u) {
            scale[ty] = inverseSqrt(s / f32(p.K) + vec4<f32>(p.eps));
        }
    }
    // accumulators: column c's 4 rows in a<c> (w) and b<c> (w2 under SWIGLU); named, not an
    // array (CPU adapters would keep a dynamically indexed array in memory)
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var b0 = vec4<f32>(0.0);
    var b1 = vec4<f32>(0.0);
    var b2 = vec4<f32>(0.0);
    var b3 = vec4<f32>(0.0);
    if (valid > 0u && n0 < p.N) {
        for (var u = grp; u < (p.K >> 3u); u += KS) {
            let v = load_x(u, r0, valid);
            a0 += dot_rows(load_unit(n0, u, false), v, valid);
            if (SWIGLU) { b0 += dot_rows(load_unit(n0, u, true), v, valid); }
            if (n0 + 1u < p.N) {
                a1 += dot_rows(load_unit(n0 + 1u, u, false), v, valid);
                if (SWIGLU) { b1 += dot_rows(load_unit(n0 + 1u, u, true), v, valid); }
            }
            if (n0 + 2u < p.N) {
                a2 += dot_rows(load_unit(n0 + 2u, u, false), v, valid);
                if (SWIGLU) { b2 += dot_rows(load_unit(n0 + 2u, u, true), v, valid); }
            }
            if (n0 + 3u < p.N) {
                a3 += dot_rows(load_unit(n0 + 3u, u, false), v, valid);
                if (SWIGLU) { b3 += dot_rows(load_unit(n0 + 3u, u, true), v, valid); }
            }
        }
    }
    if (KS > 1u) {                          // (uniform: every thread meets the barriers)
        a0 = sum_groups(tid, a0);
        a1 = sum_groups(tid, a1);
        a2 = sum_groups(tid, a2);
        a3 = sum_groups(tid, a3);
        if (SWIGLU) {
            b0 = sum_groups(tid, b0);
            b1 = sum_groups(tid, b1);
            b2 = sum_groups(tid, b2);
            b3 = sum_groups(tid, b3);
        }
    }
    if (grp != 0u || valid == 0u || n0 >= p.N) { return; }
    if (NORM) {
        let s = scale[ty];
        a0 *= s; a1 *= s; a2 *= s; a3 *= s;
        b0 *= s; b1 *= s; b2 *= s; b3 *= s;
    }
    if (SWIGLU) {
        a0 = silu(a0) * b0;
        a1 = silu(a1) * b1;
        a2 = silu(a2) * b2;
        a3 = silu(a3) * b3;
    }
    if (ROPE) {                             // pairs (n0, n0 + 1), (n0 + 2, n0 + 3); hd even
        rope_pair(n0, r0, &a0, &a1);
        rope_pair(n0 + 2u, r0, &a2, &a3);
    }
    let cols = array<vec4<f32>, 4>(a0, a1, a2, a3);
    for (var c = 0u; c < 4u; c++) {
        if (n0 + c < p.N) {
            for (var i = 0u; i < valid; i++) { store(r0 + i, n0 + c, cols[c][i]); }
        }
    }
}
