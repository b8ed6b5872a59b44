// matmul, register-tiled with double-buffered tiles, for GPUs: C[b] = act(A[b] @ B[b] + bias),
// A [M,K], B [K,N] row-major. Needs K % 4 == 0 and N % 4 == 0 (vec4 bindings); M is free.
// bindings: 0 A, 1 B, 2 bias [N] (a dummy when HAS_BIAS is false), 3 C, 4 params (the same
// call as matmul_tiled: a variant of it). grid: (ceil(N/128), ceil(M/128), batches or K pieces).
// 128x128 tiles, BK 16; 16x16 threads, each owns 8x8 outputs: rows i*64 + ty*4 + (0..3) for
// i < 2 x column quads j*16 + tx for j < 2 (acc[(i*4 + c)*2 + j]). A thread loads 2 vec4 of A
// and 2 of B a step into registers while the FMAs of the step run.
// Two tile buffers: step s reads buffer s & 1 and writes the next step's tiles into the other,
// so one barrier a step (matmul_tiled: two, and half the k a step). The 16 k of a step are
// written out by the lowering (the FMAS slot: constant offsets into the tiles).
// Limits: shared-memory loads (4 a k for 64 FMAs) and latency at 2 workgroups an SM (32 KB of
// tiles in f32). H200, ms at 4096^3 / 2048^3 f32, without shader runtime checks
// (bench/matmul_variants_probe.py, bench/results/h200_matmul_variants_f32_session11.json):
// this 3.27 / 0.458 (torch 2.69 / 0.343); matmul_tiled's 128 tiles 4.05 / 0.548; the same
// with its k loop written out 3.86 / 0.519; BK 16 single-buffered 3.47 / 0.462; BK 32
// single-buffered 3.60 / 0.488; 128x256 tiles (8x16 a thread) BK 16 double-buffered
// 3.45 / 0.480; 256x128 3.29 / 0.446; 64x64 tiles BK 16 / 32 double-buffered 4.52 / 5.50 at
// 4096^3 (matmul_tiled's 64 tiles stay the pick for small grids, 1024^3: 0.085 ms).
// Not on software adapters: SwiftShader compiles ~75 ms per KB of workgroup memory (32 KB).
// {{T}} is the storage type, {{C}} the math type (f32, or f16 when accumulating in half).
{{MATH}}
{{VEC4_IO}}

const TM: u32 = 128u;             // tile rows = tile columns
const BK: u32 = 16u;              // k per step
const Q: u32 = 32u;               // vec4s per k row of As / Bs
const TILE: u32 = 512u;           // vec4s per buffer: BK x Q
var<workgroup> As: array<vec4<{{C}}>, 1024>;  // [buffer][k][m / 4]
var<workgroup> Bs: array<vec4<{{C}}>, 1024>;  // [buffer][k][n / 4]

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tx = lid.x;
    let ty = lid.y;
    let tid = ty * 16u + tx;
    let row0 = wid.y * TM;
    let col0 = wid.x * TM;
    let K4 = p.K / 4u;
    let N4 = p.N / 4u;
    let a_base = (p.a_off + wid.z * p.a_bs) / 4u;
    let b_base = (p.b_off + wid.z * p.b_bs) / 4u;
    // this thread's loads: A rows tid / 4 and 64 + tid / 4 at k quad tid % 4; B k rows
    // tid / 32 and 8 + tid / 32 at column quad tid % 32
    let la_row = tid / 4u;
    let la_k = (tid % 4u) * 4u;
    let lb_k = tid / Q;
    let lb_c = tid % Q;
    let c4 = col0 / 4u + lb_c;
    var acc: array<vec4<{{C}}>, 16>;
    var va0 = load_a(a_base, row0 + la_row, la_k, K4);
    var va1 = load_a(a_base, row0 + 64u + la_row, la_k, K4);
    var vb0 = load_b(b_base, lb_k, c4, N4);
    var vb1 = load_b(b_base, 8u + lb_k, c4, N4);
    // the first tiles into buffer 0
    put_tiles(0u, la_row, la_k, lb_k, lb_c, va0, va1, vb0, vb1);
    workgroupBarrier();
    for (var k0 = 0u; k0 < p.KL; k0 += BK) {
        let cur = ((k0 / BK) & 1u) * TILE;
        let kn = k0 + BK;
        va0 = load_a(a_base, row0 + la_row, kn + la_k, K4);
        va1 = load_a(a_base, row0 + 64u + la_row, kn + la_k, K4);
        vb0 = load_b(b_base, kn + lb_k, c4, N4);
        vb1 = load_b(b_base, kn + 8u + lb_k, c4, N4);
{{FMAS}}
        // the next step's tiles into the other buffer: every thread passed the last barrier
        // after its reads of it
        put_tiles(TILE - cur, la_row, la_k, lb_k, lb_c, va0, va1, vb0, vb1);
        workgroupBarrier();
    }
{{STORES}}
}

fn put_tiles(buf: u32, la_row: u32, la_k: u32, lb_k: u32, lb_c: u32, va0: vec4<{{C}}>,
             va1: vec4<{{C}}>, vb0: vec4<{{C}}>, vb1: vec4<{{C}}>) {
    // A transposed: As[k][m / 4][m % 4]
    let q = la_row / 4u;
    let r = la_row % 4u;
    let a0 = buf + la_k * Q + q;
    As[a0][r] = va0.x;
    As[a0 + Q][r] = va0.y;
    As[a0 + 2u * Q][r] = va0.z;
    As[a0 + 3u * Q][r] = va0.w;
    As[a0 + 16u][r] = va1.x;
    As[a0 + Q + 16u][r] = va1.y;
    As[a0 + 2u * Q + 16u][r] = va1.z;
    As[a0 + 3u * Q + 16u][r] = va1.w;
    Bs[buf + lb_k * Q + lb_c] = vb0;
    Bs[buf + (lb_k + 8u) * Q + lb_c] = vb1;
}
