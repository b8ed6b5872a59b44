// matmul for CPU adapters (SwiftShader, lavapipe), register-only: C[b] = act(A[b] @ B[b] + bias),
// A [M,K], B [K,N] row-major, K % 4 == 0, N % 4 == 0 (vec4 arrays; common/matmul_vec4_io.wgsl,
// the same signature as matmul/matmul_tiled so the two are variants of one call).
// grid: (ceil(N / (4 CQ WG)), ceil(M / RR), batches); thread t of a workgroup owns CQ column
// quads (wid.x * WG + t) * CQ .. of rows wid.y * RR .. + RR - 1, and runs the whole K: per 4
// k, 4 CQ vec4 loads of B and RR vec4 loads of A, for 16 RR CQ FMAs. No workgroup memory and
// no barriers: on a CPU adapter workgroup memory is ordinary memory reached through extra
// loads and stores, each barrier suspends every invocation of the group, and Chromium's
// SwiftShader compiles a pipeline ~75 ms per KB of workgroup memory (the tiled kernel's
// 8 KB: ~0.7-1.3 s of a first run).
// Limits: loads. The lanes of an invocation group differ in the column quads only, so the A
// loads are the same address in every lane (SwiftShader still issues them per lane) and
// the B loads are neighbouring vec4s. RR and CQ ({{RR}}, {{CQ}}: slots, so the named
// accumulators stay in registers) share each B load among RR rows and each A load among
// CQ quads. Loads inside the K loop are unguarded (rows past M read row M - 1, never
// stored; k < KL <= K), so the loop has no branches.
// Measured (bench/probes/cpu_matmul_probe.py): see lower_matmul.CPU_REGS.
{{MATH}}
{{VEC4_IO}}

override WG: u32 = 64u;
const RR: u32 = {{RR}}u;
const CQ: u32 = {{CQ}}u;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let c4 = (wid.x * WG + lid) * CQ;
    let row0 = wid.y * RR;
    let K4 = p.K / 4u;
    let N4 = p.N / 4u;
    let a_base = a_base_of(wid.z);
    let b_base = b_base_of(wid.z) + min(c4, N4 - CQ);
{{ACCS}}
{{ROWS}}
    if (c4 < N4) {
        for (var k = 0u; k < p.KL; k += 4u) {
            let kb = b_base + k * N4;
{{FMAS}}
        }
    }
{{STORES}}
}
