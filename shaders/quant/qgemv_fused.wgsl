// quantized GEMV with its neighbours fused in (decode rows and prefills, M <=
// fuse.GEMV_MAX_M), the layer pattern of a Llama decoder, each an override:
//   NORM:   x is rms-normalized first: x[r] * g / sqrt(mean(x[r]^2) + eps) (the rms_norm
//           before q/k/v and before gate/up);
//   SWIGLU: two weights of one shape: out = silu(x . w) * (x . w2) (gate, up and their mul);
//   RES:    out += res[r, n] (the residual add after o-proj and down-proj);
//   ROPE:   the output rows are heads of `hd` values whose interleaved pairs (2i, 2i+1) rotate
//           by (pos[0] + s) * theta_i (x row r = b * S + s; common/rope_turn.wgsl), as the
//           rope op after q/k; pairs are neighbouring weight rows of one workgroup;
//   CACHE:  out is a KV cache (B, N / hd, T, hd): row r lands at position pos[0] + s, as the
//           cache_write op after k/v (positions outside [0, T) are skipped).
//   KV_ROWS: pos is [2, B] = per batch row [positions; KV slots] (a batched engine's step):
//           row r's position is pos[b] + s and its cache slot pos[B + b]
//           (common/row_positions.wgsl).
// out[r, n] = epilogue(x'[r, :] . dequant(w)[n, :]); w, w2 (N, K) GGUF blocks as u32 words
// (any format of common/qformats.wgsl, see common/qblocks.wgsl), x [M, K] (K % QK == 0), g [K],
// res and out [M, N], all f32 math. bindings: 0 x, 1 w, 2 w2, 3 g, 4 res, 5 pos (i32 [1] or
// [2, B]), 6 freq (u32 [hd]), 7 out (dummies where unused), 8 params.
// grid: (ceil(N / (RPW * RPT)), ceil(M / ROWS), 1): as quant/qgemv.wgsl (RPW x RPT weight
// rows x TPR threads splitting K, ROWS x rows per workgroup).
// Limits: this exists because a decode step of a 135M model is bound by dispatches, not by
// bytes: on an H100 (Vulkan) a step was 553 dispatches in 6.3 ms of GPU time (~11 us each)
// for ~80 MB of weights that the HBM reads in ~30 us. Fusing takes 10 of a layer's 18
// dispatches away (553 -> 254 a step: 4.36 ms, then 3.31 ms with rope and cache writes in).
// Each call is still latency-bound (9-15 us for ~1 us of bytes): the norm's sum of squares is
// recomputed per workgroup (K = 576 floats a row) and reduced as a tree, as are the TPR
// partial sums of a row (one thread summing 256 values had cost ~4 us a call: 3.31 -> 2.89
// ms a step). The scale 1/rms is applied after the dot. Then (2026-11-26, H100, SmolLM2 Q4_1,
// bench/probes/decode_probe.py): q/k/v in one dispatch where 10 storage buffers bind
// (quant/qgemv_qkv.wgsl) and the attention's combine merged in the o projection (COMBINE,
// common/qfused_io.wgsl): 8 -> 5 dispatches a layer, 2.40 -> 1.71 ms of GPU time a step,
// 455-520 -> 651-680 tokens/s. The body is common/qgemv_body.wgsl, shared with qgemv_qkv.
{{QFUSED_IO}}

// common/qgemv_body.wgsl's hooks: one weight, its results to `out`
fn enter(wx: u32) -> u32 { return wx; }
fn rotates() -> bool { return true; }
fn caches() -> bool { return CACHE; }
fn put(i: u32, e: f32) { out[i] = e; }
fn res_at(i: u32) -> f32 { return res[i]; }
{{QGEMV_BODY}}
