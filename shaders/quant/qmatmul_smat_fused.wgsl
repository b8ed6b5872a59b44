// quantized matmul for prefills on tensor cores (subgroup matrices, as quant/qmatmul_smat.wgsl)
// with the fused neighbours of quant/qmatmul_fused.wgsl: the same bindings, params and
// switches (common/qfused_io.wgsl), so the three kernels are variants of one call.
// out[r, n] = epilogue(x'[r, :] . dequant(w)[n, :]), x' = x * g / rms(x) under NORM;
// w, w2 (N, K) GGUF blocks as u32 words (common/qblocks.wgsl's formats), x [M, K] f32 or f16,
// rounded to f16 in the tiles (after the norm: the normed rows are O(1), the raw residual
// stream need not be); f32 sums. Needs N % 8 == 0 and K % BK == 0. No COMBINE.
// Prologue (NORM): 1/rms of the workgroup's BM rows into `scale` (THREADS / BM threads a row,
// 8 loads in flight each, their sums through St), before the first tiles. Tiles and K loop: qmatmul_smat's (common/
// qsmat_tiles.wgsl; loads of the next step in registers during the products, one barrier a
// step); under SWIGLU a second B tile (Bs2, w2's units) and accumulators (gate<i>_<j>) for the
// same columns. Epilogue: a subgroup's result tile (and under SWIGLU its w2 tile) go through
// its own 1 KB of St (St2); each lane takes 8 columns of one row: SWIGLU, ROPE (pairs never
// split: 8 consecutive columns, hd even), RES and the KV-cache store (CACHE) as
// quant/qmatmul_fused.wgsl's store.
// Why: a SmolLM2 128-token prefill spent 6.0 of its 6.7 GPU ms in qmatmul_fused's tiles on an
// H200 (f32 ALU, 4-row x 64-column tiles; bench/results/2026-11-27-h200-dawn-decode-gpu-
// profile.json), and its projections are too small for the unfused tensor-core kernel plus
// separate norm / rope / cache / residual dispatches (29.3 ms wall against 11.1 in 2026-11-27's
// tree: 554 dispatches against 254).
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
{{QFUSED_IO}}
const ROWS: u32 = 1u;              // (common/qblocks.wgsl's GEMV knobs: unused here)
const RPT: u32 = 1u;
const RQ: u32 = 1u;
const RPW: u32 = 8u;
{{QBLOCKS}}
{{ROPE_TURN}}
{{ROW_POSITIONS}}

const SGM: u32 = {{SGM}}u;          // subgroups along M
const SGN: u32 = {{SGN}}u;          // subgroups along N
const TM: u32 = {{TM}}u;            // 16-row tiles a subgroup
const TN: u32 = {{TN}}u;            // 16-column tiles a subgroup
const BK: u32 = {{BK}}u;            // k a step (a multiple of 16)
const W2: bool = {{W2}};            // a second weight (SWIGLU's w2): its tiles exist
const BM: u32 = SGM * TM * 16u;
const BN: u32 = SGN * TN * 16u;
const THREADS: u32 = SGM * SGN * 32u;
const UK: u32 = BK / 8u;            // units a step
const SA: u32 = BK + 8u;            // As row stride, halves (rows padded by 16 bytes)
const SB: u32 = BK + 8u;            // Bs row stride, halves
const PA: u32 = 16u * SA;           // halves of a 16-row panel
const PB: u32 = 16u * SB;
const LA: u32 = BM * UK / THREADS;  // (row, unit) pairs of x a thread a step
const LB: u32 = BN * UK / THREADS;  // (weight row, unit) pairs a thread a step
const TR: u32 = THREADS / BM;       // prologue (NORM): threads a row
const UN: u32 = 8u;                 // ... and loads in flight a thread
var<workgroup> As: array<array<f16, PA>, 2u * BM / 16u>;  // [buffer][m / 16][m % 16][k]
var<workgroup> Bs: array<array<f16, PB>, 2u * BN / 16u>;  // [buffer][n / 16][n % 16][k]
var<workgroup> Bs2: array<array<f16, PB>, select(1u, 2u * BN / 16u, W2)>;   // w2's
var<workgroup> St: array<array<f32, 256>, SGM * SGN>;     // [subgroup][16][16] epilogue
var<workgroup> St2: array<array<f32, 256>, select(1u, SGM * SGN, W2)>;
var<workgroup> scale: array<f32, BM>;                     // 1/rms of the tile's rows (NORM)

