"""Probe: what the x rows' number format costs a batched Q4_K GEMV (8 x rows, Llama-3.2-1B's
gate+up and head shapes), outside the compiler. One kernel skeleton, three x formats:
  f32: x as f32 (what webrlx's GEMVs read today), 32 FMAs a row per 16 weight bytes;
  f16: x stored as f16 (half the bytes), widened to f32 at use;
  i8:  x quantized to int8 per 32 values (a scale each, and the scaled sum of each 16 for the
       Q4_K min term: llama.cpp's q8_1 idea), 8 dot4I8Packed a row per 16 weight bytes.
Each thread takes 16 bytes of a block (the low and high nibbles of 16 weights of one chunk:
two sub-blocks), decodes its two scale/min pairs once, and applies them to all 8 rows; 32
threads (one subgroup) a weight row, subgroupAdd at the end. Checked against numpy
(webrlx.quant.dequantize) before timing; times are seconds per dispatch of 200 back to back
(bench/probes/dispatch_timer.py). The question it answers: is the 8-row GEMV bound by the
x bytes it reads per weight byte (then f16 and i8 win), or by something else?
H100 (bench/results/2026-11-27-h100-qgemv-xtype-probe.json), us per dispatch, f32 / f16 / i8:
gate+up 172 / 96 / 52, head 1215 / 685 / 670; error against f32 x (of max |y|): f16 2e-4,
i8 5e-3 to 7e-3 (too far from the 1e-3 the fixture tests hold to transformers). So x bytes bound
this skeleton's 8-row GEMV, but not production's (whose tuned f32 kernels beat it: gate+up
71 us, head 557 us by timestamps in the same call): the same GEMVs reading f16 x gained
nothing (bench/results/2026-11-27-h100-qgemv-f16-x.json, qgemv_variants_probe.py --x16).
    python bench/probes/qgemv_xtype_probe.py [--check]   (--check: the numpy check only)"""
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
WG = 256                     # 8 subgroups of 32: 8 weight rows a workgroup
SHAPES = {"gate+up q4_k 16384x2048": (16384, 2048), "head q4_k 128256x2048": (128256, 2048)}

HEAD = """
{enable}
@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;     // Q4_K blocks, 9 vec4 each
@group(0) @binding(1) var<storage, read> xv: array<{xarr}>;
@group(0) @binding(2) var<storage, read> xs: array<vec2<f32>>;    // i8: (scale, scaled sum) / 16
@group(0) @binding(3) var<storage, read_write> y: array<f32>;     // (MR, N)
struct P {{ N: u32, K: u32 }}
@group(0) @binding(4) var<uniform> p: P;
const MR: u32 = {mr}u;

fn nib(v: u32, sh: u32) -> vec4<f32> {{
    let b = (v >> sh) & 0x0F0F0F0Fu;
    return vec4<f32>(f32(b & 255u), f32((b >> 8u) & 255u), f32((b >> 16u) & 255u), f32(b >> 24u));
}}

var<workgroup> part: array<f32, {wg}u * MR>;   // per subgroup of a row, per x row

@compute @workgroup_size({wg})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32,
        @builtin(subgroup_invocation_id) sl: u32, @builtin(subgroup_size) sg: u32) {{
    let lane = lid % 32u;                            // 32 threads a weight row (N % 8 == 0)
    let n = wid.x * {rows}u + lid / 32u;
    if (p.K == 0u) {{ y[0] = xs[0].x; }}              // (keeps binding 2 in every form's layout)
    let nb = p.K / 256u;
    var acc: array<f32, MR>;
    for (var r = 0u; r < MR; r++) {{ acc[r] = 0.0; }}
    for (var hc = lane; hc < nb * 8u; hc += 32u) {{
        let b = hc / 8u;
        let c = (hc % 8u) / 2u;                      // chunk: sub-blocks 2c (lo), 2c + 1 (hi)
        let h = hc % 2u;                             // which 16 of its 32 weights
        let base = (n * nb + b) * 9u;
        let head = w[base];                          // d/dmin, scales words 1..3
        let q = w[base + 1u + c * 2u + h];           // 4 words: 16 lo + 16 hi nibbles
        let e = (c & 1u) * 16u;
        let lo = head.y >> e;
        let mo = head.z >> e;
        let hi = head.w >> e;
        let upper = c >= 2u;
        let sc = select(lo & 0x3F3Fu, (hi & 0x0F0Fu) | ((lo >> 2u) & 0x3030u), upper);
        let mn = select(mo & 0x3F3Fu, ((hi >> 4u) & 0x0F0Fu) | ((mo >> 2u) & 0x3030u), upper);
        let dm = unpack2x16float(head.x);
        let da = dm.x * f32(sc & 255u);
        let db = dm.x * f32((sc >> 8u) & 255u);
        let ma = dm.y * f32(mn & 255u);
        let mb = dm.y * f32((mn >> 8u) & 255u);
        let ka = b * 256u + c * 64u + h * 16u;       // first x index of the lo weights
{body}
    }}
    // subgroupAdd; where subgroups are under 32 lanes (CPU adapters) their sums meet in
    // workgroup memory (on the GPU: one subgroup a row, one entry)
    for (var r = 0u; r < MR; r++) {{
        let t = subgroupAdd(acc[r]);
        if (sl == 0u) {{ part[r * {wg}u + lid / sg] = t; }}
    }}
    workgroupBarrier();
    if (lane == 0u) {{
        for (var r = 0u; r < MR; r++) {{
            var t = 0.0;
            for (var i = 0u; i < 32u / sg; i++) {{ t += part[r * {wg}u + lid / sg + i]; }}
            y[r * p.N + n] = t;
        }}
    }}
}}
"""

