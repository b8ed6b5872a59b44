// f16 matmul on tensor cores through subgroup matrices (Dawn's
// chromium_experimental_subgroup_matrix, over VK_KHR_cooperative_matrix / Metal simdgroup
// matrices): C[b] = act(A[b] @ B[b] + bias), A [M,K], B [K,N] row-major f16, f32 accumulation,
// C f16. A variant of the register-tiled vec4 matmuls (same bindings and Params, VEC4_IO's),
// chosen only where the adapter offers f16 -> f32 16x16x16 subgroup matrices
// (DeviceInfo.subgroup_matrix_f16); every other adapter keeps those kernels.
// Needs K % 8 == 0, N % 8 == 0 and the offsets of A and B (a_off, b_off, a_bs, b_bs) multiples
// of 8 elements: A and B are read as vec4<u32>, 8 halves a load. M is free; tails of M, N and K
// are zero-filled in the tiles and masked at the store.
// Workgroup: SGM x SGN subgroups of 32 lanes; each owns TM x TN 16x16 result tiles, so a
// workgroup computes BM x BN = (SGM*TM*16) x (SGN*TN*16). K advances BK a step: every thread
// loads its share of the next step's A and B tiles into registers while the subgroups multiply
// the current ones out of workgroup memory; two tile buffers, one barrier a step. Rows of the
// tiles are padded by 8 halves (16 bytes) so that a 16x16 load touches distinct banks.
// Epilogue: each subgroup stores a result tile (f32) into its own 1 KB of workgroup memory; its
// lanes add the bias, apply the activation and write f16 through VEC4_IO's store().
// Limits, H100 under Dawn (bench/probes/smat_probe.py, 4096^3,
// bench/results/2026-11-26-h100-dawn-smat-probe.json): best 128x256 tiles (2x4 subgroups of
// 4x4 tiles, BK 16) 1.44 ms = 96 TFLOP/s = 0.13x cuBLAS f16 (758); 128x128 (2x4 / 2x2 / 4x2
// subgroups, BK 32) 1.84-2.07 ms; 64x64 4.5 ms (small shapes only). Without tiles in workgroup
// memory (operands straight from storage, one subgroup a workgroup) it was 66 TFLOP/s. The
// K loop with the tile copies left out took 1.01 ms and with the products left out 1.21 ms,
// so both halves limit: the products' operand loads (subgroupMatrixLoad of an array<f16>: the
// driver sees 2-byte elements) and the copies' eight 2-byte workgroup stores per 16-byte load
// (a subgroup-matrix load needs array<f16>, so wider stores cannot be used). 16 subgroups (512
// threads) leave a thread no load at BK 16. Tried: BK 16 / 32, four subgroup layouts, row
// padding 8 halves (conflict-free 16-byte rows).
// Robustness (Tint's, on in Chrome) checks each subgroup-matrix load whose offset is not a
// constant, with a branch; As in 16-row panels (constant offsets into a panel) took the H200's
// 4096^3 under Dawn from 1.49 to 1.33 ms at 128x256 k16 (92 -> 103 TFLOP/s) and from 1.90 to
// 1.59 ms at 128x128 s2x4 (bench/device_dawn.sh panels, 2026-11-27). Bs stays flat: its panels
// along n need 24-half rows, over 48 KB at 128x128 k32.
// The tile copies' eight 2-byte stores each had an index clamp, which kept the driver from
// merging them; one clamp of the 8-aligned offset before them (put_a, put_b): 4096^3 at
// 128x256 k16 1.32 -> 1.00 ms = 0.24x torch f16 (H200 under Dawn, clocks warmed,
// bench/device_dawn.sh putab).
// Tried (H200 under Dawn, 4096^3 / 2048^3 ms, one call, bench/device_dawn.sh smatbp at commit
// ee03f94, bench/results/2026-11-28-h200-dawn-smat-panels-clamped.json): B's tile in 16-column
// panels (every B load at a constant offset, unchecked under robustness) and global loads
// clamped then zeroed instead of branched (cl, what made quant/qmatmul_smat 26% faster).
// 128x256 k16: 1.00 / 0.221 as it is, cl 1.07 / 0.217, bp 1.11 / 0.255, both 1.19 / 0.212;
// 256x128 k16 both 1.18; 128x128 s2x4 k32 1.26, cl 1.26. torch f16 0.235 ms (584 TFLOP/s).
// Neither is what limits this kernel; both were taken out again.
// Limits, measured apart (H200 under Dawn, 4096^3 at 128x256 k16, bench/device_dawn.sh
// smatdiag, bench/results/2026-11-28-h200-dawn-smat-diag.json; whole kernel 1.16 ms, torch
// f16 0.254): the products alone (no copies) 0.81 ms = 170 TFLOP/s = 0.31x torch, with 16
// products a subgroup for each 8 operand loads: the ceiling of this design in WGSL (the
// loads take array<f16>); the copies alone 1.04 ms, bound by bytes in flight (12 KB an SM a
// step: one step of loads ahead). Hence loads two steps ahead (KLOOP, below).
// The SGID slot declares `@builtin(subgroup_id) sg` where Tint has it; else SGID_LET computes
// sg from the thread index (subgroups of 32 consecutive threads).
// The ACC_DECL, KLOOP (the K loop with its MMA products) and STORES slots are written out by
// the lowering (compiler/smat.slots). KLOOP: the loads of the step after next in flight
// during a step's products (a second register set, the loop two steps a turn): twice the
// bytes in flight of loads one step ahead (SmatShape.pf1), which bounded the copies. H200
// under Dawn, 4096^3 (bench/device_dawn.sh smatpf, bench/results/
// 2026-11-28-h200-dawn-smat-two-steps-ahead.json): 128x256 k16 1.00 -> 0.85 ms = 161 TFLOP/s
// (its copies alone 0.94 -> 0.59, its products alone 0.72 -> 0.67), 128x128 s2x4 k32 1.16 ->
// 1.01; torch f16 0.27 ms in that call: 0.32x.
enable f16;
enable subgroups;
enable chromium_experimental_subgroup_matrix;
{{MATH}}

