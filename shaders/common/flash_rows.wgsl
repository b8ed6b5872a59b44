// Row reductions of attention_flash (the ROW_TILES slot), through workgroup memory: a row's 16
// threads (tx = 0..15) each hold a vec4 of partials for the rows of row quad rq; the
// partials go through KP (free when these are called: the caller's barrier came first).
// Two barriers a call, which every thread makes (uniform control flow).
fn rows_max(rq: u32, tx: u32, v: vec4<f32>) -> vec4<f32> {
    KP[rq][tx] = v;
    workgroupBarrier();
    var r = KP[rq][0];
    for (var x = 1u; x < 16u; x++) { r = max(r, KP[rq][x]); }
    workgroupBarrier();
    return r;
}

fn rows_sum(rq: u32, tx: u32, v: vec4<f32>) -> vec4<f32> {
    KP[rq][tx] = v;
    workgroupBarrier();
    var r = KP[rq][0];
    for (var x = 1u; x < 16u; x++) { r += KP[rq][x]; }
    workgroupBarrier();
    return r;
}
