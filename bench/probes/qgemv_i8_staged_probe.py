"""Probe: can int8 x rows make the 8-row (batched decode) Q4_K GEMVs fast enough for issue 31's
"8 sequences >= 5x one" on the Llama-3.2-1B shape? qgemv_xtype_probe.py's skeleton read int8 x
from global memory a weight row a subgroup (gate+up 52 us against production's f32 71-77, the
head 670 against 520-557: the head's 16,032 workgroups re-read all 8 x rows). Here x is staged
once a workgroup in workgroup memory as int8 (8 rows x 2048 values: 16 KB + 8 KB of scales),
and each workgroup serves 256 / TPR x J weight rows from it, so x is read from L2 once per
32-64 weight rows instead of once per 8.

Forms (all Q4_K weights, 8 x rows, one int8 scale per 32 x values, llama.cpp's q8_1):
  S: x pre-quantized (by numpy here; a separate kernel in a product), staged by a copy;
  Q: x read as f32 and quantized in the workgroup's prologue (where a fused RMSNorm would
     also go), so no extra dispatch;
  D: no staging, int8 x read from global memory (the skeleton's form, TPR lanes a row).
TPR: threads a weight row (8 or 32), J: weight rows a thread. Staged x is laid out so that a
row's TPR = 8 lanes read 8 neighbouring vec4 (lo halves, then hi halves): no bank conflicts.
Each form is checked against numpy on its own int8 x (1e-4 of max|y|) before it is timed;
times are us per dispatch of 200 back to back (dispatch_timer.py). The error of int8 x
against f32 x is printed too (vs_f32_x).
    python bench/probes/qgemv_i8_staged_probe.py [--check]   (--check: numpy check only, on
    512 weight rows and the TPR = 8 forms: a CPU adapter's subgroups have under 32 lanes)"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dispatch_timer import seconds_per_dispatch  # noqa: E402

import webrlx as wr  # noqa: E402
from webrlx import quant  # noqa: E402

MR = 8                       # x rows
WG = 256
KC = 2048                    # K values staged at a time
SHAPES = {"gate+up 16384x2048": (16384, 2048), "down 2048x8192": (2048, 8192),
          "head 128256x2048": (128256, 2048)}
FORMS = [("S", 8, 1), ("S", 8, 2), ("Q", 8, 1), ("Q", 8, 2), ("D", 32, 1), ("D", 8, 1),
         ("S", 32, 1)]

SRC = """
@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;     // Q4_K blocks, 9 vec4 each
@group(0) @binding(1) var<storage, read> xf: array<vec4<f32>>;    // Q: x (MR, K) f32
@group(0) @binding(2) var<storage, read> xq: array<vec4<u32>>;    // S, D: int8 x (MR, K / 16)
@group(0) @binding(3) var<storage, read> xs: array<vec2<f32>>;    // S, D: (d, d sum16) (MR, K/16)
@group(0) @binding(4) var<storage, read_write> y: array<f32>;     // (MR, N)
struct P { N: u32, K: u32 }
@group(0) @binding(5) var<uniform> p: P;
const MR: u32 = 8u;
const KC: u32 = {kc}u;
const TPR: u32 = {tpr}u;
const J: u32 = {j}u;
const FORM: u32 = {form}u;                       // 0 S, 1 Q, 2 D
const RPW: u32 = 256u / TPR;                     // weight rows a workgroup at a time
const CU: u32 = KC / 16u;                        // 16-value units a row of a chunk
var<workgroup> x8: array<vec4<u32>, {stage}>;
var<workgroup> x8s: array<vec2<f32>, {stage}>;

// a unit's slot: within each 256 values (16 units, unit v = 2 s + h of sub-block s), the lo
// sub-blocks' halves first: slot = 8 (s % 2) + 2 (s / 2) + h
fn slot(v: u32) -> u32 {
    let u = v % 16u;
    let s = u / 2u;
    return (v - u) + 8u * (s % 2u) + 2u * (s / 2u) + (u % 2u);
}

fn pack8(a: vec4<f32>) -> u32 {
    let q = vec4<i32>(round(a));
    return (u32(q.x) & 255u) | ((u32(q.y) & 255u) << 8u) | ((u32(q.z) & 255u) << 16u) |
           (u32(q.w) << 24u);
}

