// a quantized weight dequantized once, transposed: out[k, n] = dequant(w)[n, k], f32, for the
// f32 matmul of a big prefill product (lower_quant.dequant_first: x [M, K] @ out [K, N]).
// w: an (N, K) weight of raw GGUF blocks as u32 words, any format of common/qformats.wgsl
// (FMT, QK, QBYTES; K % 32 == 0, as every format's QK divides or is 32..256); N % 4 == 0.
// bindings: 0 w, 1 out [K, N] f32 (as vec4), 2 params.
// grid: (ceil(N / 64), K / 32, 1); 256 threads. A workgroup owns 64 weight rows x 32 weights
// of K: thread t decodes 8 weights (unit t % 4, deq8) of row n0 + t / 4 into the tile [k][n]
// in workgroup memory (rows padded to 65 floats: the 4 units of a row land on distinct
// banks), then the workgroup writes the tile as 32 rows of 16 vec4 (n is out's fast axis),
// so the stores coalesce; a warp reads 8 weight rows, 32 neighbouring weights of each.
// Why (H200, natively, bench/probes/prefill_dequant_probe.py, 1B-shaped projections at 512
// rows): the tiled kernel that dequantizes inside each tile (quant/qmatmul_tiled.wgsl) ran
// at 21-26 TFLOP/s where the f32 matmul's double-buffered tiles reach 34-39 on the same
// products; its 16 KiB of tiles (WebGPU's default ceiling) leave no room for a second buffer
// of x and the decoded weights. The fused GEMVs ran at ~7 TFLOP/s at 128-256 rows.
// Limits: bytes written (4 a weight): the 1B-shaped prefill's decodes take 1.85-2.05 ms of
// GPU time (~2 TB/s). Tried: a warp reading 32 rows a unit each (t % 64 as the row): 3.29 ms;
// scalar stores against vec4: 1.98 against 1.92 ms.
struct Params { N: u32, K: u32, nw: u32 }
@group(0) @binding(0) var<storage, read_write> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(2) var<uniform> p: Params;

const PAD: u32 = 65u;
var<workgroup> tile: array<f32, 2080>;            // [k 0..31][n 0..63], rows of PAD

fn wword(i: u32, second: bool) -> u32 { return w[i]; }
{{QFORMATS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * 64u;
    let k0 = wid.y * 32u;
    let nd = n0 + lid / 4u;                            // decode: row nd, unit lid % 4
    if (nd < p.N) {
        let ul = lid % 4u;
        let k = k0 + 8u * ul;
        let v = deq8(nd * (p.K / QK) + k / QK, (k % QK) / 8u, false);
        for (var i = 0u; i < 4u; i++) {
            tile[(8u * ul + i) * PAD + lid / 4u] = v[0][i];
            tile[(8u * ul + 4u + i) * PAD + lid / 4u] = v[1][i];
        }
    }
    workgroupBarrier();
    let c = 4u * (lid % 16u);                          // store: columns c..c + 3,
    if (n0 + c < p.N) {                                // rows lid / 16 and 16 more
        for (var r = 0u; r < 2u; r++) {
            let kl = lid / 16u + 16u * r;
            let t = kl * PAD + c;
            out[((k0 + kl) * p.N + n0 + c) / 4u] =
                vec4<f32>(tile[t], tile[t + 1u], tile[t + 2u], tile[t + 3u]);
        }
    }
}
