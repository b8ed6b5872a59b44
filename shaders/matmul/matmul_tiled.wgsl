// matmul, register-tiled: C[b] = act(A[b] @ B[b] + bias), A [M,K], B [K,N] row-major.
// Needs K % 4 == 0 and N % 4 == 0 (A, B, C bound as vec4 arrays); M is free.
// bindings: 0 A, 1 B, 2 bias [N] (a dummy when HAS_BIAS is false), 3 C, 4 params.
// One source, two tile sizes ({{R}}): R = 2 -> 128x128 tiles, 8x8 outputs per thread, BK 8
// (big problems); R = 1 -> 64x64 tiles, 4x4 per thread, BK 16 (more workgroups in flight).
// grid: (ceil(N/TM), ceil(M/TM), batches or K pieces); 16x16 threads, each owns R x R blocks
// of 4x4:
// rows i*64 + ty*4 + (0..3) x column quads j*16 + tx.
// Limits: shared-memory bandwidth (2R vec4 loads per 4R^2 vec4 FMAs). The FMA and store blocks
// are written out by the lowering (the FMAS and STORES slots: constant acc indices) because acc must
// stay in registers: the same code as loops over i, j < R ran 15x slower at 4096^3 on an H100
// (NVIDIA's compiler did not unroll them and spilled acc). Next tile's global loads are held in
// registers during the FMAs.
// Tried on an H100 (bench/probes/tiled_probe.py,
// bench/results/2026-11-25-h100-tiled-probe-long-k.json): twice
// the k per step (BK 16 for 128 tiles, 32 for 64 tiles: 16 KB of tiles, half the barriers per
// FMA, two loads a thread a step held in a 2-entry register array) ran no faster than the
// same generic code at the default step (4096^3 5.82 vs 5.99 ms of GPU time, 2048^3 0.754 vs
// 0.755; 64 tiles slower), and that generic code made the default tiles 10-13% slower than
// this file (4096^3 6.2 ms a run against 5.5): barriers are not what bounds it. Dropped.
// Also tried: the FMA block as fma() builtins instead of `acc += a * b` (in case the driver
// left them unfused): the same to 0.3% at 1024^3-4096^3, f32 and f16
// (bench/results/2026-11-25-h100-tiled-probe-fma.json). The driver contracts them already.
// Tried for software adapters: half the K step (BK 8 / R, 4 KB of tiles instead of 8, since
// Chromium's SwiftShader compiles ~75 ms per KB of workgroup memory): the pipeline compiled
// in 0.67 s instead of 1.0-1.3 s, but MiniLM ran 15-25% slower on SwiftShader (twice the
// barriers), so it was dropped.
// On GPUs the 128 tiles are matmul_tiled_db's (double-buffered, BK 16: 4096^3 f32 3.27 ms
// against 4.05 on an H200); software adapters keep these (lower_matmul.tile_kernel).
// {{T}} is the storage type, {{C}} the math type (f32, or f16 when accumulating in half).
{{MATH}}
{{VEC4_IO}}

const R: u32 = {{R}}u;
const TM: u32 = 64u * R;          // tile rows = tile columns
const BK: u32 = 16u / R;          // k per step: the A and B tiles hold 1024 values each
const Q: u32 = 16u * R;           // vec4s per k row of As / Bs
var<workgroup> As: array<vec4<{{C}}>, 256>;   // [k][m / 4]: BK x Q
var<workgroup> Bs: array<vec4<{{C}}>, 256>;   // [k][n / 4]: BK x Q

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tx = lid.x;
    let ty = lid.y;
    let tid = ty * 16u + tx;
    let row0 = wid.y * TM;
    let col0 = wid.x * TM;
    let K4 = p.K / 4u;
    let N4 = p.N / 4u;
    let a_base = a_base_of(wid.z);
    let b_base = b_base_of(wid.z);
    // this thread's loads: A row, k quad; B k row, column quad
    let la_row = tid / (BK / 4u);
    let la_k = (tid % (BK / 4u)) * 4u;
    let lb_k = tid / Q;
    let lb_c = tid % Q;
    var acc: array<vec4<{{C}}>, 4u * R * R>;
    var va = load_a(a_base, row0 + la_row, la_k, K4);
    var vb = load_b(b_base, lb_k, col0 / 4u + lb_c, N4);
    for (var k0 = 0u; k0 < p.KL; k0 += BK) {
        let q = la_row / 4u;
        let r = la_row % 4u;
        As[(la_k + 0u) * Q + q][r] = va.x;
        As[(la_k + 1u) * Q + q][r] = va.y;
        As[(la_k + 2u) * Q + q][r] = va.z;
        As[(la_k + 3u) * Q + q][r] = va.w;
        Bs[lb_k * Q + lb_c] = vb;
        workgroupBarrier();
        va = load_a(a_base, row0 + la_row, k0 + BK + la_k, K4);
        vb = load_b(b_base, k0 + BK + lb_k, col0 / 4u + lb_c, N4);
        for (var k = 0u; k < BK; k++) {
{{FMAS}}
        }
        workgroupBarrier();
    }
{{STORES}}
}
