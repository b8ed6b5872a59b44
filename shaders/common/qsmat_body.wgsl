// The body shared by the fused quantized subgroup-matrix matmuls (quant/qmatmul_smat_fused.wgsl:
// one projection with its neighbours; quant/qmatmul_smat_qkv.wgsl: q, k and v in one grid):
// tile shapes, the tiles in workgroup memory, the NORM prologue, the K loop, the epilogue's
// walk over the result tiles, and rope4 for the epilogues. The including shader declares:
// - the bindings, freq, and `p` (M, N, K, eps, hd, S: the uniform, or a private view that its
//   enter() fills); x_vec and wword (common/qblocks.wgsl); NORM; row_pos (common/
//   row_positions.wgsl);
// - `k_len()`: K read from the uniform (the K loop's bound must be uniform);
// - `enter(wx) -> u32`: column tile wx of the grid -> its tile within its weight, setting what
//   that weight's view needs;
// - `epilogue(r, c, a, b)`: 4 outputs of row r from column c, a the products with w, b with w2;
// - the slots SGM, SGN, TM, TN, BK, W2, SGID, SGID_LET, ACC_DECL, MMA and STORES
//   (compiler/smat.fused_slots).
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

// 4 values of row r from column c (c even) rotated in pairs (c, c + 1), (c + 2, c + 3) by the
// row's position (common/rope_turn.wgsl's exact angles; freq and p.hd of the including shader)
fn rope4(r: u32, c: u32, a_in: vec4<f32>) -> vec4<f32> {
    var a = a_in;
    let position = u32(row_pos(r));
    for (var j = 0u; j < 4u; j += 2u) {
        let i = ((c + j) % p.hd) / 2u;
        let sc = sincos_turn(position * freq[2u * i] + mulhi(position, freq[2u * i + 1u]));
        let even = a[j];
        let odd = a[j + 1u];
        a[j] = even * sc.y - odd * sc.x;
        a[j + 1u] = even * sc.x + odd * sc.y;
    }
    return a;
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32,
        {{SGID}}) {
    {{SGID_LET}}
    let sm = sg % SGM;
    let sn = sg / SGM;
    let row0 = wid.y * BM;
    let col0 = enter(wid.x) * BN;
    if (NORM) {                                       // 1/rms of rows row0 .. row0 + BM
        // TR threads a row, each summing every TR-th vec4 of it, UN loads in flight (a loop of
        // one load an iteration waited on each: 36 in a row at 32-row tiles, K = 576). UN = 16
        // was slower on an H200 under Dawn (2026-11-29, SmolLM2-shaped 128-token prefill:
        // q+k+v 0.882 -> 0.889 ms, SwiGLU 0.729 -> 0.745; bench/results/
        // 2026-11-29-h200-dawn-qsmat-norm-loads-16-tried.json)
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
    let K = k_len();
    for (var k0 = 0u; k0 < K; k0 += BK) {
        let odd = (k0 / BK) & 1u;
        let pa = odd * (BM / 16u) + sm * TM;          // this subgroup's first panels
        let pb = odd * (BN / 16u) + sn * TN;
        // the next step's units (the last step loads its own again: never read)
        let un = min(k0 + BK, K - BK) / 8u;
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