# the float forms: the 32 nibbles as floats once, then per x row a0..a3 (lo) and b0..b3 (hi)
# loaded by the form, dotted and summed (the min term) alike
FLOAT_HEAD = """
        let wa0 = nib(q.x, 0u); let wa1 = nib(q.y, 0u);
        let wa2 = nib(q.z, 0u); let wa3 = nib(q.w, 0u);
        let wb0 = nib(q.x, 4u); let wb1 = nib(q.y, 4u);
        let wb2 = nib(q.z, 4u); let wb3 = nib(q.w, 4u);
        for (var r = 0u; r < MR; r++) {"""
FLOAT_TAIL = """
            let one = vec4<f32>(1.0);
            let sa = dot(wa0, a0) + dot(wa1, a1) + dot(wa2, a2) + dot(wa3, a3);
            let sb = dot(wb0, b0) + dot(wb1, b1) + dot(wb2, b2) + dot(wb3, b3);
            let xa = dot(a0 + a1 + a2 + a3, one);
            let xb = dot(b0 + b1 + b2 + b3, one);
            acc[r] += da * sa + db * sb - ma * xa - mb * xb;
        }"""

BODY = {
    "f32": FLOAT_HEAD + """
            let ia = (r * p.K + ka) / 4u;
            let ib = ia + 8u;                        // + 32 values: the hi sub-block
            let a0 = xv[ia]; let a1 = xv[ia + 1u]; let a2 = xv[ia + 2u]; let a3 = xv[ia + 3u];
            let b0 = xv[ib]; let b1 = xv[ib + 1u]; let b2 = xv[ib + 2u]; let b3 = xv[ib + 3u];
""" + FLOAT_TAIL,
    "f16": FLOAT_HEAD + """
            let ia = (r * p.K + ka) / 8u;            // 8 halves a vec4<u32>
            let ib = ia + 4u;
            let pa = xv[ia]; let pa2 = xv[ia + 1u];
            let pb = xv[ib]; let pb2 = xv[ib + 1u];
            let a0 = vec4<f32>(unpack2x16float(pa.x), unpack2x16float(pa.y));
            let a1 = vec4<f32>(unpack2x16float(pa.z), unpack2x16float(pa.w));
            let a2 = vec4<f32>(unpack2x16float(pa2.x), unpack2x16float(pa2.y));
            let a3 = vec4<f32>(unpack2x16float(pa2.z), unpack2x16float(pa2.w));
            let b0 = vec4<f32>(unpack2x16float(pb.x), unpack2x16float(pb.y));
            let b1 = vec4<f32>(unpack2x16float(pb.z), unpack2x16float(pb.w));
            let b2 = vec4<f32>(unpack2x16float(pb2.x), unpack2x16float(pb2.y));
            let b3 = vec4<f32>(unpack2x16float(pb2.z), unpack2x16float(pb2.w));
""" + FLOAT_TAIL,
    "i8": """
        let la = q & vec4<u32>(0x0F0F0F0Fu);
        let lb = (q >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
        for (var r = 0u; r < MR; r++) {
            let ia = (r * p.K + ka) / 16u;           // 16 int8 a vec4<u32>
            let xa = xv[ia];
            let xb = xv[ia + 2u];                    // + 32 values
            let sa = dot4I8Packed(la.x, xa.x) + dot4I8Packed(la.y, xa.y) +
                     dot4I8Packed(la.z, xa.z) + dot4I8Packed(la.w, xa.w);
            let sb = dot4I8Packed(lb.x, xb.x) + dot4I8Packed(lb.y, xb.y) +
                     dot4I8Packed(lb.z, xb.z) + dot4I8Packed(lb.w, xb.w);
            let ea = xs[ia];                         // (scale of its 32, scale * sum of its 16)
            let eb = xs[ia + 2u];
            acc[r] += da * ea.x * f32(sa) + db * eb.x * f32(sb) - ma * ea.y - mb * eb.y;
        }""",
}


