// The segments of a dispatch that runs a layer's q, k and v side by side along x
// (common/qkv_io.wgsl for quant/qgemv_qkv and quant/qmatmul_smat_qkv; quant/qgemv_i8_qkv):
// which weight a workgroup column serves (seg: 0 q, 1 k, 2 v), that weight's value of a
// per-segment triple, its words, and whether its result is rotated. The includer declares
// the uniform u (nq, nk, rq, rk) and the bindings wq, wk, wv.
var<private> seg: u32;

// q, k or v: the one of seg
fn by_seg(q: u32, k: u32, v: u32) -> u32 {
    return select(select(v, k, seg == 1u), q, seg == 0u);
}

// workgroup column wx of a grid whose segments take ceil(n_i / per) columns each: sets seg;
// returns the column within the segment
fn enter_segment(wx: u32, per: u32) -> u32 {
    let gq = (u.nq + per - 1u) / per;
    let gk = (u.nk + per - 1u) / per;
    seg = select(select(2u, 1u, wx < gq + gk), 0u, wx < gq);
    return wx - by_seg(0u, gq, gq + gk);
}
fn rotates() -> bool { return select(u.rk != 0u, u.rq != 0u, seg == 0u) && seg < 2u; }
fn seg_word(i: u32) -> u32 {
    if (seg == 0u) { return wq[i]; }
    if (seg == 1u) { return wk[i]; }
    return wv[i];
}