{{QSMAT_TILES}}

fn put_b2(buf: u32, row: u32, k8: u32, v: vec4<u32>) {    // put_b into w2's tiles
    let h0 = bitcast<vec2<f16>>(v.x);
    let h1 = bitcast<vec2<f16>>(v.y);
    let h2 = bitcast<vec2<f16>>(v.z);
    let h3 = bitcast<vec2<f16>>(v.w);
    let t = &Bs2[buf * (BN / 16u) + row / 16u];
    let at = min(((row % 16u) * SB + k8) / 8u, PB / 8u - 1u) * 8u;   // (one clamp: put_a)
    (*t)[at] = h0.x; (*t)[at + 1u] = h0.y; (*t)[at + 2u] = h1.x; (*t)[at + 3u] = h1.y;
    (*t)[at + 4u] = h2.x; (*t)[at + 5u] = h2.y; (*t)[at + 6u] = h3.x; (*t)[at + 7u] = h3.y;
}

// x row r's 8 values at unit u's k positions (times g and the row's 1/rms under NORM; r0 the
// tile's first row), as halves (zeros past M)
fn load_a(r: u32, r0: u32, u: u32) -> vec4<u32> {
    let k = unit_k(u) >> vec2<u32>(2u);
    let rr = min(r, p.M - 1u);                        // (no branch: see qmatmul_smat.wgsl)
    var s = 1.0;
    if (NORM) { s = scale[min(r - r0, BM - 1u)]; }
    return select(vec4<u32>(0u), halves(x_vec(rr, k.x) * s, x_vec(rr, k.y) * s), r < p.M);
}

fn silu(v: vec4<f32>) -> vec4<f32> {
    return v / (1.0 + exp(-v));
}

// one output (row r, column n) of value e: the residual added, then stored or cached (as
// quant/qmatmul_fused.wgsl's store)
fn store(r: u32, n: u32, e_in: f32) {
    var e = e_in;
    let o = r * p.N + n;
    if (RES) { e += res[o]; }
    if (CACHE) {
        let tpos = row_pos(r);
        if (tpos >= 0 && u32(tpos) < p.T) {
            let h = row_slot(r) * (p.N / p.hd) + n / p.hd;    // (slot, h) flattened
            out[(h * p.T + u32(tpos)) * p.hd + n % p.hd] = e;
        }
    } else {
        out[o] = e;
    }
}

