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
