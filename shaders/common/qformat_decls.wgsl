// The block format of a kernel's weights, as pipeline overrides (common/qformats.wgsl's
// QFORMAT_DECLS; the lowering sets them from webrlx/quant.py's FORMATS: lower_quant.
// format_overrides). quant/qgemv_qkv.wgsl may instead take one format a segment
// (common/qformat_segments.wgsl).
override FMT: u32 = 3u;           // GGML type id: 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0,
                                  // 10 Q2_K, 11 Q3_K, 12 Q4_K, 13 Q5_K, 14 Q6_K, 20 IQ4_NL,
                                  // 23 IQ4_XS, 1 F16, 30 BF16 (blocks of 32 floats)
override QK: u32 = 32u;           // weights per block: 32, or 256 (K-quants)
override QBYTES: u32 = 20u;       // bytes per block
override OWN: bool = true;        // Q4_1 / Q8_0: the kernels' own decoding paths
override Q8_0: bool = FMT == 8u;  // (the own paths: Q8_0, else Q4_1)
override WORD_UNITS: bool = FMT == 12u || FMT == 14u;   // Q4_K, Q6_K: the GEMVs' kunit
override MINS: bool = FMT == 12u || FMT == 14u || (OWN && !Q8_0);   // (group_row) m0, m1 used
