// Row reductions of attention_flash (the ROW_TILES slot) over subgroups: a row's 16 threads
// (tx = 0..15 of one ty, local_invocation_index ty*16 + tx; rq, the row quad, is unused) sit in one subgroup where the
// device's subgroups were checked to be runs of SG >= 16 consecutive indices, so a
// subgroupShuffleXor butterfly over lanes 1, 2, 4, 8 reduces them without workgroup memory or
// barriers. Every thread calls these (uniform control flow).
fn rows_max(rq: u32, tx: u32, v: vec4<f32>) -> vec4<f32> {
    var r = v;
    for (var s = 1u; s < 16u; s <<= 1u) { r = max(r, subgroupShuffleXor(r, s)); }
    return r;
}

fn rows_sum(rq: u32, tx: u32, v: vec4<f32>) -> vec4<f32> {
    var r = v;
    for (var s = 1u; s < 16u; s <<= 1u) { r += subgroupShuffleXor(r, s); }
    return r;
}