struct Params { M: u32, N: u32, K: u32, a_off: u32, b_off: u32, a_bs: u32, b_bs: u32,
                c_off: u32, bias_off: u32, act: u32, has_bias: u32, KL: u32, ZS: u32 }
@group(0) @binding(0) var<storage, read_write> A: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> B: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> bias: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<{{T}}>>;
@group(0) @binding(4) var<uniform> p: Params;

override HAS_BIAS: bool = false;
override ACT: u32 = 0u;
override RUNTIME_EPILOGUE: bool = false;

const SGM: u32 = {{SGM}}u;          // subgroups along M
const SGN: u32 = {{SGN}}u;          // subgroups along N
const TM: u32 = {{TM}}u;            // 16-row tiles a subgroup
const TN: u32 = {{TN}}u;            // 16-column tiles a subgroup
const BK: u32 = {{BK}}u;            // k a step (a multiple of 16)
const COPY: bool = {{COPY}};        // false: the tiles stay as first loaded (probes only)
const BM: u32 = SGM * TM * 16u;
const BN: u32 = SGN * TN * 16u;
const THREADS: u32 = SGM * SGN * 32u;
const SA: u32 = BK + 8u;            // As row stride, halves
const SB: u32 = BN + 8u;            // Bs row stride, halves
const PA: u32 = 16u * SA;           // halves of a 16-row panel of As
const TILE_B: u32 = BK * SB;
const QA: u32 = BK / 8u;            // vec4<u32> loads per tile row of A
const QB: u32 = BN / 8u;            // ... of B
const LA: u32 = BM * QA / THREADS;  // loads a thread a step
const LB: u32 = BK * QB / THREADS;
// As in 16-row panels (compiler/smat.slots: a subgroup-matrix load at a constant offset into
// a panel needs no bounds check under Tint's robustness, Chrome's default); Bs flat, so its
// loads keep a dynamic offset (its panels along n would need 24-half rows: over 48 KB at
// 128x128 k32)
var<workgroup> As: array<array<f16, PA>, 2u * BM / 16u>;  // [buffer][m / 16][m % 16][k]
var<workgroup> Bs: array<f16, 2u * TILE_B>;              // [buffer][k][n]
var<workgroup> St: array<array<f32, 256>, SGM * SGN>;     // [subgroup][16][16] epilogue

// 8 halves (one vec4<u32> load) into row `row` of A's buffer `buf`, from k `k8`; into B's
// tiles at half offset `at`
fn put_a(buf: u32, row: u32, k8: u32, v: vec4<u32>) {
    let h0 = bitcast<vec2<f16>>(v.x);
    let h1 = bitcast<vec2<f16>>(v.y);
    let h2 = bitcast<vec2<f16>>(v.z);
    let h3 = bitcast<vec2<f16>>(v.w);
    let t = &As[buf * (BM / 16u) + row / 16u];
    // one clamp here instead of Tint's eight (robustness clamps every index): `at` is a
    // multiple of 8 at most PA - 8, so the driver can see the 8 stores as one
    // 16-byte store (with eight clamped indices it cannot)
    let at = min(((row % 16u) * SA + k8) / 8u, PA / 8u - 1u) * 8u;
    (*t)[at] = h0.x; (*t)[at + 1u] = h0.y; (*t)[at + 2u] = h1.x; (*t)[at + 3u] = h1.y;
    (*t)[at + 4u] = h2.x; (*t)[at + 5u] = h2.y; (*t)[at + 6u] = h3.x; (*t)[at + 7u] = h3.y;
}

