// sample: draw one token from each of r rows of n logits, and mark it seen (op `sample`; its
// numpy twin webrlx/sampling.py states the semantics and does the same math, token for token):
//   l = logits, seen tokens penalized (l / rp if l > 0 else l * rp);
//   temperature <= 0: the first index of max(l);
//   else keep l >= t_k (the top_k-th largest l; all when top_k <= 0 or >= n), then l >= t_p,
//   the largest t <= max(l) whose mass(l >= t) >= top_p * mass(kept) (all when top_p >= 1),
//   with w = exp((l - max l) / temperature); u = (pcg(seed + pcg(step)) >> 8) / 2^24; the
//   token is the first kept index whose running sum of w (index order) exceeds u * total.
// Values compare as u32 keys of their f32 bits (order kept, -0 folded into +0), so both
// thresholds are exact values of l and ties at a threshold are all kept.
//
// Design: ONE workgroup of 256 threads a row (grid (r, 1, 1)), one dispatch, so the token never
// leaves the GPU. Pass 1 writes the keys of l to `scratch` (vec4 slots of 4 tokens) and finds
// max l, its first index and each thread's largest key (greedy stops there). The tokens still
// in the running are copied to a list in workgroup memory (CAP = 512) as soon as they fit; a
// bitonic sort of the list by key then gives t_k (position top_k - 1) and t_p (the first
// position whose running mass reaches top_p * total) exactly, and a sort of the survivors by
// index and a scan give the draw. Reaching the list in few passes over the row: top-k probes
// from a proven lower bound, the top_k-th largest of the 256 threads' largest keys (top_k <=
// 256: those threads hold top_k tokens at least that large), top-p (without top-k) from
// max l + temperature * log((1 - top_p) * total / 2n) (the tokens below it hold less than
// (1 - top_p) / 2 of the mass); one probe = one pass counting (and summing the mass of) the
// tokens >= a key while copying them, bisecting the key until they fit. Only when more than
// CAP tokens survive (no top-k on a flat distribution) does the draw run on the row: chunk
// sums per thread, a scan, then the running sums inside the chunk that holds u * total.
// Every reduction and scan has a fixed order, so a (seed, step) always gives one token.
// What limits it: one workgroup runs on one SM (one CPU core on lavapipe); its passes over
// the row (4 vec4 loads in flight a thread) are bound by memory latency and one SM's ALUs.
// Measured at V = 49152 on an H100: greedy 23 us, top-k 55 us, top-p 76 us, temperature
// only 59 us (about 10 us of it fixed cost): fine for one row per decoded token, but not a
// kernel for many rows at once. Rows are independent workgroups: row = workgroup_id.x, its
// logits, params, scratch and out[row] at the row's offsets; `seen` is shared by every row
// (marked only when r = 1: the lowering's p.mark).
//
// Greedy rows take a pre-pass (PRE, sample/sample_max.wgsl) over many workgroups.
// bindings: 0 logits (T, n), 1 seen (i32, n; seen[token] = 1 IN PLACE when p.mark = 1),
// 2 fparams (f32: temperature, top_p, rp, _), 3 iparams (i32: top_k, seed, step, _),
// (each r rows: logits (T, r * n), fparams / iparams r * 4, scratch r * 2 * ceil(n / 4)
// vec4<u32>: keys, then weights, a row; 5 out (i32, r)), 6 partials (PRE), 7 params.
// grid: (r, 1, 1).
struct Params { n: u32, mark: u32, chunks: u32 }
@group(0) @binding(0) var<storage, read_write> logits: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> seen: array<i32>;
@group(0) @binding(2) var<storage, read_write> fparams: array<f32>;
@group(0) @binding(3) var<storage, read_write> iparams: array<i32>;
@group(0) @binding(4) var<storage, read_write> scratch: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> out: array<i32>;
@group(0) @binding(6) var<storage, read_write> partials: array<vec2<u32>>;
@group(0) @binding(7) var<uniform> p: Params;
// PRE: sample/sample_max.wgsl ran first and left each row's p.chunks chunk maxima in
// `partials` (key, first index; NAN_CHUNK where a chunk holds a NaN): a greedy row merges
// them instead of reading its logits (unless a NaN is there)
override PRE: bool = false;
const NAN_CHUNK: u32 = 0xfffffffeu;

