// Shared math helpers (inserted through the MATH slot). f32 in, f32 out.

// erf: Abramowitz & Stegun 7.1.26, |error| < 1.5e-7.
fn erf_(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t
                    - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
    return select(-y, y, x >= 0.0);
}

// tanh that stays finite for large |x| (exp overflow gives NaN in some drivers).
fn tanh_(x: f32) -> f32 {
    return tanh(clamp(x, -15.0, 15.0));
}

fn gelu_erf(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf_(x * 0.7071067811865476));
}

fn gelu_tanh(x: f32) -> f32 {
    return 0.5 * x * (1.0 + tanh_(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

fn sigmoid_(x: f32) -> f32 {
    return 1.0 / (1.0 + exp(-x));
}

// numpy semantics for a negative base with an integral exponent.
fn pow_(a: f32, b: f32) -> f32 {
    if (b == 0.0) { return 1.0; }
    if (a >= 0.0) { return select(pow(a, b), 0.0, a == 0.0 && b > 0.0); }
    if (b != floor(b)) { return pow(a, b); }   // NaN, as numpy (undefined in WGSL)
    let r = pow(-a, b);
    return select(r, -r, (i32(b) & 1) == 1);
}

// Epilogue activations selected by a u32 code: 0 none 1 relu 2 gelu 3 gelu_tanh 4 silu
// 5 sigmoid 6 tanh.
fn activate(x: f32, act: u32) -> f32 {
    switch act {
        case 1u: { return max(x, 0.0); }
        case 2u: { return gelu_erf(x); }
        case 3u: { return gelu_tanh(x); }
        case 4u: { return x * sigmoid_(x); }
        case 5u: { return sigmoid_(x); }
        case 6u: { return tanh_(x); }
        default: { return x; }
    }
}
