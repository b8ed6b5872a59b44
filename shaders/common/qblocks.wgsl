// GGUF block decoding and row dots shared by the quantized GEMVs (quant/qgemv, quant/qgemv_fused): a "unit"
// is 8 weights of one block of weight row n, dequantized in registers. The including shader
// declares `wword(i)` (word i of the blocks), `dot_unit(q, r)` (a unit's dot with x row r),
// `p.K`, `p.nw` and the Q8_0 override.
// 8 weights of a block: d * q + m at k0..k0+3 (lo) and k1..k1+3 (hi), k relative to the row
struct Unit { lo: vec4<f32>, hi: vec4<f32>, d: f32, m: f32, k0: u32, k1: u32 }

fn int8x4(q: u32) -> vec4<f32> {
    return vec4<f32>((vec4<i32>(bitcast<i32>(q)) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

// unit u (0 .. K/8) of weight row n
fn load_unit(n: u32, u: u32) -> Unit {
    let kb = u / 4u;
    let part = u % 4u;
    let b = n * (p.K / 32u) + kb;
    var r: Unit;
    if (Q8_0) {
        let start = b * 34u;                          // bytes
        r.d = unpack2x16float(wword(start / 4u) >> ((start & 2u) * 8u)).x;
        r.m = 0.0;
        let s = start + 2u + part * 8u;               // first of 8 int8, 2- or 4-byte aligned
        let a = s / 4u;
        let sh = (s & 2u) * 8u;                       // 0 or 16; (v << 16) << (16 - sh) is 0 at 0
        let w0 = wword(a);
        let w1 = wword(a + 1u);
        let w2 = wword(min(a + 2u, p.nw - 1u));
        r.lo = int8x4((w0 >> sh) | ((w1 << 16u) << (16u - sh)));
        r.hi = int8x4((w1 >> sh) | ((w2 << 16u) << (16u - sh)));
        r.k0 = kb * 32u + part * 8u;
        r.k1 = r.k0 + 4u;
    } else {
        let dm = unpack2x16float(wword(b * 5u));
        let q = vec4<u32>(wword(b * 5u + 1u + part));
        r.lo = vec4<f32>((q >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(15u));
        r.hi = vec4<f32>((q >> vec4<u32>(4u, 12u, 20u, 28u)) & vec4<u32>(15u));
        r.d = dm.x;
        r.m = dm.y;
        r.k0 = kb * 32u + part * 4u;
        r.k1 = r.k0 + 16u;
    }
    return r;
}

// x rows of this workgroup that exist: r0 .. r0 + valid_rows(r0) - 1 (ROWS <= 4; uniform)
fn valid_rows(r0: u32) -> u32 {
    return min(ROWS, p.M - r0);
}

// a unit's dots with those rows, in x..w
fn dot_rows(q: Unit, r0: u32, valid: u32) -> vec4<f32> {
    var a = vec4<f32>(dot_unit(q, r0), 0.0, 0.0, 0.0);
    if (valid > 1u) { a.y = dot_unit(q, r0 + 1u); }
    if (valid > 2u) { a.z = dot_unit(q, r0 + 2u); }
    if (valid > 3u) { a.w = dot_unit(q, r0 + 3u); }
    return a;
}