// 4 outputs of row r from column c (a multiple of 4; N % 8 == 0, so all or none exist): a the
// products with w, b with w2
fn epilogue(r: u32, c: u32, a_in: vec4<f32>, b: vec4<f32>) {
    if (r >= p.M || c >= p.N) { return; }
    var a = a_in;
    if (SWIGLU) { a = silu(a) * b; }
    if (ROPE) {                                       // pairs (c, c + 1), (c + 2, c + 3)
        let position = u32(row_pos(r));
        for (var j = 0u; j < 4u; j += 2u) {
            let i = ((c + j) % p.hd) / 2u;
            let sc = sincos_turn(position * freq[2u * i] + mulhi(position, freq[2u * i + 1u]));
            let even = a[j];
            let odd = a[j + 1u];
            a[j] = even * sc.y - odd * sc.x;
            a[j + 1u] = even * sc.x + odd * sc.y;
        }
    }
    for (var j = 0u; j < 4u; j++) { store(r, c + j, a[j]); }
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32,
        {{SGID}}) {
    {{SGID_LET}}
    let sm = sg % SGM;
    let sn = sg / SGM;
    let row0 = wid.y * BM;
    let col0 = wid.x * BN;
    if (NORM) {                                       // 1/rms of rows row0 .. row0 + BM
        // TR threads a row, each summing every TR-th vec4 of it, UN loads in flight (a loop of
        // one load an iteration waited on each: 36 in a row at 32-row tiles, K = 576)
        let k4 = p.K / 4u;
        let r = min(row0 + tid / TR, p.M - 1u) * k4;
        var sq = vec4<f32>(0.0);
        for (var j = tid % TR; j < k4; j += UN * TR) {
            var v: array<vec4<f32>, UN>;
            for (var t = 0u; t < UN; t++) {
                let jj = j + t * TR;
                v[t] = select(vec4<f32>(0.0), vec4<f32>(x[r + min(jj, k4 - 1u)]), jj < k4);
            }
            for (var t = 0u; t < UN; t++) { sq += v[t] * v[t]; }
        }
        St[tid / 256u][tid % 256u] = sq.x + sq.y + sq.z + sq.w;
        workgroupBarrier();
        if (tid % TR == 0u) {
            var total = 0.0;
            for (var t = 0u; t < TR; t++) { total += St[(tid + t) / 256u][(tid + t) % 256u]; }
            scale[tid / TR] = inverseSqrt(total / f32(p.K) + p.eps);
        }
        workgroupBarrier();
    }
    var ra: array<vec4<u32>, LA>;
    var rb: array<vec4<u32>, LB>;
    var rc: array<vec4<u32>, select(1u, LB, W2)>;
    // the first step's tiles
    for (var l = 0u; l < LA; l++) {
        let i = l * THREADS + tid;
        ra[l] = load_a(row0 + i / UK, row0, i % UK);
    }
    for (var l = 0u; l < LB; l++) {
        let i = l * THREADS + tid;
        rb[l] = load_b(col0 + i / UK, i % UK, false);
        if (W2) { rc[l] = load_b(col0 + i / UK, i % UK, true); }
    }
    for (var l = 0u; l < LA; l++) {
        let i = l * THREADS + tid;
        put_a(0u, i / UK, (i % UK) * 8u, ra[l]);
    }
    for (var l = 0u; l < LB; l++) {
        let i = l * THREADS + tid;
        put_b(0u, i / UK, (i % UK) * 8u, rb[l]);
        if (W2) { put_b2(0u, i / UK, (i % UK) * 8u, rc[l]); }
    }
    workgroupBarrier();
{{ACC_DECL}}
    for (var k0 = 0u; k0 < p.K; k0 += BK) {
        let odd = (k0 / BK) & 1u;
        let pa = odd * (BM / 16u) + sm * TM;          // this subgroup's first panels
        let pb = odd * (BN / 16u) + sn * TN;
        // the next step's units (the last step loads its own again: never read)
        let un = min(k0 + BK, p.K - BK) / 8u;
        for (var l = 0u; l < LA; l++) {
            let i = l * THREADS + tid;
            ra[l] = load_a(row0 + i / UK, row0, un + i % UK);
        }
        for (var l = 0u; l < LB; l++) {
            let i = l * THREADS + tid;
            rb[l] = load_b(col0 + i / UK, un + i % UK, false);
            if (W2) { rc[l] = load_b(col0 + i / UK, un + i % UK, true); }
        }
{{MMA}}
        for (var l = 0u; l < LA; l++) {
            let i = l * THREADS + tid;
            put_a(1u - odd, i / UK, (i % UK) * 8u, ra[l]);
        }
        for (var l = 0u; l < LB; l++) {
            let i = l * THREADS + tid;
            put_b(1u - odd, i / UK, (i % UK) * 8u, rb[l]);
            if (W2) { put_b2(1u - odd, i / UK, (i % UK) * 8u, rc[l]); }
        }
        workgroupBarrier();
    }
    let lane = tid % 32u;
    let er = lane / 2u;
    let ec = (lane % 2u) * 8u;
{{STORES}}
}
