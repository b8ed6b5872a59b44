// matmul, register-tiled with wide tiles for half math: C[b] = act(A[b] @ B[b] + bias), A [M,K],
// B [K,N] row-major; needs K % 4 == 0 and N % 4 == 0 (vec4 bindings); M is free.
// bindings: 0 A, 1 B, 2 bias [N] (a dummy when HAS_BIAS is false), 3 C, 4 params (the same as
// matmul_tiled: a variant of the same call).
// 128 x 256 tiles, BK 8; 16x16 threads, each owns 8 rows x 16 columns: rows i*64 + ty*4 +
// (0..3) for i < 2 x column quads j*16 + tx for j < 4. A thread loads 1 vec4 of A and 2 of B a
// step.
// Why: with f16 math matmul_tiled's 128x128 tiles (8x8 a thread) ran 4096^3 only 1.54x faster
// than f32 on an H100 although HFMA2 doubles the FMA rate: the same number of shared-memory
// loads a step (4 for 64 FMAs) bound both. Here a step takes 6 loads for 128 FMAs; f16
// accumulators (32 vec4<f16>) fit the registers f32's 64 accumulators of matmul_tiled take.
// Offered on GPUs for f16 math only (lower_matmul: the autotuner times it beside the others).
// H100 f16, ms a run (bench/probes/tiled_probe.py --dtype float16,
// bench/results/2026-11-25-h100-tiled-probe-wide-f16.json):
// 4096^3 3.27 against matmul_tiled's 3.57 (42 TFLOP/s; f32 takes 5.5: 1.68x), 2048^3 0.51 /
// 0.55; 1024^3 0.26 / 0.12 (64 big tiles: too few; the tuner keeps 64x64 tiles there).
// Still short of 2x f32: loads a step per FMA halved again did not halve the time.
// {{T}} is the storage type, {{C}} the math type.
{{MATH}}
{{VEC4_IO}}

const TM: u32 = 128u;             // tile rows
const TN: u32 = 256u;             // tile columns
const BK: u32 = 8u;               // k per step
const QA: u32 = 32u;              // vec4s per k row of As (TM / 4)
const QB: u32 = 64u;              // vec4s per k row of Bs (TN / 4)
var<workgroup> As: array<vec4<{{C}}>, 256>;   // [k][m / 4]: BK x QA
var<workgroup> Bs: array<vec4<{{C}}>, 512>;   // [k][n / 4]: BK x QB

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tx = lid.x;
    let ty = lid.y;
    let tid = ty * 16u + tx;
    let row0 = wid.y * TM;
    let col0 = wid.x * TN;
    let K4 = p.K / 4u;
    let N4 = p.N / 4u;
    let a_base = a_base_of(wid.z);
    let b_base = b_base_of(wid.z);
    // this thread's loads: A row tid / 2, k quad (tid % 2) * 4; B k rows tid / 64 and
    // tid / 64 + 4, column quad tid % 64
    let la_row = tid / 2u;
    let la_k = (tid % 2u) * 4u;
    let lb_k = tid / QB;
    let lb_c = tid % QB;
    var acc: array<vec4<{{C}}>, 32>;
    var va = load_a(a_base, row0 + la_row, la_k, K4);
    var vb0 = load_b(b_base, lb_k, col0 / 4u + lb_c, N4);
    var vb1 = load_b(b_base, lb_k + 4u, col0 / 4u + lb_c, N4);
    for (var k0 = 0u; k0 < p.KL; k0 += BK) {
        let q = la_row / 4u;
        let r = la_row % 4u;
        As[(la_k + 0u) * QA + q][r] = va.x;
        As[(la_k + 1u) * QA + q][r] = va.y;
        As[(la_k + 2u) * QA + q][r] = va.z;
        As[(la_k + 3u) * QA + q][r] = va.w;
        Bs[lb_k * QB + lb_c] = vb0;
        Bs[(lb_k + 4u) * QB + lb_c] = vb1;
        workgroupBarrier();
        va = load_a(a_base, row0 + la_row, k0 + BK + la_k, K4);
        vb0 = load_b(b_base, k0 + BK + lb_k, col0 / 4u + lb_c, N4);
        vb1 = load_b(b_base, k0 + BK + lb_k + 4u, col0 / 4u + lb_c, N4);
        for (var k = 0u; k < BK; k++) {
{{FMAS}}
        }
        workgroupBarrier();
    }
{{STORES}}
}
