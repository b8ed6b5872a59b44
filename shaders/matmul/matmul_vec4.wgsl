// matmul, register-tiled: C[b] = act(A[b] @ B[b] + bias), A [M,K], B [K,N] row-major.
// Needs K % 4 == 0 and N % 4 == 0 (A, B, C bound as vec4 arrays); M is free.
// bindings: 0 A, 1 B, 2 bias [N] (a dummy when HAS_BIAS is false), 3 C, 4 params.
// grid: (ceil(N/128), ceil(M/128), batches); 16x16 threads, each owns 8x8 outputs:
// rows {ty*4 + i, 64 + ty*4 + i} x cols {tx*4 + j, 64 + tx*4 + j}. K walks in steps of 8.
// {{T}} is the storage type, {{C}} the math type (f32, or f16 when accumulating in half).
{{MATH}}
{{VEC4_IO}}

const BK: u32 = 8u;
var<workgroup> As: array<vec4<{{C}}>, 256>;   // [k][m / 4]: BK x 32
var<workgroup> Bs: array<vec4<{{C}}>, 256>;   // [k][n / 4]: BK x 32

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tx = lid.x;
    let ty = lid.y;
    let tid = ty * 16u + tx;
    let row0 = wid.y * 128u;
    let col0 = wid.x * 128u;
    let K4 = p.K / 4u;
    let N4 = p.N / 4u;
    let a_base = (p.a_off + wid.z * p.a_bs) / 4u;
    let b_base = (p.b_off + wid.z * p.b_bs) / 4u;
    // this thread's loads: A row (tid / 2), k quad (tid % 2); B k row (tid / 32), col quad
    let la_row = tid / 2u;
    let la_k = (tid % 2u) * 4u;
    let lb_k = tid / 32u;
    let lb_c = tid % 32u;
    var acc: array<vec4<{{C}}>, 16>;
    // registers hold the next tile's loads while this tile is multiplied (hides latency)
    var va = load_a(a_base, row0 + la_row, la_k, K4);
    var vb = load_b(b_base, lb_k, col0 / 4u + lb_c, N4);
    for (var k0 = 0u; k0 < p.K; k0 += BK) {
        let q = la_row / 4u;
        let r = la_row % 4u;
        As[(la_k + 0u) * 32u + q][r] = va.x;
        As[(la_k + 1u) * 32u + q][r] = va.y;
        As[(la_k + 2u) * 32u + q][r] = va.z;
        As[(la_k + 3u) * 32u + q][r] = va.w;
        Bs[lb_k * 32u + lb_c] = vb;
        workgroupBarrier();
        va = load_a(a_base, row0 + la_row, k0 + BK + la_k, K4);
        vb = load_b(b_base, k0 + BK + lb_k, col0 / 4u + lb_c, N4);
        for (var k = 0u; k < BK; k++) {
            let a0 = As[k * 32u + ty];
            let a1 = As[k * 32u + 16u + ty];
            let b0 = Bs[k * 32u + tx];
            let b1 = Bs[k * 32u + 16u + tx];
            acc[0] += a0.x * b0;  acc[1] += a0.x * b1;
            acc[2] += a0.y * b0;  acc[3] += a0.y * b1;
            acc[4] += a0.z * b0;  acc[5] += a0.z * b1;
            acc[6] += a0.w * b0;  acc[7] += a0.w * b1;
            acc[8] += a1.x * b0;  acc[9] += a1.x * b1;
            acc[10] += a1.y * b0; acc[11] += a1.y * b1;
            acc[12] += a1.z * b0; acc[13] += a1.z * b1;
            acc[14] += a1.w * b0; acc[15] += a1.w * b1;
        }
        workgroupBarrier();
    }
    // constant indices only: a dynamic index would push acc out of registers
    let rA = row0 + ty * 4u;
    let rB = row0 + 64u + ty * 4u;
    let cA = col0 / 4u + tx;
    let cB = cA + 16u;
    store(wid.z, rA, cA, acc[0]);      store(wid.z, rA, cB, acc[1]);
    store(wid.z, rA + 1u, cA, acc[2]); store(wid.z, rA + 1u, cB, acc[3]);
    store(wid.z, rA + 2u, cA, acc[4]); store(wid.z, rA + 2u, cB, acc[5]);
    store(wid.z, rA + 3u, cA, acc[6]); store(wid.z, rA + 3u, cB, acc[7]);
    store(wid.z, rB, cA, acc[8]);      store(wid.z, rB, cB, acc[9]);
    store(wid.z, rB + 1u, cA, acc[10]); store(wid.z, rB + 1u, cB, acc[11]);
    store(wid.z, rB + 2u, cA, acc[12]); store(wid.z, rB + 2u, cB, acc[13]);
    store(wid.z, rB + 3u, cA, acc[14]); store(wid.z, rB + 3u, cB, acc[15]);
}
