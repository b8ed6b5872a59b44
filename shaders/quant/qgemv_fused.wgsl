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
// (any format of common/qformats.wgsl, see common/qblocks.wgsl), x [M, K] (K % QK == 0), g [K],
// res and out [M, N], all f32 math. bindings: 0 x, 1 w, 2 w2, 3 g, 4 res, 5 pos (i32 [1]),
// 6 freq (u32 [hd]), 7 out (dummies where unused), 8 params.
// grid: (ceil(N / (RPW * RPT)), ceil(M / ROWS), 1): as quant/qgemv.wgsl (RPW x RPT weight
// rows x TPR threads splitting K, ROWS x rows per workgroup).
// Limits: this exists because a decode step of a 135M model is bound by dispatches, not by
// bytes: on an H100 (Vulkan) a step was 553 dispatches in 6.3 ms of GPU time (~11 us each)
// for ~80 MB of weights that the HBM reads in ~30 us. Fusing takes 10 of a layer's 18
// dispatches away (553 -> 254 a step: 4.36 ms, then 3.31 ms with rope and cache writes in).
// Each call is still latency-bound (9-15 us for ~1 us of bytes): the norm's sum of squares is
// recomputed per workgroup (K = 576 floats a row) and reduced as a tree, as are the TPR
// partial sums of a row (one thread summing 256 values had cost ~4 us a call: 3.31 -> 2.89
// ms a step). The scale 1/rms is applied after the dot. Tried: nothing else yet; next would be
// q/k/v in one dispatch (needs more than WebGPU's 8 storage bindings as written).
{{QFUSED_IO}}
override ROWS: u32 = 1u;          // x rows per workgroup row, 1..4
override TPR: u32 = 8u;           // threads per weight row: a power of two, 1..32
override RPT: u32 = 1u;           // weight rows per thread, 1..8 (each unit's x loads shared)
override RQ: u32 = 1u;            // x row quads per workgroup, 1..4 (ROWS = 4; RPT = 1)
const RPW: u32 = 8u;              // weight rows per workgroup and per j (rows n0 + j * RPW)
var<workgroup> red: array<vec4<f32>, 256>;    // per thread: partial sums, x rows in x..w
var<workgroup> red2: array<vec4<f32>, 256>;   // the same for w2 (SWIGLU)
var<workgroup> scale: array<vec4<f32>, 4>;    // 1/rms of each x row of each quad (NORM)
var<workgroup> pairv: array<vec4<f32>, 8>;    // each weight row's results (ROPE partners)

{{QBLOCKS}}
{{ROPE_TURN}}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

// unit u's dots for weight row n with the x rows (and under SWIGLU w2's in .., zero past N)
struct Dots { a: vec4<f32>, b: vec4<f32> }
fn add(d: Dots, e: Dots) -> Dots { return Dots(d.a + e.a, d.b + e.b); }
fn row_dots(n: u32, u: u32, v: XUnit, valid: u32) -> Dots {
    var d: Dots;
    if (n < p.N) {
        d.a = dot_rows(load_unit(n, u, false), v, valid);
        if (SWIGLU) { d.b = dot_rows(load_unit(n, u, true), v, valid); }
    }
    return d;
}

