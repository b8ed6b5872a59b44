// The signature shared by the fused attention kernels (attention/attention, attention_rows,
// attention_regs: the lowering's "row", "rows" and "regs" paths): q, k, v read from element
// offsets q_o, k_o, v_o through (batch, head, row) strides (dim stride 1; views such as the
// heads of one fused QKV projection need no copy), 3 mask [B, Lk] i32 (0 = masked; a dummy when
// HAS_MASK is false), 4 out, 5 params; causal: query i sees keys up to i + (Lk - Lq).
// Where k and v are views of q's buffer (or v of k's: one fused projection), they are read
// through that binding (K_IN_Q, V_IN) and their own are dummies: WebGPU (Dawn) rejects one
// buffer in several bindings of a dispatch that also writes it (read-only and writable uses
// of one buffer, or overlapping writable ranges), and a copy each cost a dispatch.
// The arrays' element (the QKV slot) is the storage type T, or a vec4 of it (attention_flash:
// offsets and strides then stay in elements, all multiples of 4).
struct Params { Lq: u32, Lk: u32, D: u32, scale: f32,
                q_b: u32, q_h: u32, q_i: u32, k_b: u32, k_h: u32, k_i: u32,
                v_b: u32, v_h: u32, v_i: u32, o_b: u32, o_h: u32, o_i: u32,
                q_o: u32, k_o: u32, v_o: u32 }
@group(0) @binding(0) var<storage, read_write> q: array<{{QKV}}>;
@group(0) @binding(1) var<storage, read_write> k: array<{{QKV}}>;
@group(0) @binding(2) var<storage, read_write> v: array<{{QKV}}>;
@group(0) @binding(3) var<storage, read_write> mask: array<i32>;
@group(0) @binding(4) var<storage, read_write> out: array<{{QKV}}>;
@group(0) @binding(5) var<uniform> p: Params;

override HAS_MASK: bool = false;
override CAUSAL: bool = false;
override K_IN_Q: bool = false;    // k's elements live in q's binding
override V_IN: u32 = 0u;          // v's elements live in: 0 its own binding, 1 q's, 2 k's

fn k_at(i: u32) -> {{QKV}} {
    if (K_IN_Q) { return q[i]; }
    return k[i];
}
fn v_at(i: u32) -> {{QKV}} {
    if (V_IN == 1u) { return q[i]; }
    if (V_IN == 2u) { return k[i]; }
    return v[i];
}

// the keys query row i sees: all Lk, or under CAUSAL those up to i + (Lk - Lq)
fn key_end(i: u32) -> u32 {
    return select(p.Lk, min(p.Lk, i + 1u + p.Lk - p.Lq), CAUSAL);
}
