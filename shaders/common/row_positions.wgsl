// Where the fused quantized kernels' x row r = b * S + s sits in a sequence and in the KV
// cache (quant/qgemv_fused, quant/qgemv_qkv, quant/qmatmul_fused): pos is [1] (every batch
// row from position pos[0], KV slot b) or, under KV_ROWS, [2, B] = per batch row
// [positions; KV slots] with B = M / S (a batched engine's decode step: S = 1, a sequence a
// row), as decoder/rope and decoder/cache_write read them. Needs the pos binding and p.M, p.S.
override KV_ROWS: bool = false;
fn row_pos(r: u32) -> i32 {
    if (KV_ROWS) { return pos[r / p.S] + i32(r % p.S); }
    return pos[0] + i32(r % p.S);
}
fn row_slot(r: u32) -> u32 {
    if (KV_ROWS) { return u32(pos[p.M / p.S + r / p.S]); }
    return r / p.S;
}