const WG: u32 = 256u;
var<private> row: u32;          // this workgroup's row, and the offsets of its row in
var<private> lo: u32;           // logits (row * n), the params (row * 4) and
var<private> po: u32;           // scratch (row * 2 * ceil(n / 4) vec4 slots)
var<private> so: u32;
const CAP: u32 = 512u;          // tokens the list holds (2 a thread)
const NONE: u32 = 0xffffffffu;
var<workgroup> redf: array<f32, 256>;
var<workgroup> redu: array<u32, 256>;
var<workgroup> grpf: array<f32, 16>;
var<workgroup> grpu: array<u32, 16>;
var<workgroup> maxes: array<vec4<u32>, 64>;
var<workgroup> li: array<u32, 512>;   // the list: token index, key, weight
var<workgroup> lk: array<u32, 512>;
var<workgroup> lw: array<f32, 512>;
var<workgroup> listed: atomic<u32>;
var<workgroup> one_f: f32;
var<workgroup> one_u: u32;

// the repetition penalty on 4 logits (s: their seen flags); the division only when needed
fn penalize(x: vec4<f32>, s: vec4<i32>, rp: f32) -> vec4<f32> {
    let hit = s > vec4<i32>(0);
    if (!any(hit)) { return x; }
    return select(x, select(x * rp, x / rp, x > vec4<f32>(0.0)), hit);
}

// the penalized logits of the 4 tokens of slot q (slot_edge: indices clamped below n)
fn slot_full(q: u32, rp: f32) -> vec4<f32> {
    let j = 4u * q;
    let x = vec4<f32>(f32(logits[lo + j]), f32(logits[lo + j + 1u]), f32(logits[lo + j + 2u]),
                      f32(logits[lo + j + 3u]));
    return penalize(x, vec4<i32>(seen[j], seen[j + 1u], seen[j + 2u], seen[j + 3u]), rp);
}

fn slot_edge(q: u32, n: u32, rp: f32) -> vec4<f32> {
    let j = min(vec4<u32>(4u * q) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(n - 1u));
    let x = vec4<f32>(f32(logits[lo + j.x]), f32(logits[lo + j.y]), f32(logits[lo + j.z]), f32(logits[lo + j.w]));
    return penalize(x, vec4<i32>(seen[j.x], seen[j.y], seen[j.z], seen[j.w]), rp);
}

// per lane, the running max of a thread's tokens and the first index holding it
fn track(l: vec4<f32>, q: u32, n: u32, mv: ptr<function, vec4<f32>>,
         mi: ptr<function, vec4<u32>>) {
    let j = vec4<u32>(4u * q) + vec4<u32>(0u, 1u, 2u, 3u);
    let take = (j < vec4<u32>(n)) & ((*mi == vec4<u32>(NONE)) | (l > *mv));
    *mv = select(*mv, l, take);
    *mi = select(*mi, j, take);
}

