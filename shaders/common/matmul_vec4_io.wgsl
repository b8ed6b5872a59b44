// Shared by the register-tiled vec4 matmuls (inserted through the VEC4_IO slot): params,
// bindings (0 A, 1 B, 2 bias, 3 C, 4 params), the epilogue overrides, guarded vec4 loads and
// the bias + activation store. {{T}} is the storage type, {{C}} the math type.
// K is A's row length; KL the length of K this call sums (K, or K / ZS for split-K). The
// grid's z is batch * ZS + piece: batch strides a_bs, b_bs (0 broadcasts), piece z % ZS sums
// K from piece * KL; C holds one product per z (split-K: the pieces' partial products; the
// bias, where HAS_BIAS, goes into piece 0's alone).
struct Params { M: u32, N: u32, K: u32, a_off: u32, b_off: u32, a_bs: u32, b_bs: u32,
                c_off: u32, bias_off: u32, act: u32, has_bias: u32, KL: u32, ZS: u32 }
@group(0) @binding(0) var<storage, read_write> A: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> B: array<vec4<{{T}}>>;
@group(0) @binding(2) var<storage, read_write> bias: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> C: array<vec4<{{T}}>>;
@group(0) @binding(4) var<uniform> p: Params;

override HAS_BIAS: bool = false;
override ACT: u32 = 0u;
// RUNTIME_EPILOGUE: bias and activation come from p.has_bias and p.act instead, so every
// matmul of one tile size shares one pipeline. Used on software adapters, where Chromium's
// SwiftShader takes 0.8 s to compile each (its 8 KB of tiles) and a uniform switch per
// output costs nothing next to the K loop.
override RUNTIME_EPILOGUE: bool = false;

// vec4 offsets of A's and B's first elements for grid z (batch z / ZS, K piece z % ZS)
fn a_base_of(z: u32) -> u32 {
    return (p.a_off + (z / p.ZS) * p.a_bs + (z % p.ZS) * p.KL) / 4u;
}

fn b_base_of(z: u32) -> u32 {
    return (p.b_off + (z / p.ZS) * p.b_bs + (z % p.ZS) * p.KL * p.N) / 4u;
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
    if (select(HAS_BIAS, p.has_bias != 0u, RUNTIME_EPILOGUE) && batch % p.ZS == 0u) {
        let bo = p.bias_off + c4 * 4u;
        v += vec4<f32>(f32(bias[bo]), f32(bias[bo + 1u]), f32(bias[bo + 2u]), f32(bias[bo + 3u]));
    }
    let act = select(ACT, p.act, RUNTIME_EPILOGUE);
    v = vec4<f32>(activate(v.x, act), activate(v.y, act), activate(v.z, act), activate(v.w, act));
    C[(p.c_off + batch * p.M * p.N) / 4u + row * N4 + c4] = vec4<{{T}}>(v);
}
