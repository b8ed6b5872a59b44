// NCHW window helpers shared by conv2d, pool2d and their gradients (inserted through the NCHW slot). The
// including kernel's Params has total, H, W, OH, OW, sh, sw, ph, pw, and `override WG`.

// The output element this thread computes (1-D grid continued in y), or p.total when none.
fn element(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return min((wid.y * nwg.x + wid.x) * WG + lid, p.total);
}

// Input row of window tap i (dilation dil) for output row oy; -1 inside the zero padding.
fn tap_y(oy: u32, i: u32, dil: u32) -> i32 {
    let y = i32(oy * p.sh + i * dil) - i32(p.ph);
    return select(-1, y, y >= 0 && y < i32(p.H));
}

// Input column of window tap j (dilation dil) for output column ox; -1 inside the padding.
fn tap_x(ox: u32, j: u32, dil: u32) -> i32 {
    let x = i32(ox * p.sw + j * dil) - i32(p.pw);
    return select(-1, x, x >= 0 && x < i32(p.W));
}

// The output index of window tap k (stride s, padding pd, dilation dl) whose window puts
// that tap on input index v, or -1 when none does (the gradients of conv2d and pool2d).
fn reach(v: u32, k: u32, s: u32, pd: u32, dl: u32, size: u32) -> i32 {
    let num = i32(v + pd) - i32(k * dl);
    if (num < 0 || num % i32(s) != 0) { return -1; }
    let o_ = num / i32(s);
    return select(-1, o_, o_ < i32(size));
}
