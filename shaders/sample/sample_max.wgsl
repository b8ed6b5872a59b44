// sample_max: the greedy pre-pass of op `sample` (sample/sample.wgsl, PRE): for each chunk of
// CH = 4 * 4 * WG logits of each row, the penalized max (as the sampler's order-keeping u32
// key) and the first index holding it; a chunk with a NaN says so (NAN_CHUNK), and the sampler
// then reads its row itself (NaN makes the first-max order-dependent).
// Why: one workgroup a row (the sampler) reads its row with 4 vec4 loads in flight a thread:
// at V = 128256 on an H100 the greedy token took ~80 us (~35 us at 49152), ~4% of a 1B
// model's decode step; CH-token chunks over many workgroups read the row in one round of
// loads, and the sampler then merges ceil(V / CH) pairs.
// bindings: 0 logits (T, r * n), 1 seen (i32, n), 2 fparams (f32, r * 4: rp at 2),
// 3 partials (vec2<u32>, r * chunks: key, index), 4 params. grid: (chunks, r, 1).
struct Params { n: u32, chunks: u32 }
@group(0) @binding(0) var<storage, read_write> logits: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> seen: array<i32>;
@group(0) @binding(2) var<storage, read_write> fparams: array<f32>;
@group(0) @binding(3) var<storage, read_write> partials: array<vec2<u32>>;
@group(0) @binding(4) var<uniform> p: Params;

const WG: u32 = 256u;
const PER: u32 = 16u;             // tokens a thread: CH = PER * WG a workgroup
const NONE: u32 = 0xffffffffu;
const NAN_CHUNK: u32 = 0xfffffffeu;
var<workgroup> redk: array<u32, 256>;
var<workgroup> redi: array<u32, 256>;

// f32 -> u32 in the same order (-0 folded into +0), as sample.wgsl's key()
fn key(v: f32) -> u32 {
    let b = bitcast<u32>(v);
    if (b == 0x80000000u) { return b; }
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

// (a, b): the larger key, the smaller index on a tie; NONE indices lose
fn better(ak: u32, ai: u32, bk: u32, bi: u32) -> bool {
    return bi != NONE && (ai == NONE || bk > ak || (bk == ak && bi < ai));
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let row = wid.y;
    let n = p.n;
    let rp = fparams[row * 4u + 2u];
    let first = wid.x * PER * WG;
    var bk = 0u;
    var bi = NONE;
    var nan = false;
    for (var e = 0u; e < PER; e++) {          // token first + e WG + lid: neighbours coalesce
        let j = first + e * WG + lid;
        if (j < n) {
            var l = f32(logits[row * n + j]);
            if (seen[j] > 0) { l = select(l * rp, l / rp, l > 0.0); }
            let b = bitcast<u32>(l);
            nan = nan || ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0u);
            let k = key(l);
            if (better(bk, bi, k, j)) {
                bk = k;
                bi = j;
            }
        }
    }
    redk[lid] = select(bk, NAN_CHUNK, nan);
    redi[lid] = select(bi, NAN_CHUNK, nan);
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h >>= 1u) {
        if (lid < h) {
            let ok = redk[lid];
            let oi = redi[lid];
            let tk = redk[lid + h];
            let ti = redi[lid + h];
            if (oi == NAN_CHUNK || ti == NAN_CHUNK) {
                redi[lid] = NAN_CHUNK;
            } else if (better(ok, oi, tk, ti)) {
                redk[lid] = tk;
                redi[lid] = ti;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        partials[row * p.chunks + wid.x] = vec2<u32>(redk[0], redi[0]);
    }
}
