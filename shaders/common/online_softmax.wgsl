// Online softmax statistics (inserted through the ONLINE_SOFTMAX slot, after IEEE): ms holds
// a running max m and the sum s of w_i * exp(v_i - m) over the terms seen; online_add adds
// w * exp(v - m), rescaling s when v raises the max, so a row's statistics take one read.
// A NaN v never raises the max; its exp_ makes the sum NaN (and so the row), as numpy's.
// Used by reduce/softmax (w = 1), reduce/softmax_parts (w = 1) and reduce/softmax_finish (the
// chunks' (max, sum) pairs: v = a chunk's max, w = its sum).
fn online_add(ms: vec2<f32>, v: f32, w: f32) -> vec2<f32> {
    if (v > ms.x) { return vec2<f32>(v, ms.y * exp_(ms.x - v) + w); }
    return vec2<f32>(ms.x, ms.y + w * exp_(v - ms.x));
}
