// quant/qgemv_i8.wgsl's weight reads where w / w2 are bound as vec4<u32> (Q4_K: 16-byte blocks
// pieces): quad i, and word i (its quad's component)
fn quad(i: u32, second: bool) -> vec4<u32> {
    if (second) { return w2[i]; }
    return w[i];
}
fn wword(i: u32, second: bool) -> u32 {
    return quad(i / 4u, second)[i % 4u];
}
