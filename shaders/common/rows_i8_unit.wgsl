// The pieces quant/qrows_i8.wgsl and quant/qw8.wgsl share: rows to int8, a thread a unit of 8
// values. The includer declares x (f32 rows as vec4), w (a weight's raw words), p (R, K, wx),
// WEIGHT and common/qformats.wgsl (deq8, which reads w through wword below).

fn wword(i: u32, second: bool) -> u32 { return w[i]; }

// this thread's unit of the R x K/8 units (workgroups along x wrap into y past wx):
// (t, its clamped index tt, its row, its unit in the row); t >= R K/8 computes tt's and drops
fn unit_of(wid: vec3<u32>, lid: u32) -> vec4<u32> {
    let units = p.K / 8u;
    let t = (wid.y * p.wx + wid.x) * 256u + lid;
    let tt = min(t, p.R * units - 1u);
    return vec4<u32>(t, tt, tt / units, tt % units);
}

// the 8 values of unit u of row r (tt = r K/8 + u): x's, or (WEIGHT) the weight's as deq8
// decodes them (its scales folded in)
fn unit_values(tt: u32, r: u32, u: u32) -> array<vec4<f32>, 2> {
    if (WEIGHT) {                                  // (uniform: an override)
        let k = 8u * u;
        return deq8(r * (p.K / QK) + k / QK, (k % QK) / 8u, false);
    }
    return array<vec4<f32>, 2>(x[2u * tt], x[2u * tt + 1u]);
}

// the largest |value| of a unit
fn unit_amax(v: array<vec4<f32>, 2>) -> f32 {
    let e = max(abs(v[0]), abs(v[1]));
    return max(max(e.x, e.y), max(e.z, e.w));
}

// 4 values rounded to int8 (|v * inv| <= 127), packed: the first in the low byte
fn pack4(v: vec4<f32>, inv: f32) -> u32 {
    let i = vec4<i32>(round(v * inv));
    return (u32(i.x) & 255u) | ((u32(i.y) & 255u) << 8u) | ((u32(i.z) & 255u) << 16u) |
           (u32(i.w) << 24u);
}