fn stage(kc: u32, lid: u32) {
    for (var i = lid; i < MR * CU; i += 256u) {
        let r = i / CU;
        let v = i % CU;
        let at = r * CU + slot(v);
        let g = r * (p.K / 16u) + kc / 16u + v;    // the unit in the whole row
        if (FORM == 0u) {
            x8[at] = xq[g];
            x8s[at] = xs[g];
        } else {
            let a0 = xf[4u * g]; let a1 = xf[4u * g + 1u];
            let a2 = xf[4u * g + 2u]; let a3 = xf[4u * g + 3u];
            let m4 = max(max(abs(a0), abs(a1)), max(abs(a2), abs(a3)));
            let m16 = max(max(m4.x, m4.y), max(m4.z, m4.w));
            let m32 = max(m16, subgroupShuffleXor(m16, 1u));   // unit v ^ 1 is lane ^ 1
            let inv = select(0.0, 127.0 / m32, m32 > 0.0);
            let q = vec4<u32>(pack8(a0 * inv), pack8(a1 * inv), pack8(a2 * inv),
                              pack8(a3 * inv));
            let one = vec4<f32>(1.0);
            let sq = dot(round(a0 * inv) + round(a1 * inv) + round(a2 * inv) + round(a3 * inv),
                         one);
            let d = m32 / 127.0;
            x8[at] = q;
            x8s[at] = vec2<f32>(d, d * sq);
        }
    }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let j = lid % TPR;
    let gi = lid / TPR;
    let nb = p.K / 256u;
    var acc: array<f32, {nacc}>;
    for (var i = 0u; i < MR * J; i++) { acc[i] = 0.0; }
    let staged = FORM != 2u;
    let kstep = select(p.K, KC, staged);
    for (var kc = 0u; kc < p.K; kc += kstep) {
        if (staged) {
            workgroupBarrier();
            stage(kc, lid);
            workgroupBarrier();
        }
        for (var jj = 0u; jj < J; jj++) {
            let n = (wid.x * J + jj) * RPW + gi;
            if (n >= p.N) { continue; }
            for (var hc = j; hc < (kstep / 256u) * 8u; hc += TPR) {
                let bl = hc / 8u;                      // block within the chunk
                let c = (hc % 8u) / 2u;
                let h = hc % 2u;
                let base = (n * nb + kc / 256u + bl) * 9u;
                let head = w[base];
                let q = w[base + 1u + c * 2u + h];
                let e = (c & 1u) * 16u;
                let lo = head.y >> e;
                let mo = head.z >> e;
                let hi = head.w >> e;
                let upper = c >= 2u;
                let sc = select(lo & 0x3F3Fu, (hi & 0x0F0Fu) | ((lo >> 2u) & 0x3030u), upper);
                let mn = select(mo & 0x3F3Fu, ((hi >> 4u) & 0x0F0Fu) | ((mo >> 2u) & 0x3030u),
                                upper);
                let dm = unpack2x16float(head.x);
                let da = dm.x * f32(sc & 255u);
                let db = dm.x * f32((sc >> 8u) & 255u);
                let ma = dm.y * f32(mn & 255u);
                let mb = dm.y * f32((mn >> 8u) & 255u);
                let la = q & vec4<u32>(0x0F0F0F0Fu);
                let lb = (q >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
                // the lo 16 values' unit in the chunk's slots (hi: + 8), or in global memory
                let sl = bl * 16u + 2u * c + h;
                let gl = (kc / 16u) + bl * 16u + 4u * c + h;
                for (var r = 0u; r < MR; r++) {
                    var xa: vec4<u32>; var xb: vec4<u32>; var ea: vec2<f32>; var eb: vec2<f32>;
                    if (staged) {
                        xa = x8[r * CU + sl]; xb = x8[r * CU + sl + 8u];
                        ea = x8s[r * CU + sl]; eb = x8s[r * CU + sl + 8u];
                    } else {
                        let g0 = r * (p.K / 16u) + gl;
                        xa = xq[g0]; xb = xq[g0 + 2u]; ea = xs[g0]; eb = xs[g0 + 2u];
                    }
                    let sa = dot4I8Packed(la.x, xa.x) + dot4I8Packed(la.y, xa.y) +
                             dot4I8Packed(la.z, xa.z) + dot4I8Packed(la.w, xa.w);
                    let sb = dot4I8Packed(lb.x, xb.x) + dot4I8Packed(lb.y, xb.y) +
                             dot4I8Packed(lb.z, xb.z) + dot4I8Packed(lb.w, xb.w);
                    acc[jj * MR + r] += da * ea.x * f32(sa) + db * eb.x * f32(sb)
                                        - ma * ea.y - mb * eb.y;
                }
            }
        }
    }
    for (var jj = 0u; jj < J; jj++) {
        let n = (wid.x * J + jj) * RPW + gi;
        var mine = 0.0;
        for (var r = 0u; r < MR; r++) {
            var t = acc[jj * MR + r];
            for (var o = TPR / 2u; o > 0u; o /= 2u) { t += subgroupShuffleXor(t, o); }
            if (r == j) { mine = t; }
        }
        if (n < p.N && j < MR) { y[j * p.N + n] = mine; }
    }
}
"""


def quantize_x(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x as quant/qx8.wgsl writes it (quant.quantize_x8: int8 per 32 values), with its per-16
    (scale, scale x the sum of its int8s) pairs: (int8 (M, K), (M, K / 16, 2) f32, the
    dequantized x)."""
    q, d = quant.quantize_x8(x)
    m, k = q.shape
    halves = q.reshape(m, k // 16, 16).astype(np.float32).sum(-1)
    dd = np.repeat(d, 2, axis=1)
    side = np.stack([dd, dd * halves], -1).astype(np.float32)
    return q, side, quant.x8_values(x).astype(np.float32)


def main() -> None:
    import wgpu
    dev = wr.device()
    gdev = dev.device
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    out: dict[str, object] = {"device": str(getattr(dev, "name", "")), "rows": MR,
                              "us_per_dispatch": {}, "max_rel_err": {}}
    rng = np.random.default_rng(0)
    limit = gdev.limits["max-storage-buffer-binding-size"]
    check = "--check" in sys.argv
    for label, (n, k) in SHAPES.items():
        if check:
            n = min(n, 512)
        if quant.nbytes("q4_k", n, k) > limit:
            out["us_per_dispatch"][label] = f"skipped: over this adapter's {limit}-byte binding"
            continue
        raw = quant.random_blocks("q4_k", n, k, seed=1, scale=1e-2)
        wts = quant.dequantize(raw, "q4_k", (n, k))
        x = rng.standard_normal((MR, k)).astype(np.float32)
        xq, side, xdq = quantize_x(x)
        bufs = [gdev.create_buffer_with_data(data=quant.words(raw), usage=usage),
                gdev.create_buffer_with_data(data=x, usage=usage),
                gdev.create_buffer_with_data(data=xq.view(np.uint8), usage=usage),
                gdev.create_buffer_with_data(data=side, usage=usage),
                gdev.create_buffer(size=MR * n * 4, usage=usage),
                gdev.create_buffer_with_data(data=np.array([n, k, 0, 0], np.uint32),
                                             usage=wgpu.BufferUsage.UNIFORM)]
        want = xdq.astype(np.float64) @ wts.T.astype(np.float64)
        exact = x.astype(np.float64) @ wts.T.astype(np.float64)
        for form, tpr, j in FORMS:
            if check and tpr > 8:                    # CPU adapters' subgroups: under 32 lanes
                continue
            name = f"{label} {form} tpr{tpr} j{j}"
            src = SRC.replace("{kc}", str(KC)).replace("{tpr}", str(tpr)).replace(
                "{j}", str(j)).replace("{form}", str("SQD".index(form))).replace(
                "{stage}", str(MR * KC // 16 if form != "D" else 1)).replace(
                "{nacc}", str(MR * j))
            pipe = gdev.create_compute_pipeline(layout="auto", compute={
                "module": gdev.create_shader_module(code=src), "entry_point": "main"})
            layout = pipe.get_bind_group_layout(0)
            group = gdev.create_bind_group(layout=layout, entries=[
                {"binding": i, "resource": {"buffer": b}} for i, b in enumerate(bufs)])
            grid = (-(-n // ((WG // tpr) * j)), 1, 1)
            seconds_per_dispatch(gdev, pipe, group, grid, 1, bufs[4])
            got = np.frombuffer(gdev.queue.read_buffer(bufs[4]), np.float32).reshape(MR, n)
            err = float(np.abs(got - want).max() / np.abs(want).max())
            vs_f32 = float(np.abs(got - exact).max() / np.abs(exact).max())
            out["max_rel_err"][name] = {"vs_own_x": err, "vs_f32_x": vs_f32}
            print(name, "err", err, "vs f32 x", vs_f32, file=sys.stderr)
            assert err < 1e-4, (name, err)
            if check:
                continue
            runs = 200 if n < 50000 else 50
            seconds_per_dispatch(gdev, pipe, group, grid, 5, bufs[4])
            t = min(seconds_per_dispatch(gdev, pipe, group, grid, runs, bufs[4])
                    for _ in range(3))
            out["us_per_dispatch"][name] = round(1e6 * t, 2)
            print(name, round(1e6 * t, 2), "us", file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
