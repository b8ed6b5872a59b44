// matmul, register-tiled, small tiles for small problems (more workgroups in flight):
// C[b] = act(A[b] @ B[b] + bias), A [M,K], B [K,N] row-major; needs K % 4 == 0, N % 4 == 0.
// bindings: 0 A, 1 B, 2 bias [N] (a dummy when HAS_BIAS is false), 3 C, 4 params.
// grid: (ceil(N/64), ceil(M/64), batches); 16x16 threads, each owns a 4x4 block:
// rows ty*4 + i, cols tx*4 + j. K walks in steps of 16.
{{MATH}}
{{VEC4_IO}}

const BK: u32 = 16u;
var<workgroup> As: array<vec4<{{C}}>, 256>;   // [k][m / 4]: BK x 16
var<workgroup> Bs: array<vec4<{{C}}>, 256>;   // [k][n / 4]: BK x 16

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tx = lid.x;
    let ty = lid.y;
    let tid = ty * 16u + tx;
    let row0 = wid.y * 64u;
    let col0 = wid.x * 64u;
    let K4 = p.K / 4u;
    let N4 = p.N / 4u;
    let a_base = (p.a_off + wid.z * p.a_bs) / 4u;
    let b_base = (p.b_off + wid.z * p.b_bs) / 4u;
    let la_row = tid / 4u;          // A tile 64 rows x 4 k-quads
    let la_k = (tid % 4u) * 4u;
    let lb_k = tid / 16u;           // B tile 16 k rows x 16 col quads
    let lb_c = tid % 16u;
    var acc: array<vec4<{{C}}>, 4>;
    // registers hold the next tile's loads while this tile is multiplied (hides latency)
    var va = load_a(a_base, row0 + la_row, la_k, K4);
    var vb = load_b(b_base, lb_k, col0 / 4u + lb_c, N4);
    for (var k0 = 0u; k0 < p.K; k0 += BK) {
        let q = la_row / 4u;
        let r = la_row % 4u;
        As[(la_k + 0u) * 16u + q][r] = va.x;
        As[(la_k + 1u) * 16u + q][r] = va.y;
        As[(la_k + 2u) * 16u + q][r] = va.z;
        As[(la_k + 3u) * 16u + q][r] = va.w;
        Bs[lb_k * 16u + lb_c] = vb;
        workgroupBarrier();
        va = load_a(a_base, row0 + la_row, k0 + BK + la_k, K4);
        vb = load_b(b_base, k0 + BK + lb_k, col0 / 4u + lb_c, N4);
        for (var k = 0u; k < BK; k++) {
            let a = As[k * 16u + ty];
            let b = Bs[k * 16u + tx];
            acc[0] += a.x * b;
            acc[1] += a.y * b;
            acc[2] += a.z * b;
            acc[3] += a.w * b;
        }
        workgroupBarrier();
    }
    // constant indices only: a dynamic index would push acc out of registers
    let r = row0 + ty * 4u;
    let c4 = col0 / 4u + tx;
    store(wid.z, r, c4, acc[0]);
    store(wid.z, r + 1u, c4, acc[1]);
    store(wid.z, r + 2u, c4, acc[2]);
    store(wid.z, r + 3u, c4, acc[3]);
}