// 8 halves into row k of B's buffer `buf`, columns n..n+7 of the tile (n a multiple of 8)
fn put_b(buf: u32, k: u32, n: u32, v: vec4<u32>) {
    // one clamp here instead of Tint's eight (robustness clamps every index): `at` is a
    // multiple of 8 at most 2 TILE_B - 8, so the driver can see the 8 stores as one
    // 16-byte store (with eight clamped indices it cannot)
    let at = min((buf * TILE_B + k * SB + n) / 8u, 2u * TILE_B / 8u - 1u) * 8u;
    let h0 = bitcast<vec2<f16>>(v.x);
    let h1 = bitcast<vec2<f16>>(v.y);
    let h2 = bitcast<vec2<f16>>(v.z);
    let h3 = bitcast<vec2<f16>>(v.w);
    Bs[at] = h0.x; Bs[at + 1u] = h0.y; Bs[at + 2u] = h1.x; Bs[at + 3u] = h1.y;
    Bs[at + 4u] = h2.x; Bs[at + 5u] = h2.y; Bs[at + 6u] = h3.x; Bs[at + 7u] = h3.y;
}

fn store(batch: u32, row: u32, c4: u32, a: vec4<f32>) {
    let N4 = p.N / 4u;
    if (row >= p.M || c4 >= N4) { return; }
    var v = a;
    if (select(HAS_BIAS, p.has_bias != 0u, RUNTIME_EPILOGUE)) {
        let bo = p.bias_off + c4 * 4u;
        v += vec4<f32>(f32(bias[bo]), f32(bias[bo + 1u]), f32(bias[bo + 2u]), f32(bias[bo + 3u]));
    }
    let act = select(ACT, p.act, RUNTIME_EPILOGUE);
    v = vec4<f32>(activate(v.x, act), activate(v.y, act), activate(v.z, act), activate(v.w, act));
    C[(p.c_off + batch * p.M * p.N) / 4u + row * N4 + c4] = vec4<{{T}}>(v);
}

// this thread's share of the tiles of the step whose k starts at kn (zero past K), into ra, rb
fn fetch(tid: u32, a_base: u32, b_base: u32, row0: u32, col0: u32, kn: u32,
         ra: ptr<function, array<vec4<u32>, LA>>, rb: ptr<function, array<vec4<u32>, LB>>) {
    let K8 = p.K / 8u;
    let N8 = p.N / 8u;
    for (var l = 0u; l < LA; l++) {
        let i = l * THREADS + tid;
        let r = row0 + i / QA;
        let kq = kn / 8u + i % QA;
        (*ra)[l] = vec4<u32>(0u);
        if (r < p.M && kq < K8) { (*ra)[l] = A[a_base + r * K8 + kq]; }
    }
    for (var l = 0u; l < LB; l++) {
        let i = l * THREADS + tid;
        let kr = kn + i / QB;
        let cq = col0 / 8u + i % QB;
        (*rb)[l] = vec4<u32>(0u);
        if (kr < p.K && cq < N8) { (*rb)[l] = B[b_base + kr * N8 + cq]; }
    }
}

// ... and from the registers into tile buffer `buf`
fn stash(tid: u32, buf: u32, ra: array<vec4<u32>, LA>, rb: array<vec4<u32>, LB>) {
    for (var l = 0u; l < LA; l++) {
        let i = l * THREADS + tid;
        put_a(buf, i / QA, (i % QA) * 8u, ra[l]);
    }
    for (var l = 0u; l < LB; l++) {
        let i = l * THREADS + tid;
        put_b(buf, i / QB, (i % QB) * 8u, rb[l]);
    }
}

@compute @workgroup_size(THREADS)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32,
        {{SGID}}) {
    {{SGID_LET}}
    let sm = sg % SGM;
    let sn = sg / SGM;
    let row0 = wid.y * BM;
    let col0 = wid.x * BN;
    let a_base = (p.a_off + wid.z * p.a_bs) / 8u;
    let b_base = (p.b_off + wid.z * p.b_bs) / 8u;
    var ra: array<vec4<u32>, LA>;
    var rb: array<vec4<u32>, LB>;
    // the first step's tiles
    fetch(tid, a_base, b_base, row0, col0, 0u, &ra, &rb);
    stash(tid, 0u, ra, rb);
    workgroupBarrier();
{{ACC_DECL}}
{{KLOOP}}
    let lane = tid % 32u;
    let er = lane / 2u;
    let ec = (lane % 2u) * 8u;
{{STORES}}
}
