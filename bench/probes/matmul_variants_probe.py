"""Register-tiled matmul variants timed side by side on one device, outside the compiler: the
shipped matmul_tiled (128 tiles) and matmul_wide, and generated variants of the same design
(16x16 threads, each owning R_I blocks of 4 rows x R_J column quads, tiles of A and B in
workgroup memory) that change one thing each: the tile shape (TM x TN), the k per step (BK),
double-buffered tiles (one barrier a step instead of two) and the k loop written out.
Each kernel runs `--runs` times in one command encoder, timed on the wall clock after a
warm-up; torch's time (CUDA, TF32 off) for the same product in the same run where present.
Prints JSON. Modules are made without runtime checks (the backend's default,
wgpu_native.SHADER_CHECKS).
    python bench/probes/matmul_variants_probe.py [--sizes 2048,4096] [--dtypes float32,float16]"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dispatch_timer import seconds_per_dispatch  # noqa: E402

import webrlx as wr  # noqa: E402
from webrlx.compiler.lower_matmul import tiled_slots, wide_slots  # noqa: E402
from webrlx.kernels import _builtin_slots, kernel, raw_shader  # noqa: E402


def generated(t: str, c: str, ri: int, rj: int, bk: int, double: bool, unroll: bool,
              math: str = "mul") -> str:
    """A variant of matmul_tiled: tile (64 ri) x (64 rj), k step bk, 16x16 threads. math:
    "mul" (acc += a * b), "fma" (acc = fma(vec4(a), b, acc)), or "blk" (f16 math only: fma
    into f16 accumulators within a step of bk, added into f32 ones after each step)."""
    tm, tn = 64 * ri, 64 * rj
    qa, qb = tm // 4, tn // 4
    na, nb = tm * bk // 4 // 256, bk * tn // 4 // 256      # vec4 loads a thread a step
    assert na >= 1 and nb >= 1 and bk % 4 == 0
    assert (2 if double else 1) * (tm + tn) * bk * 4 * (2 if c == "f16" else 4) // 4 <= 49152
    size_a, size_b = bk * qa, bk * qb
    nbuf = 2 if double else 1
    lines = [f"const QA: u32 = {qa}u;", f"const QB: u32 = {qb}u;", f"const BK: u32 = {bk}u;",
             f"var<workgroup> As: array<vec4<{c}>, {nbuf * size_a}>;",
             f"var<workgroup> Bs: array<vec4<{c}>, {nbuf * size_b}>;",
             "@compute @workgroup_size(16, 16)",
             "fn main(@builtin(workgroup_id) wid: vec3<u32>, "
             "@builtin(local_invocation_id) lid: vec3<u32>) {",
             "    let tx = lid.x;", "    let ty = lid.y;", "    let tid = ty * 16u + tx;",
             f"    let row0 = wid.y * {tm}u;", f"    let col0 = wid.x * {tn}u;",
             "    let K4 = p.K / 4u;", "    let N4 = p.N / 4u;",
             "    let a_base = (p.a_off + wid.z * p.a_bs) / 4u;",
             "    let b_base = (p.b_off + wid.z * p.b_bs) / 4u;",
             f"    var acc: array<vec4<{c}>, {4 * ri * rj}>;"]
    if math == "blk":
        lines.append(f"    var accf: array<vec4<f32>, {4 * ri * rj}>;")
    for u in range(na):
        lines += [f"    let la_row{u} = (tid + {256 * u}u) / {bk // 4}u;",
                  f"    let la_k{u} = ((tid + {256 * u}u) % {bk // 4}u) * 4u;",
                  f"    var va{u} = load_a(a_base, row0 + la_row{u}, la_k{u}, K4);"]
    for u in range(nb):
        lines += [f"    let lb_k{u} = (tid + {256 * u}u) / QB;",
                  f"    let lb_c{u} = (tid + {256 * u}u) % QB;",
                  f"    var vb{u} = load_b(b_base, lb_k{u}, col0 / 4u + lb_c{u}, N4);"]

    def store_tiles(buf: str) -> list[str]:
        out = []
        for u in range(na):
            for e, comp in enumerate("xyzw"):
                out.append(f"        As[{buf}sa + (la_k{u} + {e}u) * QA + la_row{u} / 4u]"
                           f"[la_row{u} % 4u] = va{u}.{comp};")
        for u in range(nb):
            out.append(f"        Bs[{buf}sb + lb_k{u} * QB + lb_c{u}] = vb{u};")
        return out

    def loads(k0: str) -> list[str]:
        out = [f"        va{u} = load_a(a_base, row0 + la_row{u}, {k0} + BK + la_k{u}, K4);"
               for u in range(na)]
        out += [f"        vb{u} = load_b(b_base, {k0} + BK + lb_k{u}, col0 / 4u + lb_c{u}, N4);"
                for u in range(nb)]
        return out

    def fmas(k: str, buf: str) -> list[str]:
        out = [f"            let a{i} = As[{buf}ra + {k} * QA + {16 * i}u + ty];"
               for i in range(ri)]
        out += [f"            let b{j} = Bs[{buf}rb + {k} * QB + {16 * j}u + tx];"
                for j in range(rj)]
        if math == "mul":
            out += [f"            acc[{(i * 4 + e) * rj + j}] += a{i}.{'xyzw'[e]} * b{j};"
                    for i in range(ri) for e in range(4) for j in range(rj)]
        else:
            out += [f"            acc[{(i * 4 + e) * rj + j}] = fma(vec4<{c}>(a{i}.{'xyzw'[e]}), "
                    f"b{j}, acc[{(i * 4 + e) * rj + j}]);"
                    for i in range(ri) for e in range(4) for j in range(rj)]
        return out

    def k_loop_blk(buf: str) -> list[str]:
        body = k_loop_plain(buf)
        if math != "blk":
            return body
        n = 4 * ri * rj
        return ([f"        for (var z = 0u; z < {n}u; z++) {{ acc[z] = vec4<{c}>(0); }}"] + body
                + [f"        for (var z = 0u; z < {n}u; z++) {{ accf[z] += vec4<f32>(acc[z]); }}"])

    def k_loop_plain(buf: str) -> list[str]:
        if unroll:
            return [line for k in range(bk)
                    for line in ("        {", *fmas(f"{k}u", buf), "        }")]
        return ["        for (var k = 0u; k < BK; k++) {", *fmas("k", buf), "        }"]

    if double:
        lines += ["    let sa = 0u;", "    let sb = 0u;", *store_tiles(""),
                  "    workgroupBarrier();",
                  "    for (var k0 = 0u; k0 < p.KL; k0 += BK) {",
                  "        let cur = (k0 / BK) & 1u;",
                  f"        let ra = cur * {size_a}u;", f"        let rb = cur * {size_b}u;",
                  f"        let wa = (cur ^ 1u) * {size_a}u;",
                  f"        let wb = (cur ^ 1u) * {size_b}u;",
                  *loads("k0"), *k_loop_blk(""),
                  *[s.replace("[sa", "[wa").replace("[sb", "[wb") for s in store_tiles("")],
                  "        workgroupBarrier();", "    }"]
    else:
        lines += ["    let sa = 0u;", "    let sb = 0u;", "    let ra = 0u;", "    let rb = 0u;",
                  "    for (var k0 = 0u; k0 < p.KL; k0 += BK) {", *store_tiles(""),
                  "        workgroupBarrier();", *loads("k0"), *k_loop_blk(""),
                  "        workgroupBarrier();", "    }"]
    final = "vec4<" + c + ">(accf[{}])" if math == "blk" else "acc[{}]"
    lines += [f"    store(wid.z, row0 + {64 * i + e}u + ty * 4u, col0 / 4u + {16 * j}u + tx, "
              + final.format((i * 4 + e) * rj + j) + ");" for i in range(ri) for e in range(4)
              for j in range(rj)]
    lines.append("}")
    head = raw_shader("common/matmul_vec4_io")
    slots = {**_builtin_slots(), "T": t, "C": c}
    for _ in range(3):
        for k, v in slots.items():
            head = head.replace("{{" + k + "}}", v)
    math = _builtin_slots()["MATH"].replace("{{C}}", c).replace("{{T}}", t)
    enable = "enable f16;\n" if "f16" in (t, c) else ""
    return enable + math + "\n" + head + "\n" + "\n".join(lines) + "\n"


def variants(t: str, c: str) -> dict[str, tuple[str, int, int]]:
    """name -> (source, tile rows, tile columns)"""
    out = {"shipped_tiled128": (kernel("matmul/matmul_tiled", T=t, C=c,
                                       **tiled_slots(2)).source, 128, 128),
           "shipped_wide128x256": (kernel("matmul/matmul_wide", T=t, C=c,
                                          **wide_slots()).source, 128, 256)}
    # (the workgroup-memory limit is 48 KiB: 128x128 tiles at BK 32 fit single-buffered only)
    for ri, rj, bk, double, unroll in ((2, 2, 8, False, True), (2, 2, 16, True, True),
                                       (2, 2, 16, False, True), (2, 4, 16, True, True),
                                       (4, 2, 16, True, True), (2, 2, 32, False, True),
                                       (1, 1, 16, True, True), (1, 1, 32, True, True),
                                       (2, 1, 16, True, True)):
        name = (f"gen{64 * ri}x{64 * rj}_bk{bk}" + ("_db" if double else "")
                + ("_unrolled" if unroll else ""))
        out[name] = (generated(t, c, ri, rj, bk, double, unroll), 64 * ri, 64 * rj)
    # the math of the shipped double-buffered shape: explicit fma, and (f16) f16 sums within a
    # step added into f32 ones
    for math in ("fma",) + (("blk",) if c == "f16" else ()):
        for ri, rj in ((2, 2), (2, 4)):
            out[f"gen{64 * ri}x{64 * rj}_bk16_db_{math}"] = (
                generated(t, c, ri, rj, 16, True, True, math), 64 * ri, 64 * rj)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="2048,4096")
    p.add_argument("--dtypes", default="float32,float16")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--only", default="", help="comma list of variant names")
    a = p.parse_args()
    dev = wr.device()
    gdev = dev.device
    import wgpu
    out = {"device": dev.info.name, "cases": {}}
    rng = np.random.default_rng(0)
    for dtype in a.dtypes.split(","):
        t = "f16" if dtype == "float16" else "f32"
        for n in (int(s) for s in a.sizes.split(",")):
            x = rng.standard_normal((n, n)).astype(dtype)
            w = rng.standard_normal((n, n)).astype(dtype)
            want = x.astype(np.float32) @ w.astype(np.float32) if n <= 2048 else None
            usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_DST \
                | wgpu.BufferUsage.COPY_SRC
            ba = gdev.create_buffer_with_data(data=x.tobytes(), usage=usage)
            bb = gdev.create_buffer_with_data(data=w.tobytes(), usage=usage)
            bc = gdev.create_buffer(size=x.nbytes, usage=usage)
            bias = gdev.create_buffer(size=16 * n, usage=usage)
            params = np.array([n, n, n, 0, 0, 0, 0, 0, 0, 0, 0, n, 1, 0, 0, 0], np.uint32)   # ZS 1
            bp = gdev.create_buffer_with_data(
                data=params.tobytes(), usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_SRC)
            row: dict = {}
            for name, (src, tm, tn) in variants(t, t).items():
                if a.only and name not in a.only.split(","):
                    continue
                try:
                    module = dev._shader_module(src)
                    pipe = gdev.create_compute_pipeline(layout="auto", compute={
                        "module": module, "entry_point": "main"})
                except Exception as e:       # noqa: BLE001 - report and go on
                    row[name] = {"error": str(e)[-400:]}
                    continue
                group = gdev.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
                    {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                    for i, b in enumerate((ba, bb, bias, bc, bp))])
                grid = (-(-n // tn), -(-n // tm), 1)

                def go(runs: int) -> float:
                    return seconds_per_dispatch(gdev, pipe, group, grid, runs, bp)
                go(2)
                ms = min(go(a.runs) for _ in range(3)) * 1e3
                got = np.frombuffer(gdev.queue.read_buffer(bc), dtype).reshape(n, n)
                err = None
                if want is not None:
                    err = float(np.abs(got.astype(np.float32) - want).max()
                                / np.abs(want).max())
                row[name] = {"ms": round(ms, 4), "tflops": round(2 * n ** 3 / ms / 1e9, 2),
                             "rel_err": err}
                print(f"{dtype} {n} {name:32s} {ms:8.4f} ms {2 * n ** 3 / ms / 1e9:6.2f} "
                      f"TFLOP/s err {err}", file=sys.stderr, flush=True)
            try:
                import torch
                if torch.cuda.is_available():
                    torch.backends.cuda.matmul.allow_tf32 = False
                    tx, tw = (torch.from_numpy(v).cuda() for v in (x, w))
                    for _ in range(3):
                        tx @ tw
                    torch.cuda.synchronize()
                    best = 1e9
                    for _ in range(3):
                        t0 = time.perf_counter()
                        for _ in range(a.runs):
                            tx @ tw
                        torch.cuda.synchronize()
                        best = min(best, (time.perf_counter() - t0) / a.runs)
                    row["torch_ms"] = round(best * 1e3, 4)
                    print(f"{dtype} {n} torch {best * 1e3:8.4f} ms", file=sys.stderr)
            except ImportError:
                pass
            out["cases"][f"{dtype} {n}"] = row
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
