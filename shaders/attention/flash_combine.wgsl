// attention_flash's key chunks merged (its SPLITS form): out[b,h,i,:] = sum_s exp(m_s - M)
// o_s / sum_s exp(m_s - M) l_s, M = max_s m_s, from part [SPLITS][B H Lq][D4 + 1] vec4 (the
// last vec4 of a row: (m, l, 0, 0); a chunk without keys for a row has m = -max float, l = 0;
// a row with none anywhere is written 0, as the other attention kernels do). out is written
// through (batch, head, row) strides (vec4: multiples of 4). One thread per output vec4.
// Limits: the partials' traffic (SPLITS x the output), small beside the attention.
// bindings: 0 part, 1 out, 2 params. grid: B H Lq D4 threads, continued in y.
struct Params { rows: u32, Lq: u32, H: u32, D4: u32, splits: u32, o_b: u32, o_h: u32, o_i: u32 }
@group(0) @binding(0) var<storage, read_write> part: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<vec4<{{T}}>>;
@group(0) @binding(2) var<uniform> p: Params;

override WG: u32 = 256;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let idx = (wid.y * nwg.x + wid.x) * WG + lid;
    if (idx >= p.rows * p.D4) { return; }
    let r = idx / p.D4;
    let col = idx % p.D4;
    let i = r % p.Lq;
    let h = (r / p.Lq) % p.H;
    let b = r / (p.Lq * p.H);
    let w4 = p.D4 + 1u;
    var mm = -3.4028234663852886e38;
    for (var s = 0u; s < p.splits; s++) { mm = max(mm, part[(s * p.rows + r) * w4 + p.D4].x); }
    var a = vec4<f32>(0.0);
    var lt = 0.0;
    for (var s = 0u; s < p.splits; s++) {
        let at = (s * p.rows + r) * w4;
        let ml = part[at + p.D4];
        let w = exp(ml.x - mm);
        a += w * part[at + col];
        lt += w * ml.y;
    }
    out[(b * p.o_b + h * p.o_h + i * p.o_i) / 4u + col] = vec4<{{T}}>(
        select(a / lt, vec4<f32>(0.0), lt == 0.0));
}
