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
// out[r, n] = epilogue(x'[r, :] . dequant(w)[n, :]); w, w2 (N, K) GGUF blocks as u32 words
// (Q4_1 or Q8_0, see common/qblocks.wgsl), x [M, K] (K % 32 == 0), g [K], res and out [M, N],
// all f32 math. bindings: 0 x, 1 w, 2 w2, 3 g, 4 res, 5 pos (i32 [1]), 6 freq (u32 [hd]),
// 7 out (dummies where unused), 8 params.
// grid: (ceil(N / RPW), ceil(M / ROWS), 1): as quant/qgemv.wgsl (RPW weight rows x TPR
// threads splitting K, ROWS x rows per workgroup).
// Limits: this exists because a decode step of a 135M model is bound by dispatches, not by
// bytes: on an H100 (Vulkan) a step was 553 dispatches in 6.3 ms of GPU time (~11 us each)
// for ~80 MB of weights that the HBM reads in ~30 us. Fusing takes 10 of a layer's 18
// dispatches away (553 -> 254 a step: 4.36 ms, then 3.31 ms with rope and cache writes in).
// Each call is still latency-bound (9-15 us for ~1 us of bytes): the norm's sum of squares is
// recomputed per workgroup (K = 576 floats a row) and reduced as a tree, as are the TPR
// partial sums of a row (one thread summing 256 values had cost ~4 us a call: 3.31 -> 2.89
// ms a step). The scale 1/rms is applied after the dot. Tried: nothing else yet; next would be
// q/k/v in one dispatch (needs more than WebGPU's 8 storage bindings as written).
struct Params { M: u32, N: u32, K: u32, nw: u32, eps: f32, hd: u32, S: u32, T: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<vec4<{{T}}>>;
@group(0) @binding(1) var<storage, read_write> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> w2: array<u32>;
@group(0) @binding(3) var<storage, read_write> g: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> res: array<f32>;
@group(0) @binding(5) var<storage, read_write> pos: array<i32>;
@group(0) @binding(6) var<storage, read_write> freq: array<u32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

override Q8_0: bool = false;      // false: Q4_1
override NORM: bool = false;
override SWIGLU: bool = false;
override RES: bool = false;
override ROPE: bool = false;
override CACHE: bool = false;
override ROWS: u32 = 1u;          // x rows per workgroup row, 1..4
override TPR: u32 = 8u;           // threads per weight row: a power of two, 2..32
const RPW: u32 = 8u;              // weight rows per workgroup
var<workgroup> red: array<vec4<f32>, 256>;    // per thread: partial sums, x rows in x..w
var<workgroup> red2: array<vec4<f32>, 256>;   // the same for w2 (SWIGLU)
var<workgroup> scale: vec4<f32>;              // 1/rms of each x row (NORM), else 1
var<workgroup> pairv: array<vec4<f32>, 8>;    // each weight row's results (ROPE partners)
var<private> second: bool;                    // load_unit reads w2

fn wword(i: u32) -> u32 {
    if (second) { return w2[i]; }
    return w[i];
}
{{QBLOCKS}}
{{ROPE_TURN}}

// this unit's contribution to x row r . weight row (x times the norm weight under NORM)
fn dot_unit(q: Unit, r: u32) -> f32 {
    let base = r * (p.K / 4u);
    var xa = vec4<f32>(x[base + q.k0 / 4u]);
    var xb = vec4<f32>(x[base + q.k1 / 4u]);
    if (NORM) {
        xa *= g[q.k0 / 4u];
        xb *= g[q.k1 / 4u];
    }
    var s = q.d * (dot(q.lo, xa) + dot(q.hi, xb));
    if (!Q8_0) { s += q.m * dot(xa + xb, vec4<f32>(1.0)); }
    return s;
}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

@compute @workgroup_size(RPW * TPR)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let t = tid % TPR;
    let n = wid.x * RPW + tid / TPR;
    let r0 = wid.y * ROWS;                  // this workgroup's first x row
    let valid = valid_rows(r0);
    if (NORM) {                             // sum of squares of the rows, then 1/rms
        var sq = vec4<f32>(0.0);
        let k4 = p.K / 4u;
        for (var j = tid; j < k4; j += RPW * TPR) {
            let a = vec4<f32>(x[r0 * k4 + j]);
            sq.x += dot(a, a);
            for (var i = 1u; i < valid; i++) {
                let b = vec4<f32>(x[(r0 + i) * k4 + j]);
                sq[i] += dot(b, b);
            }
        }
        red[tid] = sq;
        workgroupBarrier();
        // a tree, not one thread summing 256 values (that alone cost ~4 us of a ~14 us call)
        for (var h = RPW * TPR / 2u; h > 0u; h >>= 1u) {
            if (tid < h) { red[tid] += red[tid + h]; }
            workgroupBarrier();
        }
        if (tid == 0u) { scale = inverseSqrt(red[0] / f32(p.K) + vec4<f32>(p.eps)); }
        workgroupBarrier();
    }
    var acc = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    if (n < p.N) {
        for (var u = t; u < p.K / 8u; u += TPR) {
            second = false;
            acc += dot_rows(load_unit(n, u), r0, valid);
            if (SWIGLU) {
                second = true;
                acc2 += dot_rows(load_unit(n, u), r0, valid);
            }
        }
    }
    workgroupBarrier();                     // (red held the sums of squares)
    red[tid] = acc;
    red2[tid] = acc2;
    workgroupBarrier();
    for (var h = TPR / 2u; h > 0u; h >>= 1u) {      // the TPR partial sums of each weight row
        if (t < h) {
            red[tid] += red[tid + h];
            if (SWIGLU) { red2[tid] += red2[tid + h]; }
        }
        workgroupBarrier();
    }
    var v = vec4<f32>(0.0);
    if (t == 0u && n < p.N) {
        var s = red[tid];
        var s2 = red2[tid];
        if (NORM) {
            s *= scale;
            s2 *= scale;
        }
        v = s;
        if (SWIGLU) { v = vec4<f32>(silu(s.x), silu(s.y), silu(s.z), silu(s.w)) * s2; }
    }
    if (ROPE) {                             // (uniform: every thread meets the barrier)
        if (t == 0u) { pairv[tid / TPR] = v; }
        workgroupBarrier();
        if (t == 0u && n < p.N) {
            let other = pairv[(tid / TPR) ^ 1u];
            let i = (n % p.hd) / 2u;
            let odd = (n & 1u) == 1u;
            for (var j = 0u; j < 4u; j++) {
                let position = u32(pos[0] + i32((r0 + j) % p.S));
                let sc = sincos_turn(position * freq[2u * i] + mulhi(position, freq[2u * i + 1u]));
                // even row: x1 cos - x2 sin (x2 = partner); odd row: x1 sin + x2 cos (x1 = partner)
                v[j] = select(v[j] * sc.y - other[j] * sc.x, other[j] * sc.x + v[j] * sc.y, odd);
            }
        }
    }
    if (t == 0u && n < p.N) {
        let o = r0 * p.N + n;
        for (var i = 0u; i < 4u; i++) {
            if (i < valid) {
                var e = v[i];
                if (RES) { e += res[o + i * p.N]; }
                if (CACHE) {
                    let r = r0 + i;
                    let tpos = pos[0] + i32(r % p.S);
                    if (tpos >= 0 && u32(tpos) < p.T) {
                        let heads = p.N / p.hd;
                        let h = (r / p.S) * heads + n / p.hd;       // (b, h) flattened
                        out[(h * p.T + u32(tpos)) * p.hd + n % p.hd] = e;
                    }
                } else {
                    out[o + i * p.N] = e;
                }
            }
        }
    }
}
