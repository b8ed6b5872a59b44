// sample: draw one token from a row of n logits and mark it seen (op `sample`; its numpy twin
// webrlx/sampling.py states the semantics and does the same math, token for token):
//   l = logits, seen tokens penalized (l / rp if l > 0 else l * rp);
//   temperature <= 0: the first index of max(l);
//   else keep l >= t_k (the top_k-th largest l; all when top_k <= 0 or >= n), then l >= t_p,
//   the largest t <= max(l) whose mass(l >= t) >= top_p * mass(kept) (all when top_p >= 1),
//   with w = exp((l - max l) / temperature); u = (pcg(seed + pcg(step)) >> 8) / 2^24; the
//   token is the first kept index whose running sum of w (index order) exceeds u * total.
// Values compare as u32 keys of their f32 bits (order kept, -0 folded into +0), so both
// thresholds are exact values of l and ties at a threshold are all kept.
//
// Design: ONE workgroup of 256 threads (grid (1, 1, 1)) does the whole row in one dispatch,
// so the token never leaves the GPU. Pass 1 writes the keys of l to a scratch buffer (with
// max l and its first index); t_k is a bitwise binary search on the key (up to 32 steps, each
// a strided pass over the keys counting those >= candidate, then a workgroup sum), ending
// early once exactly top_k keys are >= candidate; the weights w of the survivors go to the
// scratch buffer too; t_p is the same search on the mass, over the key range
// [t_k, key(max l)] (the leading bits those share are skipped). The draw: every thread sums
// the kept w of its contiguous chunk of n/256 indices, thread 0 scans the 256 chunk sums in
// order and rescans the chunk that holds u * total.
// What limits it: one workgroup runs on one SM (one CPU core on lavapipe) and reads the row
// (8 bytes a token) up to ~2 x 32 + 5 times, each read followed by a workgroup reduction:
// for one row of V ~ 49k per decoded token that is tens of microseconds on a big GPU (the
// row stays in L2), but it does not scale to many rows (one dispatch per row).
//
// bindings: 0 logits (T, n), 1 seen (i32, n; seen[token] = 1 IN PLACE when p.mark = 1),
// 2 fparams (f32: temperature, top_p, rp, _), 3 iparams (i32: top_k, seed, step, _),
// 4 scratch (u32, 2n), 5 out (i32, 1), 6 params. grid: (1, 1, 1).
struct Params { n: u32, mark: u32 }
@group(0) @binding(0) var<storage, read_write> logits: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> seen: array<i32>;
@group(0) @binding(2) var<storage, read_write> fparams: array<f32>;
@group(0) @binding(3) var<storage, read_write> iparams: array<i32>;
@group(0) @binding(4) var<storage, read_write> scratch: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<i32>;
@group(0) @binding(6) var<uniform> p: Params;

const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;
var<workgroup> redf: array<f32, 256>;
var<workgroup> redu: array<u32, 256>;
var<workgroup> redk: array<u32, 256>;
var<workgroup> one_f: f32;
var<workgroup> one_u: u32;
var<workgroup> one_k: u32;

fn penalized(i: u32, rp: f32) -> f32 {
    let v = f32(logits[i]);
    if (seen[i] > 0) { return select(v * rp, v / rp, v > 0.0); }
    return v;
}

// f32 -> u32 in the same order (-0 folded into +0; NaN above +inf), and back
fn key(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    if (b == 0x80000000u) { return b; }
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn unkey(k: u32) -> f32 {
    return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u));
}

fn pcg(v: u32) -> u32 {
    let s = v * 747796405u + 2891336453u;
    let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

// Workgroup reductions in a fixed order (16 threads sum 16 values each, then thread 0 sums
// those 16): few barriers, and a sum of more non-negative terms is never smaller. The
// results come back uniform (loops and branches around barriers depend on them): every
// thread must call these. sum_count: (sum of s, sum of c) in one_f, one_u.
fn sum_count(lid: u32, s: f32, c: u32) {
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
        redf[lid * 16u] = a;
        redu[lid * 16u] = b;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var a = 0.0;
        var b = 0u;
        for (var i = 0u; i < WG; i += 16u) {
            a += redf[i];
            b += redu[i];
        }
        one_f = a;
        one_u = b;
    }
}

