// Row reductions over subgroups: the ROW_REDUCE slot on devices whose subgroups were checked to
// be runs of SG consecutive local_invocation_index values (DeviceInfo.subgroup_size, found by
// Backend.probe_subgroups). Same functions and contract as common/row_reduce: a workgroup of WG
// threads handles RPW rows of WG / RPW threads each, and every thread calls them (barriers and
// subgroup operations in uniform control flow). Needs (WG / RPW) % SG == 0 (a row's threads are
// whole subgroups) or SG % (WG / RPW) == 0 (several rows a subgroup: a subgroupShuffleXor
// butterfly over the row's lanes; lower_rows.row_reduce_slots checks it).
// Cost: a row of one subgroup (32 threads on NVIDIA: rows of up to 512 elements on GPUs) reduces
// with one subgroup operation and no barrier, where the tree of common/row_reduce took
// log2(32) + 2 = 7 workgroup barriers a reduction; a longer row adds its subgroups' partials
// through workgroup memory behind 2 barriers.
// Measured (H200, GPU time by timestamp queries, tree -> subgroups;
// bench/probes/subgroup_defer_probe.py,
// bench/results/2026-11-26-h200-subgroup-defer-probe.json): softmax 4096x384 9.8 -> 8.5 us,
// 4096x128 7.2 -> 6.0, 6144x512 13.6 -> 12.1, 4096x4096 55.2 -> 53.1; layer_norm 4096x384 9.2
// -> 8.1, 6144x512 12.7 -> 10.9, 1024x1024 8.5 -> 7.5 (rows of 2048+ elements: within noise).
override RPW: u32 = 1u;
const SG: u32 = {{SG}}u;
var<workgroup> red: array<f32, WG / SG>;
var<workgroup> red2: array<vec2<f32>, WG / SG>;

fn reduce_sum(lid: u32, v: f32) -> f32 {
    let tpr = WG / RPW;
    if (tpr < SG) {                  // rows of tpr lanes inside one subgroup
        var r = v;
        for (var m = tpr / 2u; m > 0u; m >>= 1u) { r = r + subgroupShuffleXor(r, m); }
        return r;
    }
    let s = subgroupAdd(v);
    if (tpr == SG) { return s; }
    if (lid % SG == 0u) { red[lid / SG] = s; }
    workgroupBarrier();
    let per = tpr / SG;
    let first = (lid / tpr) * per;
    var r = red[first];
    for (var i = 1u; i < per; i++) { r += red[first + i]; }
    workgroupBarrier();
    return r;
}

fn reduce_max(lid: u32, v: f32) -> f32 {
    let tpr = WG / RPW;
    if (tpr < SG) {                  // rows of tpr lanes inside one subgroup
        var r = v;
        for (var m = tpr / 2u; m > 0u; m >>= 1u) { r = max(r, subgroupShuffleXor(r, m)); }
        return r;
    }
    let s = subgroupMax(v);
    if (tpr == SG) { return s; }
    if (lid % SG == 0u) { red[lid / SG] = s; }
    workgroupBarrier();
    let per = tpr / SG;
    let first = (lid / tpr) * per;
    var r = red[first];
    for (var i = 1u; i < per; i++) { r = max(r, red[first + i]); }
    workgroupBarrier();
    return r;
}

// Two sums at once (layer_norm's sum(d^2) and sum(d)).
fn reduce_sum2(lid: u32, v: vec2<f32>) -> vec2<f32> {
    let tpr = WG / RPW;
    if (tpr < SG) {                  // rows of tpr lanes inside one subgroup
        var r = v;
        for (var m = tpr / 2u; m > 0u; m >>= 1u) { r = r + subgroupShuffleXor(r, m); }
        return r;
    }
    let s = subgroupAdd(v);
    if (tpr == SG) { return s; }
    if (lid % SG == 0u) { red2[lid / SG] = s; }
    workgroupBarrier();
    let per = tpr / SG;
    let first = (lid / tpr) * per;
    var r = red2[first];
    for (var i = 1u; i < per; i++) { r += red2[first + i]; }
    workgroupBarrier();
    return r;
}
