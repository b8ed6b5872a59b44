// matmul, register-tiled with double-buffered tiles, for GPUs: C[b] = act(A[b] @ B[b] + bias),
// A [M,K], B [K,N] row-major. Needs K % 4 == 0 and N % 4 == 0 (vec4 bindings); M is free.
// bindings: 0 A, 1 B, 2 bias [N] (a dummy when HAS_BIAS is false), 3 C, 4 params (the same
// call as matmul_tiled: a variant of it). grid: (ceil(N/TN), ceil(M/128), batches or K pieces).
// 128 x TN tiles (TN = 64 RJ: 128, or 64 for more workgroups on mid-size shapes), BK 16; 16x16
// threads, each owns 8 rows x RJ column quads: rows i*64 + ty*4 + (0..3) for i < 2 x column
// quads j*16 + tx for j < RJ (acc[(i*4 + c)*RJ + j]). A thread loads 2 vec4 of A and RJ of B a
// step into registers while the FMAs of the step run.
// Two tile buffers: step s reads buffer s & 1 and writes the next step's tiles into the other,
// so one barrier a step (matmul_tiled: two, and half the k a step). The 16 k of a step are
// written out by the lowering (the FMAS slot: constant offsets into the tiles).
// Limits: shared-memory loads (4 a k for 64 FMAs) and latency at 2 workgroups an SM (32 KB of
// tiles in f32). H200, ms at 4096^3 / 2048^3 f32, without shader runtime checks
// (bench/probes/matmul_variants_probe.py,
// bench/results/2026-11-26-h200-matmul-variants-probe-f32.json):
// this 3.27 / 0.458 (torch 2.69 / 0.343); matmul_tiled's 128 tiles 4.05 / 0.548; the same
// with its k loop written out 3.86 / 0.519; BK 16 single-buffered 3.47 / 0.462; BK 32
// single-buffered 3.60 / 0.488; 128x256 tiles (8x16 a thread) BK 16 double-buffered
// 3.45 / 0.480; 256x128 3.29 / 0.446; 64x64 tiles BK 16 / 32 double-buffered 4.52 / 5.50 at
// 4096^3 (matmul_tiled's 64 tiles stay the pick for small grids, 1024^3: 0.085 ms).
// Not on software adapters: SwiftShader compiles ~75 ms per KB of workgroup memory (32 KB).
// {{T}} is the storage type, {{C}} the math type (f32, or f16 when accumulating in half).
{{MATH}}
{{VEC4_IO}}

const TM: u32 = 128u;             // tile rows
const RJ: u32 = {{RJ}}u;          // column blocks of 64
const BK: u32 = 16u;              // k per step
const QA: u32 = 32u;              // vec4s per k row of As
const QB: u32 = 16u * RJ;         // vec4s per k row of Bs
const TILE_A: u32 = 512u;         // vec4s per A buffer: BK x QA
const TILE_B: u32 = 16u * QB;     // vec4s per B buffer: BK x QB
var<workgroup> As: array<vec4<{{C}}>, 1024>;         // [buffer][k][m / 4]
var<workgroup> Bs: array<vec4<{{C}}>, {{BS}}>;      // [buffer][k][n / 4]

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tx = lid.x;
    let ty = lid.y;
    let tid = ty * 16u + tx;
    let row0 = wid.y * TM;
    let col0 = wid.x * 64u * RJ;
    let K4 = p.K / 4u;
    let N4 = p.N / 4u;
    let a_base = a_base_of(wid.z);
    let b_base = b_base_of(wid.z);
    // this thread's loads: A rows tid / 4 and 64 + tid / 4 at k quad tid % 4; B k row tid / QB
    // (and 8 + that when RJ is 2) at column quad tid % QB
    let la_row = tid / 4u;
    let la_k = (tid % 4u) * 4u;
    let lb_k = tid / QB;
    let lb_c = tid % QB;
    let c4 = col0 / 4u + lb_c;
    var acc: array<vec4<{{C}}>, 8u * RJ>;
    var va0 = load_a(a_base, row0 + la_row, la_k, K4);
    var va1 = load_a(a_base, row0 + 64u + la_row, la_k, K4);
    var vb0 = load_b(b_base, lb_k, c4, N4);
    var vb1 = vec4<{{C}}>(0);
    if (RJ == 2u) { vb1 = load_b(b_base, 8u + lb_k, c4, N4); }
    // the first tiles into buffer 0
    put_tiles(0u, 0u, la_row, la_k, lb_k, lb_c, va0, va1, vb0, vb1);
    workgroupBarrier();
    for (var k0 = 0u; k0 < p.KL; k0 += BK) {
        let odd = (k0 / BK) & 1u;
        let ca = odd * TILE_A;
        let cb = odd * TILE_B;
        let kn = k0 + BK;
        va0 = load_a(a_base, row0 + la_row, kn + la_k, K4);
        va1 = load_a(a_base, row0 + 64u + la_row, kn + la_k, K4);
        vb0 = load_b(b_base, kn + lb_k, c4, N4);
        if (RJ == 2u) { vb1 = load_b(b_base, kn + 8u + lb_k, c4, N4); }
{{FMAS}}
        // the next step's tiles into the other buffer: every thread passed the last barrier
        // after its reads of it
        put_tiles(TILE_A - ca, TILE_B - cb, la_row, la_k, lb_k, lb_c, va0, va1, vb0, vb1);
        workgroupBarrier();
    }
{{STORES}}
}

fn put_tiles(ba: u32, bb: u32, la_row: u32, la_k: u32, lb_k: u32, lb_c: u32, va0: vec4<{{C}}>,
             va1: vec4<{{C}}>, vb0: vec4<{{C}}>, vb1: vec4<{{C}}>) {
    // A transposed: As[k][m / 4][m % 4]
    let q = la_row / 4u;
    let r = la_row % 4u;
    let a0 = ba + la_k * QA + q;
    As[a0][r] = va0.x;
    As[a0 + QA][r] = va0.y;
    As[a0 + 2u * QA][r] = va0.z;
    As[a0 + 3u * QA][r] = va0.w;
    As[a0 + 16u][r] = va1.x;
    As[a0 + QA + 16u][r] = va1.y;
    As[a0 + 2u * QA + 16u][r] = va1.z;
    As[a0 + 3u * QA + 16u][r] = va1.w;
    Bs[bb + lb_k * QB + lb_c] = vb0;
    if (RJ == 2u) { Bs[bb + (lb_k + 8u) * QB + lb_c] = vb1; }
}
