// The signature shared by cached_attention's kernels (decoder/attn_decode, attn_prefill,
// attn_flash: one call's alternatives): q (B, S, H, D), kc / vc (B, Hkv, T, D), pos (i32,
// [1], or [2, B] = per batch row [positions; KV slots] when nb = B > 0), dst (out, or
// per-chunk partials for decoder/attn_combine), params; the run-time
// key chunking they and attn_combine agree on; the sliding window (window > 0: the query at
// position qp sees keys qp - window < k <= qp) and the score soft-cap (softcap > 0:
// s -> tanh(s / softcap) * softcap, Gemma 2).
struct Params { S: u32, H: u32, G: u32, Hkv: u32, D4: u32, T: u32, nsplit: u32, gran: u32,
                direct: u32, scale: f32, window: u32, softcap: f32, nb: u32 }
@group(0) @binding(0) var<storage, read_write> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> kc: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> vc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> pos: array<i32>;
@group(0) @binding(4) var<storage, read_write> dst: array<vec4<f32>>;
@group(0) @binding(5) var<uniform> p: Params;

{{KV_CHUNKS}}

// batch row b's position (of its query row 0) and the cache slot it reads
fn row_pos(b: u32) -> i32 {
    return pos[select(0u, b, p.nb > 0u)];
}

fn row_slot(b: u32) -> u32 {
    return select(b, u32(pos[p.nb + b]), p.nb > 0u);
}

// the (row, query head) item i of kv head hk: its query head
fn item_head(hk: u32, i: u32) -> u32 {
    return hk * p.G + i % p.G;
}

// the first key the query at position qp sees (0 without a sliding window)
fn key_start(qp: u32) -> u32 {
    return select(0u, qp + 1u - p.window, p.window > 0u && qp >= p.window);
}

// a (scaled) score, soft-capped when the model asks for it (tanh saturates past |x| = 15)
fn capped(s: f32) -> f32 {
    return select(s, tanh(clamp(s / p.softcap, -15.0, 15.0)) * p.softcap, p.softcap > 0.0);
}
