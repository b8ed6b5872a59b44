// Row statistics of layer_norm / rms_norm and their gradient (inserted through the ROW_STATS
// slot, after ROW_REDUCE). The including kernel defines `fn load(i: u32) -> f32` (element i of
// its input) and `override RMS: bool`. Every thread of the workgroup must call row_stats
// (barriers). Corrected two passes for accuracy: the mean m, then over d = x - m both sum(d)
// and sum(d^2) in one tree; the mean is refined by shift = sum(d)/n (applied as (x - m) - shift)
// and var = sum(d^2)/n - shift^2 (Chan, Golub & LeVeque). With eps=1e-12 a mean one ulp off
// turns a constant row into noise of order 0.1; the refined mean is exact there. RMS: no
// centring (m = shift = 0). Returns (m, shift, 1 / sqrt(var + eps)): element j normalizes to
// ((load(base + j) - m) - shift) * inv — (x - m) is exact for a near-constant row; subtracting
// the shift after it needs no exact division (NVIDIA's 2.5-ulp one left rows one ulp off, which
// eps=1e-12 turned into outputs up to 7.6).
fn row_stats(lid: u32, base: u32, n: u32, t: u32, tpr: u32, nf: f32, eps: f32) -> vec3<f32> {
    var mean = 0.0;
    if (!RMS) {
        var s = 0.0;
        for (var j = t; j < n; j += tpr) { s += load(base + j); }
        mean = reduce_sum(lid, s) / nf;
    }
    var qc = vec2<f32>(0.0);
    for (var j = t; j < n; j += tpr) {
        let d = load(base + j) - mean;
        qc += vec2<f32>(d * d, d);
    }
    qc = reduce_sum2(lid, qc) / nf;
    var var_ = qc.x;
    var shift = 0.0;
    if (!RMS) {
        shift = qc.y;
        var_ = max(var_ - shift * shift, 0.0);
    }
    return vec3<f32>(mean, shift, inverseSqrt(var_ + eps));
}
