"""Arithmetic rate of f32 against f16 math on this adapter, outside memory: each thread runs a
long loop of independent fma chains on registers (no loads in the loop) and stores one sum.
Tells whether the driver pairs f16 math (HFMA2 on NVIDIA: twice the f32 rate) or runs it at
the f32 rate, which caps every f16 matmul at roughly its f32 speed.
Forms: f32 vec4 fma; f16 vec4 fma; f16 vec2 fma; f16 vec4 fma of a broadcast scalar (the
matmul's a.x * b); and the same as `+= s * v` (multiply and add, left to the driver to fuse).
H200 (wgpu-native over Vulkan, bench/results/2026-11-26-h200-f16-alu-probe.json): every form
63-66 TFLOP/s, f16 vec2 fma included: f16 math runs at the f32 rate there.
    python bench/probes/f16_alu_probe.py [--iters 4096] [--groups 4096]"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dispatch_timer import seconds_per_dispatch  # noqa: E402

import webrlx as wr  # noqa: E402

CHAINS = 16    # independent accumulators a thread: enough to hide the FMA latency


def source(t: str, width: int, form: str, iters: int) -> str:
    v = f"vec{width}<{t}>" if width > 1 else t
    lines = ["enable f16;" if t == "f16" else "",
             "@group(0) @binding(0) var<storage, read_write> out: array<f32>;",
             "@compute @workgroup_size(256)",
             "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {",
             f"    let s = {t}(f32(gid.x % 7u) * 0.001);",
             f"    var x = {v}({t}(0.999));",
             f"    let y = {v}({t}(0.0001));"]
    lines += [f"    var a{c} = {v}({t}(f32(gid.x + {c}u) * 1e-6));" for c in range(CHAINS)]
    lines.append(f"    for (var i = 0u; i < {iters}u; i++) {{")
    for c in range(CHAINS):
        if form == "fma":
            lines.append(f"        a{c} = fma(a{c}, x, y);")
        elif form == "bcast":
            lines.append(f"        a{c} = fma({v}(s), a{c}, y);")
        else:                              # mul-add written out
            lines.append(f"        a{c} = s * a{c} + y;")
    lines.append("    }")
    total = " + ".join(f"a{c}" for c in range(CHAINS))
    red = f"dot(vec{width}<f32>({total}), vec{width}<f32>(1.0))" if width > 1 else f"f32({total})"
    lines += [f"    out[gid.x] = {red};", "}"]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=4096)
    p.add_argument("--groups", type=int, default=4096)
    a = p.parse_args()
    dev = wr.device()
    gdev = dev.device
    import wgpu
    out_buf = gdev.create_buffer(size=a.groups * 256 * 4, usage=wgpu.BufferUsage.STORAGE
                                 | wgpu.BufferUsage.COPY_SRC)
    res = {"device": dev.info.name, "iters": a.iters, "groups": a.groups, "forms": {}}
    for t, width, form in (("f32", 4, "fma"), ("f32", 4, "muladd"), ("f16", 4, "fma"),
                           ("f16", 2, "fma"), ("f16", 4, "bcast"), ("f16", 4, "muladd"),
                           ("f16", 1, "fma"), ("f32", 1, "fma")):
        src = source(t, width, form, a.iters)
        try:
            pipe = gdev.create_compute_pipeline(layout="auto", compute={
                "module": dev._shader_module(src), "entry_point": "main"})
        except Exception as e:     # noqa: BLE001 - report and go on
            res["forms"][f"{t} vec{width} {form}"] = {"error": str(e)[-300:]}
            continue
        group = gdev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
            {"binding": 0, "resource": {"buffer": out_buf, "offset": 0, "size": out_buf.size}}])

        def go(runs: int) -> float:
            return seconds_per_dispatch(gdev, pipe, group, (a.groups,), runs, out_buf)
        go(1)
        sec = min(go(5) for _ in range(3))
        fmas = a.groups * 256 * a.iters * CHAINS * width
        name = f"{t} vec{width} {form}"
        res["forms"][name] = {"ms": round(sec * 1e3, 4), "tflops": round(2 * fmas / sec / 1e12, 2)}
        print(f"{name:20s} {sec * 1e3:8.3f} ms {2 * fmas / sec / 1e12:7.2f} TFLOP/s",
              file=sys.stderr, flush=True)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
