// Exact rotary angles, shared by decoder/rope and quant/qgemv_fused: theta_i / (2 pi) is a
// 64-bit fixed-point fraction of a turn (freq[2i] hi, freq[2i+1] lo words, from the host in
// float64); a position's turn is p * hi + mulhi(p, lo) in wrapping u32; sincos_turn reduces
// it to an octant and evaluates short Taylor polynomials (see decoder/rope.wgsl).
// the high 32 bits of the 64-bit product a * b
fn mulhi(a: u32, b: u32) -> u32 {
    let a0 = a & 0xFFFFu;
    let a1 = a >> 16u;
    let b0 = b & 0xFFFFu;
    let b1 = b >> 16u;
    let m1 = a1 * b0;
    let m2 = a0 * b1;
    let mid = ((a0 * b0) >> 16u) + (m1 & 0xFFFFu) + (m2 & 0xFFFFu);
    return a1 * b1 + (m1 >> 16u) + (m2 >> 16u) + (mid >> 16u);
}

// (sin, cos) of the angle `turn / 2^32` turns
fn sincos_turn(turn: u32) -> vec2<f32> {
    let v = turn + 0x20000000u;                       // nearest quarter turn: q
    let q = v >> 30u;
    let r = i32(v & 0x3FFFFFFFu) - 0x20000000;        // remainder in [-1/8, 1/8) turn
    let a = f32(r) * 1.4629180792671596e-9;           // 2 pi / 2^32: radians in [-pi/4, pi/4)
    let a2 = a * a;
    let s = a * (1.0 + a2 * (-1.6666666666666666e-1 + a2 * (8.333333333333333e-3 +
                 a2 * (-1.984126984126984e-4 + a2 * 2.7557319223985893e-6))));
    let c = 1.0 + a2 * (-0.5 + a2 * (4.1666666666666664e-2 + a2 * (-1.388888888888889e-3 +
                 a2 * (2.48015873015873e-5 - a2 * 2.755731922398589e-7))));
    switch q {
        case 0u: { return vec2<f32>(s, c); }
        case 1u: { return vec2<f32>(c, -s); }
        case 2u: { return vec2<f32>(-s, -c); }
        default: { return vec2<f32>(-c, s); }
    }
}
