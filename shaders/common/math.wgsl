// Shared math helpers (inserted through the MATH slot, after common/ieee). f32 in, f32 out;
// NaN and inf follow numpy.

// erf: Abramowitz & Stegun 7.1.26, |error| < 1.5e-7.
fn erf_(x: f32) -> f32 {
    let t = 1.0 / (1.0 + 0.3275911 * abs(x));
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t
                    - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
    return select(-y, y, x >= 0.0);
}

// tanh that stays finite for large |x| (exp overflow gives NaN in some drivers); NaN stays.
fn tanh_(x: f32) -> f32 {
    return select(tanh(clamp(x, -15.0, 15.0)), x, isnan_(x));
}

fn gelu_erf(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf_(x * 0.7071067811865476));
}

fn gelu_tanh(x: f32) -> f32 {
    return 0.5 * x * (1.0 + tanh_(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

fn sigmoid_(x: f32) -> f32 {
    return 1.0 / (1.0 + exp_(-x));
}

// numpy.power in f32: x ** 0 and 1 ** y are 1 (NaN too), other NaNs propagate; a negative
// base needs an integral exponent (else NaN; -inf ** y is inf or 0) whose parity sets the sign (±inf count as even,
// so do all |y| >= 2^24); a zero base gives 0 or inf, signed as numpy does.
fn pow_(a: f32, b: f32) -> f32 {
    if (b == 0.0 || a == 1.0) { return 1.0; }
    if (isnan_(a) || isnan_(b)) { return a + b; }
    let integral = b == floor(b);
    let half = b * 0.5;
    let odd = integral && half != floor(half);
    let m = abs(a);
    let inf = inf_(0u);
    if (m == 1.0 && abs(b) == inf) { return 1.0; }              // (-1) ** ±inf, as C's pow
    var r: f32;
    if (m == 0.0) {
        r = select(0.0, inf, b < 0.0);
    } else {
        r = pow(m, b);
    }
    let negative = (bitcast<u32>(a) & 0x80000000u) != 0u;
    if (negative && m != 0.0 && m != inf && !integral) {
        return bitcast<f32>(bitcast<u32>(a) | 0x7fc00000u);       // NaN
    }
    return select(r, -r, negative && odd);
}