fn min_u(lid: u32, v: u32) -> u32 {
    redu[lid] = v;
    workgroupBarrier();
    if (lid < 16u) {
        var m = NONE;
        for (var i = lid * 16u; i < lid * 16u + 16u; i++) { m = min(m, redu[i]); }
        redu[lid * 16u] = m;
    }
    workgroupBarrier();
    if (lid == 0u) {
        var m = NONE;
        for (var i = 0u; i < WG; i += 16u) { m = min(m, redu[i]); }
        one_u = m;
    }
    return workgroupUniformLoad(&one_u);
}

fn bcast_f(lid: u32, v: f32) -> f32 {
    if (lid == 0u) { one_f = v; }
    let r = workgroupUniformLoad(&one_f);
    workgroupBarrier();
    return r;
}

// scratch: [0, n) the keys of l, [n, 2n) the weights w (f32 bits; 0 once cut by top-k)
// the weight of token j when its key is >= t, else 0
fn weight(j: u32, n: u32, t: u32) -> f32 {
    return select(0.0, bitcast<f32>(scratch[n + j]), scratch[j] >= t);
}

// (mass, count) of the tokens with key >= t and w > 0 (the kept ones): one_f, one_u
fn mass_count(lid: u32, n: u32, t: u32) {
    var s = 0.0;
    var c = 0u;
    for (var j = lid; j < n; j += WG) {
        let w = weight(j, n, t);
        s += w;
        c += select(0u, 1u, w > 0.0);
    }
    sum_count(lid, s, c);
}

// the first index of chunk [a, b) where the running sum from acc0 exceeds goal, else the
// last index of a kept token with w > 0 there (rounding), else NONE
fn pick(a: u32, b: u32, acc0: f32, goal: f32, n: u32, t: u32) -> u32 {
    var acc = acc0;
    var last = NONE;
    for (var j = a; j < b; j++) {
        let w = weight(j, n, t);
        if (w > 0.0) {
            acc += w;
            last = j;
            if (acc > goal) { return j; }
        }
    }
    return last;
}

