// quant/qgemv_i8.wgsl's weight reads where w / w2 are bound as u32 words (Q6_K: 210-byte blocks,
// only 2-byte aligned): word i, and the 4 words from 4 i
fn wword(i: u32, second: bool) -> u32 {
    if (second) { return w2[i]; }
    return w[i];
}
fn quad(i: u32, second: bool) -> vec4<u32> {
    return vec4<u32>(wword(4u * i, second), wword(4u * i + 1u, second), wword(4u * i + 2u, second),
                     wword(4u * i + 3u, second));
}
