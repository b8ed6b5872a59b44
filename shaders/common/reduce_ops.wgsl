// The reductions of reduce/reduce and reduce/reduce_short (OP: 0 sum, 1 max, 2 min, 3 prod,
// 4 argmax) over an accumulator type {{ACC}}; NaN as numpy (see reduce/reduce.wgsl). The
// including shader declares `override OP: u32` and includes IEEE's helpers.
// NaN test of the accumulator type (false for integers)
fn nan_(v: {{ACC}}) -> bool {
    return {{ISNAN}};
}

// argmax order: NaN above everything, equal values by index (k, i: indices of a, b)
fn beats(a: {{ACC}}, k: u32, b: {{ACC}}, i: u32) -> bool {
    if (nan_(b)) { return nan_(a) && k < i; }
    return nan_(a) || a > b || (a == b && k < i);
}

fn combine(a: {{ACC}}, b: {{ACC}}) -> {{ACC}} {
    switch OP {
        case 1u: { return {{MAX}}(a, b); }
        case 2u: { return {{MIN}}(a, b); }
        case 3u: { return a * b; }
        default: { return a + b; }
    }
}

fn identity() -> {{ACC}} {
    switch OP {
        case 1u, 4u: { return {{LOWEST}}; }
        case 2u: { return {{HIGHEST}}; }
        case 3u: { return {{ACC}}(1); }
        default: { return {{ACC}}(0); }
    }
}
