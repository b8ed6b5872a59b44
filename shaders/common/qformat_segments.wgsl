// quant/qgemv_qkv.wgsl's q, k and v weights in formats of their own (a Q4_K_M file keeps v
// in Q6_K in some layers, q and k in Q4_K): common/qformats.wgsl's QFORMAT_DECLS as private
// variables that enter() sets from the segment's overrides (set_format), so one dispatch runs
// all three. Every format branch is then a run-time one, uniform over a workgroup.
override FMT_Q: u32 = 3u;
override QK_Q: u32 = 32u;
override QBYTES_Q: u32 = 20u;
override OWN_Q: bool = true;
override FMT_K: u32 = 3u;
override QK_K: u32 = 32u;
override QBYTES_K: u32 = 20u;
override OWN_K: bool = true;
override FMT_V: u32 = 3u;
override QK_V: u32 = 32u;
override QBYTES_V: u32 = 20u;
override OWN_V: bool = true;
var<private> FMT: u32;
var<private> QK: u32;
var<private> QBYTES: u32;
var<private> OWN: bool;
var<private> Q8_0: bool;
var<private> WORD_UNITS: bool;
var<private> MINS: bool;

fn set_format(seg: u32) {           // 0 q, 1 k, 2 v
    FMT = select(select(FMT_V, FMT_K, seg == 1u), FMT_Q, seg == 0u);
    QK = select(select(QK_V, QK_K, seg == 1u), QK_Q, seg == 0u);
    QBYTES = select(select(QBYTES_V, QBYTES_K, seg == 1u), QBYTES_Q, seg == 0u);
    OWN = select(select(OWN_V, OWN_K, seg == 1u), OWN_Q, seg == 0u);
    Q8_0 = FMT == 8u;
    WORD_UNITS = FMT == 12u || FMT == 14u;
    MINS = FMT == 12u || FMT == 14u || (OWN && !Q8_0);
}