// weight row n's result for the x rows from its TPR threads' sums (s, s2): reduced, scaled,
// SWIGLU and ROPE applied, then written (every thread calls this: it has barriers)
fn finish(n: u32, tid: u32, r0: u32, valid: u32, s_in: vec4<f32>, s2_in: vec4<f32>, quad: u32) {
    let t = tid % TPR;
    var s = s_in;
    var s2 = s2_in;
    if (TPR > 1u) {
        workgroupBarrier();                 // (red was read: sums of squares, or a row before)
        red[tid] = s;
        red2[tid] = s2;
        workgroupBarrier();
        // a tree, not one thread summing TPR values
        for (var h = TPR / 2u; h > 0u; h >>= 1u) {
            if (t < h) {
                red[tid] += red[tid + h];
                if (SWIGLU) { red2[tid] += red2[tid + h]; }
            }
            workgroupBarrier();
        }
        s = red[tid];
        s2 = red2[tid];
    }
    var v = vec4<f32>(0.0);
    if (t == 0u && n < p.N) {
        if (NORM) {
            s *= scale[quad];
            s2 *= scale[quad];
        }
        v = s;
        if (SWIGLU) { v = vec4<f32>(silu(s.x), silu(s.y), silu(s.z), silu(s.w)) * s2; }
    }
    if (ROPE) {                             // (uniform: every thread meets the barriers)
        workgroupBarrier();                 // (the previous row's partners were read)
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
    if (t == 0u && n < p.N && valid > 0u) {
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

fn quad_dots(u: u32, q: Unit, q2: Unit, r: u32) -> Dots {
    var d: Dots;
    let valid = valid_rows(r);
    if (valid > 0u) {
        let v = load_x(u, r, valid);
        d.a = dot_rows(q, v, valid);
        if (SWIGLU) { d.b = dot_rows(q2, v, valid); }
    }
    return d;
}

@compute @workgroup_size(RPW * TPR)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let t = tid % TPR;
    let n0 = wid.x * RPW * RPT + tid / TPR; // this thread's first weight row
    let r0 = wid.y * ROWS * RQ;             // this workgroup's first x row
    let valid = valid_rows(r0);
    if (NORM) {                             // sums of squares of the rows, then 1/rms
        let k4 = p.K / 4u;
        for (var quad = 0u; quad < RQ; quad++) {
            let rq = r0 + 4u * quad;
            let vq = valid_rows(rq);
            var sq = vec4<f32>(0.0);
            for (var j = tid; j < k4; j += RPW * TPR) {
                for (var i = 0u; i < vq; i++) {
                    let b = vec4<f32>(x[(rq + i) * k4 + j]);
                    sq[i] += dot(b, b);
                }
            }
            workgroupBarrier();             // (red was read by the quad before)
            red[tid] = sq;
            workgroupBarrier();
            // a tree, not one thread summing 256 values (that alone cost ~4 us of a ~14 us call)
            for (var h = RPW * TPR / 2u; h > 0u; h >>= 1u) {
                if (tid < h) { red[tid] += red[tid + h]; }
                workgroupBarrier();
            }
            if (tid == 0u) { scale[quad] = inverseSqrt(red[0] / f32(p.K) + vec4<f32>(p.eps)); }
        }
        workgroupBarrier();
    }
    var a0: Dots;                           // slots (common/qblocks.wgsl)
    var a1: Dots;
    var a2: Dots;
    var a3: Dots;
    var a4: Dots;
    var a5: Dots;
    var a6: Dots;
    var a7: Dots;
    if (n0 < p.N) {
        for (var u = t; u < (p.K >> 3u); u += TPR) {
            if (RQ > 1u) {                  // one unit of weight row n0, RQ x row quads
                let q = load_unit(n0, u, false);
                var q2: Unit;
                if (SWIGLU) { q2 = load_unit(n0, u, true); }
                a0 = add(a0, quad_dots(u, q, q2, r0));
                a1 = add(a1, quad_dots(u, q, q2, r0 + 4u));
                if (RQ > 2u) { a2 = add(a2, quad_dots(u, q, q2, r0 + 8u)); }
                if (RQ > 3u) { a3 = add(a3, quad_dots(u, q, q2, r0 + 12u)); }
            } else {                        // RPT weight rows, one unit of x loaded once
                let v = load_x(u, r0, valid);
                a0 = add(a0, row_dots(n0, u, v, valid));
                if (RPT > 1u) { a1 = add(a1, row_dots(n0 + RPW, u, v, valid)); }
                if (RPT > 2u) { a2 = add(a2, row_dots(n0 + 2u * RPW, u, v, valid)); }
                if (RPT > 3u) { a3 = add(a3, row_dots(n0 + 3u * RPW, u, v, valid)); }
                if (RPT > 4u) { a4 = add(a4, row_dots(n0 + 4u * RPW, u, v, valid)); }
                if (RPT > 5u) { a5 = add(a5, row_dots(n0 + 5u * RPW, u, v, valid)); }
                if (RPT > 6u) { a6 = add(a6, row_dots(n0 + 6u * RPW, u, v, valid)); }
                if (RPT > 7u) { a7 = add(a7, row_dots(n0 + 7u * RPW, u, v, valid)); }
            }
        }
    }
    let acc = array<Dots, 8>(a0, a1, a2, a3, a4, a5, a6, a7);
    for (var j = 0u; j < slots(); j++) {
        let r = slot_r(r0, j);
        finish(slot_n(n0, j), tid, r, valid_rows(r), acc[j].a, acc[j].b, select(0u, j, RQ > 1u));
    }
}
