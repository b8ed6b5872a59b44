// matmul, register-tiled, small tiles for small problems (more workgroups in flight):
// C[b] = act(A[b] @ B[b] + bias), A [M,K], B [K,N] row-major; needs K % 4 == 0, N % 4 == 0.
// bindings: 0 A, 1 B, 2 bias [N] (a dummy when HAS_BIAS is false), 3 C, 4 params.
// grid: (ceil(N/64), ceil(M/64), batches); 16x16 threads, each owns a 4x4 block:
// rows ty*4 + i, cols tx*4 + j. K walks in steps of 16.
{{MATH}}
struct Params { M: u32, N: u32, K: u32, a_off: u32, b_off: u32, a_bs: u32, b_bs: u32,
                c_off: u32, bias_off: u32 }
@group(0) @binding(0) var<storage, read_write> A: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> B: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read_write> bias: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<{{T}}>>;
@group(0) @binding(4) var<uniform> p: Params;

override HAS_BIAS: bool = false;
override ACT: u32 = 0u;

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

fn load_a(base: u32, row: u32, k: u32, K4: u32) -> vec4<{{C}}> {
    if (row < p.M && k < p.K) { return vec4<{{C}}>(A[base + row * K4 + k / 4u]); }
    return vec4<{{C}}>(0);
}

fn load_b(base: u32, k: u32, c4: u32, N4: u32) -> vec4<{{C}}> {
    if (k < p.K && c4 < N4) { return vec4<{{C}}>(B[base + k * N4 + c4]); }
    return vec4<{{C}}>(0);
}

fn store(batch: u32, row: u32, c4: u32, a: vec4<{{C}}>) {
    let N4 = p.N / 4u;
    if (row >= p.M || c4 >= N4) { return; }
    var v = vec4<f32>(a);
    if (HAS_BIAS) {
        let bo = p.bias_off + c4 * 4u;
        v += vec4<f32>(f32(bias[bo]), f32(bias[bo + 1u]), f32(bias[bo + 2u]), f32(bias[bo + 3u]));
    }
    v = vec4<f32>(activate(v.x, ACT), activate(v.y, ACT), activate(v.z, ACT), activate(v.w, ACT));
    C[(p.c_off + batch * p.M * p.N) / 4u + row * N4 + c4] = vec4<{{T}}>(v);
}