def quantize_x(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """int8 x per 32 values (round to nearest, scale max|x| / 127), the scale of each 16 and
    the scale times the sum of its int8s: (int8 (M, K), (M, K / 16, 2) f32, dequantized)."""
    m, k = x.shape
    g = x.reshape(m, k // 32, 32)
    d = np.abs(g).max(-1, keepdims=True) / 127.0
    q = np.round(g / np.where(d == 0, 1, d)).astype(np.int8)
    halves = q.reshape(m, k // 16, 16).astype(np.float32).sum(-1)
    dd = np.repeat(d.reshape(m, k // 32), 2, axis=1)
    side = np.stack([dd, dd * halves], -1).astype(np.float32)
    return q.reshape(m, k), side, (q.astype(np.float32) * d).reshape(m, k)


def main() -> None:
    import wgpu
    dev = wr.device()
    gdev = dev.device
    usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
    out: dict[str, object] = {"device": str(getattr(dev, "name", "")), "rows": MR,
                              "us_per_dispatch": {}, "max_rel_err": {}}
    rng = np.random.default_rng(0)
    limit = gdev.limits["max-storage-buffer-binding-size"]
    for label, (n, k) in SHAPES.items():
        if quant.nbytes("q4_k", n, k) > limit:
            out["us_per_dispatch"][label] = f"skipped: over this adapter's {limit}-byte binding"
            continue
        raw = quant.random_blocks("q4_k", n, k, seed=1, scale=1e-2)
        wts = quant.dequantize(raw, "q4_k", (n, k))
        x = rng.standard_normal((MR, k)).astype(np.float32)
        xq, side, xdq = quantize_x(x)
        feeds = {"f32": (x, x), "f16": (x.astype(np.float16), x.astype(np.float16)
                                        .astype(np.float32)), "i8": (xq, xdq)}
        wbuf = gdev.create_buffer_with_data(data=quant.words(raw), usage=usage)
        sbuf = gdev.create_buffer_with_data(data=side, usage=usage)
        ybuf = gdev.create_buffer(size=MR * n * 4, usage=usage)
        pbuf = gdev.create_buffer_with_data(data=np.array([n, k, 0, 0], np.uint32),
                                            usage=wgpu.BufferUsage.UNIFORM)
        for xt, (xarr, xref) in feeds.items():
            src = HEAD.format(enable="", xarr="vec4<f32>" if xt == "f32" else
                              "vec4<u32>", mr=MR, wg=WG, rows=WG // 32, body=BODY[xt])
            pipe = gdev.create_compute_pipeline(layout="auto", compute={
                "module": gdev.create_shader_module(code=src), "entry_point": "main"})
            xbuf = gdev.create_buffer_with_data(data=np.ascontiguousarray(xarr).view(np.uint8),
                                                usage=usage)
            group = gdev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
                {"binding": i, "resource": {"buffer": b}}
                for i, b in enumerate((wbuf, xbuf, sbuf, ybuf, pbuf))])
            grid = (-(-n // (WG // 32)), 1, 1)
            seconds_per_dispatch(gdev, pipe, group, grid, 1, ybuf)
            got = np.frombuffer(gdev.queue.read_buffer(ybuf), np.float32).reshape(MR, n)
            want = xref.astype(np.float64) @ wts.T.astype(np.float64)
            err = float(np.abs(got - want).max() / np.abs(want).max())
            exact = x.astype(np.float64) @ wts.T.astype(np.float64)
            vs_f32 = float(np.abs(got - exact).max() / np.abs(exact).max())
            out["max_rel_err"][f"{label} {xt}"] = {"vs_own_x": err, "vs_f32_x": vs_f32}
            assert err < 1e-4, (label, xt, err)
            if "--check" in sys.argv:                # correctness only (CPU adapters)
                continue
            runs = 200 if n < 50000 else 50
            seconds_per_dispatch(gdev, pipe, group, grid, 5, ybuf)
            t = min(seconds_per_dispatch(gdev, pipe, group, grid, runs, ybuf) for _ in range(3))
            out["us_per_dispatch"][f"{label} {xt}"] = round(1e6 * t, 2)
            print(label, xt, round(1e6 * t, 2), "us", err, vs_f32, file=sys.stderr)
        print(label, out["max_rel_err"], file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
