// rope: rotary position embedding of x (B, S, H, D), row s at position pos + s
// (pos: row 0's position, that of batch row b when per row).
// Pair i (i < D/2) is rotated by angle (pos + s) * base^(-2i/D): (x1, x2) ->
// (x1 cos - x2 sin, x1 sin + x2 cos); INTERLEAVED pairs are (2i, 2i+1) (GPT-J, llama.cpp),
// otherwise (i, i + D/2) (NeoX, HF rotate_half).
// Angles: f32 (pos + s) * f32(theta) is off by up to ~5e-4 rad at position 8000 and the
// builtin sin/cos are only specified on [-pi, pi]. So the angle is reduced exactly in integer
// arithmetic: freq[2i], freq[2i+1] hold theta_i / (2 pi) as a 64-bit fixed-point fraction of a
// turn (hi, lo words, computed in float64 on the host); the position's turn fraction modulo 1
// is p * hi + mulhi(p, lo) in wrapping u32 (error ~1e-9 rad for any u32 position), then an
// octant reduction to [-pi/4, pi/4] and short Taylor polynomials (error ~1e-7 in f32).
// bindings: 0 x, 1 pos (i32, [1], or [2, B] = per batch row [positions; slots] when nb = B),
// 2 freq (u32, [D]), 3 out, 4 params.
// grid: 1 thread per pair (B*S*H*D/2), continued in y.
struct Params { n: u32, S: u32, H: u32, D: u32, nb: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> pos: array<i32>;
@group(0) @binding(2) var<storage, read_write> freq: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

override WG: u32 = 256;
override INTERLEAVED: bool = true;

{{ROPE_TURN}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let idx = (wid.y * nwg.x + wid.x) * WG + lid;
    if (idx >= p.n) { return; }
    let hd = p.D / 2u;
    let i = idx % hd;
    let row = idx / hd;                              // (b, s, h) flattened
    let s = (row / p.H) % p.S;
    let b = row / (p.H * p.S);
    let position = u32(pos[select(0u, b, p.nb > 0u)] + i32(s));
    let turn = position * freq[2u * i] + mulhi(position, freq[2u * i + 1u]);
    let sc = sincos_turn(turn);
    var i1 = row * p.D + i;
    var i2 = i1 + hd;
    if (INTERLEAVED) {
        i1 = row * p.D + 2u * i;
        i2 = i1 + 1u;
    }
    let x1 = x[i1];
    let x2 = x[i2];
    out[i1] = x1 * sc.y - x2 * sc.x;
    out[i2] = x1 * sc.x + x2 * sc.y;
}
