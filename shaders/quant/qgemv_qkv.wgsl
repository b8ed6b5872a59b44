// A decoder layer's q, k and v projections in ONE dispatch (decode rows, M <= 15): three
// quantized GEMVs of one normed x (common/qgemv_body.wgsl, as quant/qgemv_fused.wgsl runs
// each of them), each weight its own segment of workgroups along x:
//   segment 0: q = x' . wq, rotated (ROPE, where rq) into out (B, S, Hq, hd);
//   segment 1: k = x' . wk, rotated (where rk) into the KV cache kc at pos (CACHE);
//   segment 2: v = x' . wv into the KV cache vc at pos.
// x' is x rms-normalized (NORM). The three weights share K and the x rows, and one format
// or one each (SEGMENT_FORMAT `set_format(seg);` with QFORMAT_DECLS common/qformat_segments:
// a Q4_K_M file's v in Q6_K beside q and k in Q4_K). Each segment has ceil(N_i / (RPW * RPT))
// workgroups, found here from the override RPT so that every GEMV shape (TPR, RPT) is a
// variant of one call with one uniform.
// bindings: 0 x, 1 wq, 2 wk, 3 wv, 4 g, 5 pos (i32 [1], or [2, B] under KV_ROWS: see
// common/row_positions.wgsl), 6 freq (u32 [hd]), 7 kc, 8 vc, 9 out (q), 10 params: ten storage
// bindings, so the compiler offers this kernel only where
// maxStorageBuffersPerShaderStage >= 10 (Chromium and Dawn allow 10; WebGPU's default is 8).
// grid: (sum of the segments' workgroups, ceil(M / ROWS), 1).
// Why: SmolLM2's decode step was ~250 dispatches at ~8 us each (H100, Vulkan) for ~80 MB of
// weights; the q / k / v GEMVs are each latency-bound (9, 3 and 3 workgroups), so running
// them as one grid saves two dispatch latencies a layer (60 of ~250 a step).
{{QKV_IO}}
const SWIGLU: bool = false;
const RES: bool = false;
const ROPE: bool = true;          // (the pair exchange runs; rotates() says where it applies)
const CACHE: bool = true;         // (caches() says which segments write a cache)
const COMBINE: bool = false;
var<workgroup> xs: array<vec4<f32>, 1>;

fn enter(wx: u32) -> u32 { return segment(wx, RPW * RPT); }
fn caches() -> bool { return seg > 0u; }
fn put(i: u32, e: f32) {
    if (seg == 0u) { out[i] = e; } else if (seg == 1u) { kc[i] = e; } else { vc[i] = e; }
}
fn res_at(i: u32) -> f32 { return 0.0; }
{{QGEMV_BODY}}
