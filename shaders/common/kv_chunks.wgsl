// The valid keys at run time: the cache rows written so far, pos + S, within the capacity T
fn valid_keys(p0: u32) -> u32 {
    return min(p.T, p0 + p.S);
}

// Keys of a chunk, for L valid keys cut into at most p.nsplit chunks at run time:
// ceil(L / nsplit) rounded up to p.gran (shared by the cached_attention kernels and
// decoder/attn_combine, which must cut the same chunks).
fn chunk_len(L: u32) -> u32 {
    return max(p.gran, ((L + p.nsplit - 1u) / p.nsplit + p.gran - 1u) / p.gran * p.gran);
}
