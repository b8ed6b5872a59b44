// Workgroup row reductions (inserted through the ROW_REDUCE slot). The including kernel has
// `const WG: u32` (256, or up to 1024 for reduce/softmax_regs' wide rows); a workgroup
// handles RPW rows with WG / RPW threads each (several short rows per workgroup keep threads
// busy). Every thread must call these (barriers).
override RPW: u32 = 1u;
var<workgroup> red: array<f32, WG>;

fn reduce_sum(lid: u32, v: f32) -> f32 {
    let tpr = WG / RPW;
    red[lid] = v;
    workgroupBarrier();
    for (var s = tpr / 2u; s > 0u; s >>= 1u) {
        if (lid % tpr < s) { red[lid] = red[lid] + red[lid + s]; }
        workgroupBarrier();
    }
    let r = red[lid - lid % tpr];
    workgroupBarrier();
    return r;
}

fn reduce_max(lid: u32, v: f32) -> f32 {
    let tpr = WG / RPW;
    red[lid] = v;
    workgroupBarrier();
    for (var s = tpr / 2u; s > 0u; s >>= 1u) {
        if (lid % tpr < s) { red[lid] = max(red[lid], red[lid + s]); }
        workgroupBarrier();
    }
    let r = red[lid - lid % tpr];
    workgroupBarrier();
    return r;
}

var<workgroup> red2: array<vec2<f32>, WG>;

// Two sums in one tree (half the barriers of two reduce_sum calls).
fn reduce_sum2(lid: u32, v: vec2<f32>) -> vec2<f32> {
    let tpr = WG / RPW;
    red2[lid] = v;
    workgroupBarrier();
    for (var s = tpr / 2u; s > 0u; s >>= 1u) {
        if (lid % tpr < s) { red2[lid] = red2[lid] + red2[lid + s]; }
        workgroupBarrier();
    }
    let r = red2[lid - lid % tpr];
    workgroupBarrier();
    return r;
}