// Both thresholds are the largest key t in [lo, hi] with pred(t), pred monotone, pred(lo)
// true and pred(hi + 1) false: bisection on the key, tracking the number of tokens >= lo
// (nlo) and > hi (nhi); once one token is left in [lo, hi] it is the answer, so the search
// stops early and the answer is the smallest key >= lo (one more pass).
fn draw(lid: u32, n: u32, temp: f32, lmax: f32, kmin: u32) -> u32 {
    let kmax = key(lmax);
    // top-k: pred(t) = count(keys >= t) >= top_k; also done once exactly top_k are >= lo
    let top_k = u32(max(iparams[0], 0));
    if (lid == 0u) { one_u = top_k; }
    let k = workgroupUniformLoad(&one_u);
    var thr = 0u;
    if (k > 0u && k < n) {
        var lo = kmin;
        var hi = kmax;
        var nlo = n;
        var nhi = 0u;
        loop {
            if (lo >= hi || nlo == k || nlo - nhi == 1u) { break; }
            let mid = lo + (hi - lo) / 2u + ((hi - lo) & 1u);
            var c = 0u;
            for (var j = lid; j < n; j += WG) { c += select(0u, 1u, scratch[j] >= mid); }
            sum_count(lid, 0.0, c);
            let cnt = workgroupUniformLoad(&one_u);
            if (cnt >= k) { lo = mid; nlo = cnt; } else { hi = mid - 1u; nhi = cnt; }
        }
        var m = NONE;
        for (var j = lid; j < n; j += WG) {
            let kj = scratch[j];
            if (kj >= lo) { m = min(m, kj); }
        }
        thr = min_u(lid, m);
    }
    // the weights of the tokens top-k keeps (others: 0), their mass and count
    var s = 0.0;
    var c = 0u;
    for (var j = lid; j < n; j += WG) {
        let kj = scratch[j];
        let w = select(0.0, exp((unkey(kj) - lmax) / temp), kj >= thr);
        scratch[n + j] = bitcast<u32>(w);
        s += w;
        c += select(0u, 1u, w > 0.0);
    }
    sum_count(lid, s, c);
    let total = workgroupUniformLoad(&one_f);
    let kept = workgroupUniformLoad(&one_u);
    // top-p: pred(t) = t <= kmax and mass(t) >= top_p * total
    let top_p = bcast_f(lid, fparams[1]);
    if (top_p < 1.0) {
        let goal = top_p * total;
        var lo = thr;
        var hi = kmax;
        var nlo = kept;
        var nhi = 0u;
        loop {
            if (lo >= hi || nlo - nhi <= 1u) { break; }
            let mid = lo + (hi - lo) / 2u + ((hi - lo) & 1u);
            mass_count(lid, n, mid);
            let ms = workgroupUniformLoad(&one_f);
            let cnt = workgroupUniformLoad(&one_u);
            if (ms >= goal) { lo = mid; nlo = cnt; } else { hi = mid - 1u; nhi = cnt; }
        }
        var m = NONE;
        for (var j = lid; j < n; j += WG) {
            if (weight(j, n, lo) > 0.0) { m = min(m, scratch[j]); }
        }
        thr = max(thr, min_u(lid, m));
    }
    // the draw: chunk sums, scanned in order by thread 0, which rescans the chunk holding
    // u * total (a sequential scan never decreases: "the first chunk past it" is sound)
    storageBarrier();                            // chunks read weights other threads wrote
    let size = (n + WG - 1u) / WG;
    let a = min(lid * size, n);
    let b = min(a + size, n);
    var cs = 0.0;
    for (var j = a; j < b; j++) { cs += weight(j, n, thr); }
    redf[lid] = cs;
    workgroupBarrier();
    var token = NONE;
    if (lid == 0u) {
        var acc = 0.0;
        for (var t = 0u; t < WG; t++) {
            acc += redf[t];
            redf[t] = acc;
        }
        let h = pcg(bitcast<u32>(iparams[1]) + pcg(bitcast<u32>(iparams[2])));
        let goal = f32(h >> 8u) * (1.0 / 16777216.0) * acc;
        var prev = 0.0;
        for (var t = 0u; t < WG && token == NONE; t++) {
            if (redf[t] > goal) {
                token = pick(min(t * size, n), min(t * size + size, n), prev, goal, n, thr);
            }
            prev = redf[t];
        }
        // rounding left u * total at or past the total: the last kept token with w > 0
        for (var t = WG; t > 0u && token == NONE; t--) {
            token = pick(min((t - 1u) * size, n), min(t * size, n), 0.0, 3.4e38, n, thr);
        }
    }
    return token;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    let n = p.n;
    let rp = fparams[2];
    // the keys of the penalized logits; max(l), its first index, and the smallest key
    var bv = 0.0;
    var bi = NONE;
    var bk = NONE;
    for (var j = lid; j < n; j += WG) {
        let v = penalized(j, rp);
        let kj = key(v);
        scratch[j] = kj;
        bk = min(bk, kj);
        if (bi == NONE || v > bv) { bv = v; bi = j; }
    }
    redf[lid] = bv;
    redu[lid] = bi;
    redk[lid] = bk;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let v = redf[lid + s];
            let i = redu[lid + s];
            if (i != NONE && (redu[lid] == NONE || v > redf[lid] ||
                              (v == redf[lid] && i < redu[lid]))) {
                redf[lid] = v;
                redu[lid] = i;
            }
            redk[lid] = min(redk[lid], redk[lid + s]);
        }
        workgroupBarrier();
    }
    let lmax = workgroupUniformLoad(&redf[0]);
    var token = workgroupUniformLoad(&redu[0]);
    let kmin = workgroupUniformLoad(&redk[0]);
    let temp = bcast_f(lid, fparams[0]);
    if (temp > 0.0) {
        let drawn = draw(lid, n, temp, lmax, kmin);
        if (drawn != NONE) { token = drawn; }    // NONE only for NaN logits
    }
    if (lid == 0u) {
        out[0] = i32(token);
        if (p.mark != 0u) { seen[token] = 1; }
    }
}
