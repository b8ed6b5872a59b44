// IEEE-754 helpers for numpy's NaN and inf rules (inserted through the IEEE slot; MATH holds
// them too). NaN tests read the bits: `x != x` is compiled to an ordered compare by some
// toolchains (naga -> SPIR-V on lavapipe gives false for NaN), and drivers may fold it away.
// WGSL leaves exp and log of NaN, inf, 0 and negatives indeterminate, and SwiftShader's fast
// versions differ from IEEE there (exp(NaN) = inf, log(NaN) = 89.1, log(0) = -88.0, log(-1)
// finite): exp_ and log_ spell those cases out.
// Special values are built from run-time bits: a constant expression that evaluates to NaN or
// inf is a shader-creation error in WGSL.

fn isnan_(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// +inf (sign 0u) or -inf (sign 0x80000000u).
fn inf_(sign: u32) -> f32 {
    return bitcast<f32>(0x7f800000u | sign);
}

// numpy.maximum / numpy.minimum: a NaN operand gives NaN (the first one's bits).
fn fmax_(a: f32, b: f32) -> f32 {
    return select(select(max(a, b), b, isnan_(b)), a, isnan_(a));
}

fn fmin_(a: f32, b: f32) -> f32 {
    return select(select(min(a, b), b, isnan_(b)), a, isnan_(a));
}

// numpy.exp: NaN stays NaN, exp(-inf) = 0, exp(inf) = inf.
fn exp_(x: f32) -> f32 {
    if (isnan_(x)) { return x; }
    if (abs(x) == inf_(0u)) { return select(0.0, x, x > 0.0); }
    return exp(x);
}

// numpy.log: NaN and negatives give NaN, log(±0) = -inf, log(inf) = inf.
fn log_(x: f32) -> f32 {
    if (isnan_(x) || x < 0.0) { return bitcast<f32>(bitcast<u32>(x) | 0x7fc00000u); }
    if (x == 0.0) { return inf_(0x80000000u); }
    if (x == inf_(0u)) { return x; }
    return log(x);
}
