// The output of the fused quantized prefill kernels (quant/qmatmul_fused.wgsl,
// quant/qmatmul_smat_fused.wgsl): one value of row r, column n with common/qfused_io.wgsl's
// RES and CACHE applied. Needs common/row_positions.wgsl.
// one output (row r, column n) of value e: the residual added, then stored or cached
fn store(r: u32, n: u32, e_in: f32) {
    var e = e_in;
    let o = r * p.N + n;
    if (RES) { e += res[o]; }
    if (CACHE) {
        let tpos = row_pos(r);
        if (tpos >= 0 && u32(tpos) < p.T) {
            let h = row_slot(r) * (p.N / p.hd) + n / p.hd;    // (slot, h) flattened
            out[(h * p.T + u32(tpos)) * p.hd + n % p.hd] = e;
        }
    } else {
        out[o] = e;
    }
}