// f32 -> u32 in the same order (-0 folded into +0; NaN above +inf), and back
fn key(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    if (b == 0x80000000u) { return b; }
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn keys4(l: vec4<f32>) -> vec4<u32> {
    let b = bitcast<vec4<u32>>(l);
    let c = select(b, vec4<u32>(0u), b == vec4<u32>(0x80000000u));
    return select(c | vec4<u32>(0x80000000u), ~c, (c & vec4<u32>(0x80000000u)) != vec4<u32>(0u));
}

fn unkey(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

// w = exp((l - max l) / temperature), itemp = 1 / temperature
fn weights4(k: vec4<u32>, ok: vec4<bool>, lmax: f32, itemp: f32) -> vec4<f32> {
    let l = vec4<f32>(unkey(k.x), unkey(k.y), unkey(k.z), unkey(k.w));
    return select(vec4<f32>(0.0), exp((l - vec4<f32>(lmax)) * itemp), ok);
}

fn pcg(v: u32) -> u32 {
    let s = v * 747796405u + 2891336453u;
    let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

// lanes of vec4 slot q that are tokens (< n) with a key >= t
fn live(q: u32, k: vec4<u32>, n: u32, t: u32) -> vec4<bool> {
    return (vec4<u32>(4u * q) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(n)) & (k >= vec4<u32>(t));
}

fn ones(b: vec4<bool>) -> u32 {
    return dot(select(vec4<u32>(0u), vec4<u32>(1u), b), vec4<u32>(1u));
}

// s + the lanes of w that ok keeps, in lane order
fn add(s: f32, w: vec4<f32>, ok: vec4<bool>) -> f32 {
    let m = select(vec4<f32>(0.0), w, ok);
    return s + m.x + m.y + m.z + m.w;
}

fn lane(v: vec4<u32>, i: u32) -> u32 {
    return select(select(v.x, v.y, i == 1u), select(v.z, v.w, i == 3u), i >= 2u);
}

// -- workgroup reductions and scans in a fixed order (16 threads of 16 values, then one of
// 16); every thread calls them and the results are uniform
fn sum2(lid: u32, s: f32, c: u32) -> vec2<f32> {      // (sum of s, bits of the sum of c)
    redf[lid] = s;
    redu[lid] = c;
    workgroupBarrier();
    if (lid < 16u) {
        var a = 0.0;
        var b = 0u;
        for (var i = lid * 16u; i < lid * 16u + 16u; i++) {
            a += redf[i];
            b += redu[i];
        }
        grpf[lid] = a;
        grpu[lid] = b;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var a = 0.0;
        var b = 0u;
        for (var g = 0u; g < 16u; g++) {
            a += grpf[g];
            b += grpu[g];
        }
        one_f = a;
        one_u = b;
    }
    return vec2<f32>(workgroupUniformLoad(&one_f), bitcast<f32>(workgroupUniformLoad(&one_u)));
}

fn min_all(lid: u32, v: u32) -> u32 {
    redu[lid] = v;
    workgroupBarrier();
    if (lid < 16u) {
        var m = NONE;
        for (var i = lid * 16u; i < lid * 16u + 16u; i++) { m = min(m, redu[i]); }
        grpu[lid] = m;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var m = NONE;
        for (var g = 0u; g < 16u; g++) { m = min(m, grpu[g]); }
        one_u = m;
    }
    return workgroupUniformLoad(&one_u);
}

fn max_all(lid: u32, v: u32) -> u32 {
    return NONE - min_all(lid, NONE - v);
}

// inclusive prefix sums over threads (left in redf); returns this thread's
fn scan_f(lid: u32, v: f32) -> f32 {
    redf[lid] = v;
    workgroupBarrier();
    if (lid < 16u) {
        var s = 0.0;
        for (var i = lid * 16u; i < lid * 16u + 16u; i++) {
            s += redf[i];
            redf[i] = s;
        }
        grpf[lid] = s;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var s = 0.0;
        for (var g = 0u; g < 16u; g++) {
            let v = grpf[g];
            grpf[g] = s;
            s += v;
        }
    }
    workgroupBarrier();
    let r = grpf[lid / 16u] + redf[lid];
    workgroupBarrier();
    redf[lid] = r;
    workgroupBarrier();
    return r;
}

// -- passes over the row: keys in scratch[so + 0, n4), weights in scratch[so + n4, 2 n4); strided by
// thread, 4 vec4 slots (16 tokens) a step, loads clamped into range and masked by `live`.
// A probe at key t counts the tokens >= t and copies them to the list (in any order: the
// list is sorted before use), which is complete when the count is at most CAP.
fn list_slot(q: u32, kk: vec4<u32>, ww: vec4<f32>, ok: vec4<bool>, at: u32) -> u32 {
    var s = at;
    if (any(ok)) {
        for (var i = 0u; i < 4u; i++) {
            if (lane(vec4<u32>(ok), i) != 0u && s < CAP) {
                li[s] = 4u * q + i;
                lk[s] = lane(kk, i);
                lw[s] = bitcast<f32>(lane(bitcast<vec4<u32>>(ww), i));
                s++;
            }
        }
    }
    return s;
}

fn start_list(lid: u32) {
    if (lid == 0u) { atomicStore(&listed, 0u); }
    workgroupBarrier();
}

// the count of tokens with key >= t (their weights computed for the copies)
fn probe_keys(lid: u32, n: u32, t: u32, lmax: f32, itemp: f32) -> u32 {
    let n4 = (n + 3u) / 4u;
    start_list(lid);
    var cnt = 0u;
    for (var q = lid; q < n4; q += 4u * WG) {
        let q1 = q + WG;
        let q2 = q + 2u * WG;
        let q3 = q + 3u * WG;
        let k0 = scratch[so + q];
        let k1 = scratch[so + min(q1, n4 - 1u)];
        let k2 = scratch[so + min(q2, n4 - 1u)];
        let k3 = scratch[so + min(q3, n4 - 1u)];
        let o0 = live(q, k0, n, t);
        let o1 = live(q1, k1, n, t);
        let o2 = live(q2, k2, n, t);
        let o3 = live(q3, k3, n, t);
        let c = ones(o0) + ones(o1) + ones(o2) + ones(o3);
        cnt += c;
        if (c > 0u && atomicLoad(&listed) < CAP) {     // slots for the copies
            var at = atomicAdd(&listed, c);
            if (at < CAP) {
                at = list_slot(q, k0, weights4(k0, o0, lmax, itemp), o0, at);
                at = list_slot(q1, k1, weights4(k1, o1, lmax, itemp), o1, at);
                at = list_slot(q2, k2, weights4(k2, o2, lmax, itemp), o2, at);
                at = list_slot(q3, k3, weights4(k3, o3, lmax, itemp), o3, at);
            }
        }
    }
    return bitcast<u32>(sum2(lid, 0.0, cnt).y);
}

// (mass, count as bits) of the tokens with key >= t, from the row's weights
fn probe_mass(lid: u32, n: u32, t: u32) -> vec2<f32> {
    let n4 = (n + 3u) / 4u;
    start_list(lid);
    var s = 0.0;
    var cnt = 0u;
    for (var q = lid; q < n4; q += 4u * WG) {
        let q1 = q + WG;
        let q2 = q + 2u * WG;
        let q3 = q + 3u * WG;
        let k0 = scratch[so + q];
        let k1 = scratch[so + min(q1, n4 - 1u)];
        let k2 = scratch[so + min(q2, n4 - 1u)];
        let k3 = scratch[so + min(q3, n4 - 1u)];
        let w0 = bitcast<vec4<f32>>(scratch[so + n4 + q]);
        let w1 = bitcast<vec4<f32>>(scratch[so + n4 + min(q1, n4 - 1u)]);
        let w2 = bitcast<vec4<f32>>(scratch[so + n4 + min(q2, n4 - 1u)]);
        let w3 = bitcast<vec4<f32>>(scratch[so + n4 + min(q3, n4 - 1u)]);
        let o0 = live(q, k0, n, t);
        let o1 = live(q1, k1, n, t);
        let o2 = live(q2, k2, n, t);
        let o3 = live(q3, k3, n, t);
        s = add(add(add(add(s, w0, o0), w1, o1), w2, o2), w3, o3);
        let c = ones(o0) + ones(o1) + ones(o2) + ones(o3);
        cnt += c;
        if (c > 0u && atomicLoad(&listed) < CAP) {     // slots for the copies
            var at = atomicAdd(&listed, c);
            if (at < CAP) {
                at = list_slot(q, k0, w0, o0, at);
                at = list_slot(q1, k1, w1, o1, at);
                at = list_slot(q2, k2, w2, o2, at);
                at = list_slot(q3, k3, w3, o3, at);
            }
        }
    }
    return sum2(lid, s, cnt);
}

fn min_key_row(lid: u32, n: u32, t: u32) -> u32 {
    let n4 = (n + 3u) / 4u;
    var b = vec4<u32>(NONE);
    for (var q = lid; q < n4; q += 4u * WG) {
        let q1 = q + WG;
        let q2 = q + 2u * WG;
        let q3 = q + 3u * WG;
        let k0 = scratch[so + q];
        let k1 = scratch[so + min(q1, n4 - 1u)];
        let k2 = scratch[so + min(q2, n4 - 1u)];
        let k3 = scratch[so + min(q3, n4 - 1u)];
        b = min(min(b, select(vec4<u32>(NONE), k0, live(q, k0, n, t))),
                select(vec4<u32>(NONE), k1, live(q1, k1, n, t)));
        b = min(min(b, select(vec4<u32>(NONE), k2, live(q2, k2, n, t))),
                select(vec4<u32>(NONE), k3, live(q3, k3, n, t)));
    }
    return min_all(lid, min(min(b.x, b.y), min(b.z, b.w)));
}

// -- the list
fn before(ka: u32, ia: u32, kb: u32, ib: u32, by_key: bool) -> bool {
    return select((ia < ib), (ka > kb) || (ka == kb && ia < ib), by_key);
}

// bitonic sort of the list's first m entries: by key, largest first (ties by index), or by
// index
fn sort_list(lid: u32, m: u32, by_key: bool) {
    var size = 2u;
    while (size < m) { size <<= 1u; }
    for (var i = m + lid; i < size; i += WG) {
        li[i] = NONE;
        lk[i] = 0u;
        lw[i] = 0.0;
    }
    workgroupBarrier();
    for (var b = 2u; b <= size; b <<= 1u) {
        for (var s = b >> 1u; s > 0u; s >>= 1u) {
            if (lid < size / 2u) {
                let i = 2u * s * (lid / s) + lid % s;
                let j = i + s;
                let ki = lk[i];
                let kj = lk[j];
                let xi = li[i];
                let xj = li[j];
                if (select(before(ki, xi, kj, xj, by_key), before(kj, xj, ki, xi, by_key),
                           (i & b) == 0u)) {
                    let w = lw[i];
                    lk[i] = kj;
                    li[i] = xj;
                    lw[i] = lw[j];
                    lk[j] = ki;
                    li[j] = xi;
                    lw[j] = w;
                }
            }
            workgroupBarrier();
        }
    }
}

// the first of the list's m entries (in list order) at which the running mass of the
// entries with key >= t reaches the goal (> it when strict), else the last entry with w > 0;
// the goal is `fixed` when >= 0, else frac times their total mass
fn scan_list(lid: u32, m: u32, t: u32, frac: f32, fixed: f32, strict: bool) -> u32 {
    let i = 2u * lid;
    let a = select(0.0, lw[i], i < m && lk[i] >= t);
    let b = select(0.0, lw[i + 1u], i + 1u < m && lk[i + 1u] >= t);
    let incl = scan_f(lid, a + b);
    let total = workgroupUniformLoad(&redf[255]);
    let excl = select(0.0, redf[max(lid, 1u) - 1u], lid > 0u);
    let g = select(frac * total, fixed, fixed >= 0.0);
    let ra = excl + a;
    let rb = excl + (a + b);
    var first = NONE;
    if (a > 0.0 && select(ra >= g, ra > g, strict)) {
        first = i;
    } else if (b > 0.0 && select(rb >= g, rb > g, strict)) {
        first = i + 1u;
    }
    let f = min_all(lid, first);
    if (f != NONE) { return f; }
    var last = 0u;           // rounding: the last entry with w > 0, plus one
    if (b > 0.0) { last = i + 2u; } else if (a > 0.0) { last = i + 1u; }
    return max(max_all(lid, last), 1u) - 1u;
}

// the k-th largest of the threads' values v (1 <= k <= WG), ties by thread
fn kth_of_threads(lid: u32, v: u32, k: u32) -> u32 {
    maxes[lid / 4u][lid % 4u] = v;
    workgroupBarrier();
    var r = vec4<u32>(0u);
    let me = vec4<u32>(v);
    let at = vec4<u32>(lid);
    for (var s = 0u; s < 64u; s += 4u) {
        let a = maxes[s];
        let b = maxes[s + 1u];
        let c = maxes[s + 2u];
        let d = maxes[s + 3u];
        let base = vec4<u32>(4u * s) + vec4<u32>(0u, 1u, 2u, 3u);
        r += select(vec4<u32>(0u), vec4<u32>(1u), (a > me) | ((a == me) & (base < at)));
        r += select(vec4<u32>(0u), vec4<u32>(1u), (b > me) | ((b == me) & (base + 4u < at)));
        r += select(vec4<u32>(0u), vec4<u32>(1u), (c > me) | ((c == me) & (base + 8u < at)));
        r += select(vec4<u32>(0u), vec4<u32>(1u), (d > me) | ((d == me) & (base + 12u < at)));
    }
    if (r.x + r.y + r.z + r.w == k - 1u) { one_u = v; }
    return workgroupUniformLoad(&one_u);
}

// the draw on the row: chunks of c4 vec4 slots a thread, the chunk holding u * total, then
// the running sums inside it
fn draw_row(lid: u32, n: u32, t: u32, u: f32) -> u32 {
    let n4 = (n + 3u) / 4u;
    let c4 = (n4 + WG - 1u) / WG;
    storageBarrier();                             // chunks read weights other threads wrote
    let q0 = min(lid * c4, n4);
    let q1 = min(q0 + c4, n4);
    var s = 0.0;
    var last = 0u;
    for (var q = q0; q < q1; q += 4u) {
        let qa = min(q + 1u, n4 - 1u);
        let qb = min(q + 2u, n4 - 1u);
        let qc = min(q + 3u, n4 - 1u);
        let o0 = live(q, scratch[so + q], n, t);
        let o1 = live(q + 1u, scratch[so + qa], n, t) & vec4<bool>(q + 1u < q1);
        let o2 = live(q + 2u, scratch[so + qb], n, t) & vec4<bool>(q + 2u < q1);
        let o3 = live(q + 3u, scratch[so + qc], n, t) & vec4<bool>(q + 3u < q1);
        let w0 = bitcast<vec4<f32>>(scratch[so + n4 + q]);
        let w1 = bitcast<vec4<f32>>(scratch[so + n4 + qa]);
        let w2 = bitcast<vec4<f32>>(scratch[so + n4 + qb]);
        let w3 = bitcast<vec4<f32>>(scratch[so + n4 + qc]);
        s = add(add(add(add(s, w0, o0), w1, o1), w2, o2), w3, o3);
        if (any(o0 & (w0 > vec4<f32>(0.0))) || any(o1 & (w1 > vec4<f32>(0.0))) ||
            any(o2 & (w2 > vec4<f32>(0.0))) || any(o3 & (w3 > vec4<f32>(0.0)))) {
            last = 1u;                           // this chunk has a token with w > 0
        }
    }
    let incl = scan_f(lid, s);
    let total = workgroupUniformLoad(&redf[255]);
    let goal = u * total;
    let excl = select(0.0, redf[max(lid, 1u) - 1u], lid > 0u);
    var chunk = min_all(lid, select(NONE, lid, incl > goal && excl <= goal));
    if (chunk == NONE) {                         // rounding put u * total at the total
        chunk = max(max_all(lid, select(0u, lid + 1u, last > 0u)), 1u) - 1u;
    }
    let a = workgroupUniformLoad(&redf[max(chunk, 1u) - 1u]);
    let start = select(a, 0.0, chunk == 0u);
    // inside the chunk: the token at position r sums the chunk's weights up to it, in order
    let b0 = min(chunk * c4, n4);
    let b1 = min(b0 + c4, n4);
    var best = NONE;
    var lastc = 0u;
    for (var r = lid; r < 4u * (b1 - b0); r += WG) {
        let j = 4u * b0 + r;
        let kj = lane(scratch[so + j / 4u], j % 4u);
        let wj = bitcast<f32>(lane(scratch[so + n4 + j / 4u], j % 4u));
        if (j < n && kj >= t && wj > 0.0) {
            var acc = 0.0;
            for (var q = b0; q <= j / 4u; q++) {
                let ok = live(q, scratch[so + q], n, t) &
                         (vec4<u32>(4u * q) + vec4<u32>(0u, 1u, 2u, 3u) <= vec4<u32>(j));
                acc = add(acc, bitcast<vec4<f32>>(scratch[so + n4 + q]), ok);
            }
            if (start + acc > goal) { best = min(best, j); }
            lastc = max(lastc, j + 1u);
        }
    }
    let token = min_all(lid, best);
    if (token != NONE) { return token; }
    return max(max_all(lid, lastc), 1u) - 1u;
}

fn draw(lid: u32, n: u32, temp: f32, lmax: f32, mine: u32) -> u32 {
    let n4 = (n + 3u) / 4u;
    let itemp = 1.0 / temp;
    let kmax = key(lmax);
    if (lid == 0u) { one_u = u32(max(iparams[po + 0], 0)); }
    let k = workgroupUniformLoad(&one_u);
    workgroupBarrier();
    if (lid == 0u) { one_f = max(fparams[po + 1], 0.0); }
    let top_p = workgroupUniformLoad(&one_f);
    workgroupBarrier();
    var m = 0u;           // the list's length (0: the survivors are on the row)
    var thr = 0u;         // the survivors: tokens with key >= thr
    var kept = n;         // how many (on the row)
    // top-k: probes from the lower bound, bisecting on count(keys >= t) >= k, until the
    // tokens >= the probe fit the list
    if (k > 0u && k < n) {
        var lo = 0u;
        if (k <= WG) { lo = kth_of_threads(lid, mine, k); }
        var hi = kmax;
        var nlo = NONE;
        var nhi = 0u;
        var t = lo;
        loop {
            let cnt = probe_keys(lid, n, t, lmax, itemp);
            if (cnt >= k) {
                lo = t;
                nlo = cnt;
                if (cnt <= CAP) {
                    m = cnt;
                    break;
                }
            } else {
                hi = t - 1u;
                nhi = cnt;
            }
            if (lo >= hi || nlo == k || nlo - nhi <= 1u) { break; }
            t = lo + (hi - lo) / 2u + ((hi - lo) & 1u);
        }
        if (m > 0u) {
            sort_list(lid, m, true);
            thr = workgroupUniformLoad(&lk[k - 1u]);
        } else {
            thr = min_key_row(lid, n, lo);
            kept = nlo;
        }
    } else if (n <= CAP) {
        m = probe_keys(lid, n, 0u, lmax, itemp);
        sort_list(lid, m, true);
    }
    // the row's weights and total (when the survivors did not fit the list)
    var total = 0.0;
    if (m == 0u) {
        var s = 0.0;
        for (var q = lid; q < n4; q += 4u * WG) {
            let q1 = q + WG;
            let q2 = q + 2u * WG;
            let q3 = q + 3u * WG;
            let k0 = scratch[so + q];
            let k1 = scratch[so + min(q1, n4 - 1u)];
            let k2 = scratch[so + min(q2, n4 - 1u)];
            let k3 = scratch[so + min(q3, n4 - 1u)];
            let o0 = live(q, k0, n, thr);
            let o1 = live(q1, k1, n, thr);
            let o2 = live(q2, k2, n, thr);
            let o3 = live(q3, k3, n, thr);
            let w0 = weights4(k0, o0, lmax, itemp);
            let w1 = weights4(k1, o1, lmax, itemp);
            let w2 = weights4(k2, o2, lmax, itemp);
            let w3 = weights4(k3, o3, lmax, itemp);
            scratch[so + n4 + q] = bitcast<vec4<u32>>(w0);
            if (q1 < n4) { scratch[so + n4 + q1] = bitcast<vec4<u32>>(w1); }
            if (q2 < n4) { scratch[so + n4 + q2] = bitcast<vec4<u32>>(w2); }
            if (q3 < n4) { scratch[so + n4 + q3] = bitcast<vec4<u32>>(w3); }
            s = add(add(add(add(s, w0, o0), w1, o1), w2, o2), w3, o3);
        }
        total = sum2(lid, s, 0u).x;
    }
    // top-p
    if (top_p < 1.0) {
        if (m == 0u) {
            // on the row: probes from the lower bound, bisecting on mass(keys >= t) >=
            // top_p * total, until the tokens >= the probe fit the list
            let goal = top_p * total;
            var lo = thr;
            var hi = kmax;
            var nlo = kept;
            var nhi = 0u;
            let wc = (1.0 - top_p) * total / f32(2u * n);
            var t = lo;
            if (top_p > 0.0 && wc > 0.0) { t = clamp(key(lmax + temp * log(wc)), lo, hi); }
            loop {
                let mc = probe_mass(lid, n, t);
                let cnt = bitcast<u32>(mc.y);
                if (mc.x >= goal || t == thr) {
                    lo = t;
                    nlo = cnt;
                    if (cnt <= CAP) {
                        m = cnt;
                        break;
                    }
                } else {
                    hi = t - 1u;
                    nhi = cnt;
                }
                if (lo >= hi || nlo - nhi <= 1u) { break; }
                t = lo + (hi - lo) / 2u + ((hi - lo) & 1u);
            }
            if (m > 0u) {
                // the list holds the tokens >= lo; the goal stays top_p * (the row's total)
                sort_list(lid, m, true);
                let f = scan_list(lid, m, thr, 0.0, goal, false);
                thr = max(thr, workgroupUniformLoad(&lk[f]));
            } else {
                thr = max(thr, min_key_row(lid, n, lo));
            }
        } else {
            let f = scan_list(lid, m, thr, top_p, -1.0, false);
            thr = max(thr, workgroupUniformLoad(&lk[f]));
        }
    }
    let h = pcg(bitcast<u32>(iparams[po + 1]) + pcg(bitcast<u32>(iparams[po + 2])));
    let u = f32(h >> 8u) * (1.0 / 16777216.0);
    if (m > 0u) {
        // the survivors lead the list (sorted by key): sort just them by index, then scan
        let mk = min(min_all(lid, select(NONE, 2u * lid, 2u * lid < m && lk[2u * lid] < thr)),
                     min_all(lid, select(NONE, 2u * lid + 1u,
                                         2u * lid + 1u < m && lk[2u * lid + 1u] < thr)));
        let ms = min(mk, m);
        sort_list(lid, ms, false);
        let f = scan_list(lid, ms, thr, u, -1.0, true);
        return workgroupUniformLoad(&li[f]);
    }
    return draw_row(lid, n, thr, u);
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32,
        @builtin(workgroup_id) wid: vec3<u32>) {
    let n = p.n;
    let n4 = (n + 3u) / 4u;
    row = wid.x;
    lo = row * n;
    po = row * 4u;
    so = row * 2u * n4;
    let rp = fparams[po + 2];
    if (lid == 0u) { one_f = fparams[po + 0]; }
    let temp = workgroupUniformLoad(&one_f);
    workgroupBarrier();
    let keep = temp > 0.0;            // the draw needs the keys; greedy only the max
    if (PRE && !keep) {
        if (lid == 0u) {
            var bk = 0u;
            var bi = NONE;
            var nan = false;
            for (var c = 0u; c < p.chunks; c++) {
                let v = partials[row * p.chunks + c];
                if (v.y == NAN_CHUNK) {
                    nan = true;
                } else if (v.y != NONE && (bi == NONE || v.x > bk || (v.x == bk && v.y < bi))) {
                    bk = v.x;
                    bi = v.y;
                }
            }
            one_u = select(bi, NAN_CHUNK, nan);
        }
        let pick = workgroupUniformLoad(&one_u);
        if (pick != NAN_CHUNK) {
            if (lid == 0u) {
                out[row] = i32(pick);
                if (p.mark != 0u) { seen[pick] = 1; }
            }
            return;
        }
    }
    // the keys of the penalized logits; per lane the max and its first index
    var mv = vec4<f32>(0.0);
    var mi = vec4<u32>(NONE);
    let nfull = n / 4u;
    for (var q = lid; q < n4; q += 4u * WG) {
        let q1 = q + WG;
        let q2 = q + 2u * WG;
        let q3 = q + 3u * WG;
        var l0: vec4<f32>;
        var l1: vec4<f32>;
        var l2: vec4<f32>;
        var l3: vec4<f32>;
        if (q3 < nfull) {
            l0 = slot_full(q, rp);
            l1 = slot_full(q1, rp);
            l2 = slot_full(q2, rp);
            l3 = slot_full(q3, rp);
        } else {
            l0 = slot_edge(q, n, rp);
            l1 = slot_edge(min(q1, n4 - 1u), n, rp);
            l2 = slot_edge(min(q2, n4 - 1u), n, rp);
            l3 = slot_edge(min(q3, n4 - 1u), n, rp);
        }
        if (keep) {
            scratch[so + q] = keys4(l0);
            if (q1 < n4) { scratch[so + q1] = keys4(l1); }
            if (q2 < n4) { scratch[so + q2] = keys4(l2); }
            if (q3 < n4) { scratch[so + q3] = keys4(l3); }
        }
        track(l0, q, n, &mv, &mi);
        track(l1, q1, n, &mv, &mi);
        track(l2, q2, n, &mv, &mi);
        track(l3, q3, n, &mv, &mi);
    }
    // this thread's max and its first index (lanes hold different indices)
    var bv = 0.0;
    var bi = NONE;
    for (var i = 0u; i < 4u; i++) {
        let v = select(select(mv.x, mv.y, i == 1u), select(mv.z, mv.w, i == 3u), i >= 2u);
        let j = lane(mi, i);
        if (j != NONE && (bi == NONE || v > bv || (v == bv && j < bi))) {
            bv = v;
            bi = j;
        }
    }
    let mine = select(key(bv), 0u, bi == NONE);
    redf[lid] = bv;
    redu[lid] = bi;
    workgroupBarrier();
    if (lid < 16u) {
        var v = 0.0;
        var b = NONE;
        for (var i = lid * 16u; i < lid * 16u + 16u; i++) {
            let j = redu[i];
            if (j != NONE && (b == NONE || redf[i] > v || (redf[i] == v && j < b))) {
                v = redf[i];
                b = j;
            }
        }
        grpf[lid] = v;
        grpu[lid] = b;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var v = 0.0;
        var b = NONE;
        for (var g = 0u; g < 16u; g++) {
            let j = grpu[g];
            if (j != NONE && (b == NONE || grpf[g] > v || (grpf[g] == v && j < b))) {
                v = grpf[g];
                b = j;
            }
        }
        one_f = v;
        one_u = b;
    }
    let lmax = workgroupUniformLoad(&one_f);
    var token = workgroupUniformLoad(&one_u);
    workgroupBarrier();
    if (keep) {
        let drawn = draw(lid, n, temp, lmax, mine);
        if (drawn < n) { token = drawn; }         // else NaN logits
    }
    if (lid == 0u) {
        out[row] = i32(token);
        if (p.mark != 0u) { seen[token] = 1; }
    }
}
