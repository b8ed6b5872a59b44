// matmul: C[b] = act(A[b] @ B[b] + bias) with A [M,K] and B [K,N] row-major, f32 accumulation.
// bindings: 0 A, 1 B, 2 bias [N] (a dummy when HAS_BIAS is false), 3 C, 4 params.
// grid: (ceil(N/64), ceil(M/64), batches); 16x16 threads, each owns a 4x4 block of the tile.
// Batch b reads A at a_off + b*a_bs and B at b_off + b*b_bs (a stride of 0 broadcasts).
{{MATH}}
struct Params { M: u32, N: u32, K: u32, a_off: u32, b_off: u32, a_bs: u32, b_bs: u32,
                c_off: u32, bias_off: u32 }
@group(0) @binding(0) var<storage, read_write> A: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> B: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> bias: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> C: array<{{T}}>;
@group(0) @binding(4) var<uniform> p: Params;

override HAS_BIAS: bool = false;
override ACT: u32 = 0u;

const TILE: u32 = 64u;
const TK: u32 = 16u;
var<workgroup> As: array<vec4<f32>, 256>;   // [k][m / 4]: TK x (TILE / 4)
var<workgroup> Bs: array<vec4<f32>, 256>;   // [k][n / 4]

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row0 = wid.y * TILE;
    let col0 = wid.x * TILE;
    let a_base = p.a_off + wid.z * p.a_bs;
    let b_base = p.b_off + wid.z * p.b_bs;
    let tid = lid.y * 16u + lid.x;
    var acc: array<vec4<f32>, 4>;
    for (var k0 = 0u; k0 < p.K; k0 += TK) {
        for (var s = 0u; s < 4u; s++) {
            let e = tid + s * 256u;          // 0 .. 1023 = TILE x TK elements per tile
            let r = e / TK;                  // A: row in tile
            let ka = e % TK;
            var va = 0.0;
            if (row0 + r < p.M && k0 + ka < p.K) {
                va = f32(A[a_base + (row0 + r) * p.K + k0 + ka]);
            }
            As[ka * 16u + r / 4u][r % 4u] = va;
            let kb = e / TILE;               // B: k in tile
            let c = e % TILE;
            var vb = 0.0;
            if (k0 + kb < p.K && col0 + c < p.N) {
                vb = f32(B[b_base + (k0 + kb) * p.N + col0 + c]);
            }
            Bs[kb * 16u + c / 4u][c % 4u] = vb;
        }
        workgroupBarrier();
        for (var k = 0u; k < TK; k++) {
            let a = As[k * 16u + lid.y];
            let b = Bs[k * 16u + lid.x];
            acc[0] += a.x * b;
            acc[1] += a.y * b;
            acc[2] += a.z * b;
            acc[3] += a.w * b;
        }
        workgroupBarrier();
    }
    let c_base = p.c_off + wid.z * p.M * p.N;
    for (var i = 0u; i < 4u; i++) {
        let row = row0 + lid.y * 4u + i;
        if (row >= p.M) { break; }
        for (var j = 0u; j < 4u; j++) {
            let col = col0 + lid.x * 4u + j;
            if (col < p.N) {
                var v = acc[i][j];
                if (HAS_BIAS) { v += f32(bias[p.bias_off + col]); }
                C[c_base + row * p.N + col] = {{T}}(activate(v, ACT));
            }
        }
    }
}
