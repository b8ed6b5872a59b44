"""Tensor cores through Dawn's subgroup matrices: an f16 matmul with f32 accumulation written with
`enable chromium_experimental_subgroup_matrix;`, checked against numpy and timed at 4096^3.
Runs inside Pyodide over Dawn (raw navigator.gpu, no webrlx kernel yet); prints JSON.

    python -m webrlx dawn -- python bench/probes/subgroup_matrix_probe.py [--n 4096] [--check 512]

Each subgroup (32 lanes) owns TM x TN result tiles of 16x16 and walks K in steps of 16, loading
its left / right 16x16 f16 tiles straight from storage (no workgroup memory). Time: `reps`
dispatches in one submit, ended by a 4-byte readback, median of 5 batches.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import js
import numpy as np
from pyodide.ffi import run_sync, to_js

from webrlx.compiler.smat import LEFT, RIGHT, mload, mstore

FEATURE = "chromium-experimental-subgroup-matrix"
VARIANTS = ((1, 1), (2, 2), (2, 4), (4, 2), (4, 4))


def shader(tm: int, tn: int) -> str:
    """The kernel for TM x TN tiles a subgroup (one workgroup of 32 lanes)."""
    tiles = [(i, j) for i in range(tm) for j in range(tn)]
    acc = "".join(f"  var acc{i}{j}: subgroup_matrix_result<f32, 16, 16>;\n" for i, j in tiles)
    loads = "".join(f"    let a{i} = " + mload(LEFT, "&A", f"(row0 + {16 * i}u) * p.k + k", False,
                                             "p.k") + ";\n" for i in range(tm))
    loads += "".join(f"    let b{j} = " + mload(RIGHT, "&B", f"k * p.n + col0 + {16 * j}u", False,
                                              "p.n") + ";\n" for j in range(tn))
    mma = "".join(f"    acc{i}{j} = subgroupMatrixMultiplyAccumulate(a{i}, b{j}, acc{i}{j});\n"
                  for i, j in tiles)
    store = "".join("  " + mstore("&C", f"(row0 + {16 * i}u) * p.n + col0 + {16 * j}u",
                                  f"acc{i}{j}", "p.n") + ";\n" for i, j in tiles)
    return f"""enable f16;
enable chromium_experimental_subgroup_matrix;
struct Params {{ m: u32, n: u32, k: u32 }}
@group(0) @binding(0) var<storage, read> A: array<f16>;
@group(0) @binding(1) var<storage, read> B: array<f16>;
@group(0) @binding(2) var<storage, read_write> C: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;
@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wg: vec3u) {{
  let row0 = wg.y * {16 * tm}u;
  let col0 = wg.x * {16 * tn}u;
{acc}  for (var k = 0u; k < p.k; k += 16u) {{
{loads}{mma}  }}
{store}}}
"""


def js_obj(d: dict) -> object:
    return to_js(d, dict_converter=js.Object.fromEntries)


class Gpu:
    """A device with shader-f16 and subgroup matrices, and the few calls the probe needs."""

    def __init__(self) -> None:
        adapter = run_sync(js.navigator.gpu.requestAdapter())
        self.features = sorted(adapter.features)
        if FEATURE not in self.features:
            raise SystemExit(json.dumps({"error": f"the adapter lacks {FEATURE}",
                                         "features": self.features}))
        self.configs = [{k: str(getattr(c, k, None)) for k in
                         ("componentType", "resultComponentType", "M", "N", "K")}
                        for c in adapter.info.subgroupMatrixConfigs]
        limits = adapter.limits
        self.device = run_sync(adapter.requestDevice(js_obj({
            "requiredFeatures": ["shader-f16", FEATURE] +
                                (["subgroups"] if "subgroups" in self.features else []),
            "requiredLimits": {"maxStorageBufferBindingSize": limits.maxStorageBufferBindingSize,
                               "maxBufferSize": limits.maxBufferSize,
                               "maxComputeWorkgroupStorageSize":
                                   limits.maxComputeWorkgroupStorageSize,
                               "maxComputeInvocationsPerWorkgroup":
                                   limits.maxComputeInvocationsPerWorkgroup}})))

    def buffer(self, data: np.ndarray, usage: int) -> object:
        buf = self.device.createBuffer(js_obj({"size": max(data.nbytes, 16), "usage": usage}))
        self.device.queue.writeBuffer(buf, 0, to_js(data.reshape(-1).view(np.uint8)))
        return buf

    def pipeline(self, code: str) -> object:
        self.device.pushErrorScope("validation")
        module = self.device.createShaderModule(js_obj({"code": code}))
        error = run_sync(self.device.popErrorScope())
        if error is not None:
            raise RuntimeError(f"WGSL: {error.message}")
        return run_sync(self.device.createComputePipelineAsync(js_obj(
            {"layout": "auto", "compute": {"module": module, "entryPoint": "main"}})))

    def run(self, pipeline: object, buffers: list, grid: tuple[int, int], reps: int,
            out: object, nbytes: int) -> np.ndarray:
        group = self.device.createBindGroup(js_obj({
            "layout": pipeline.getBindGroupLayout(0),
            "entries": [{"binding": i, "resource": {"buffer": b}} for i, b in
                        enumerate(buffers)]}))
        enc = self.device.createCommandEncoder()
        cpass = enc.beginComputePass()
        cpass.setPipeline(pipeline)
        cpass.setBindGroup(0, group)
        for _ in range(reps):
            cpass.dispatchWorkgroups(*grid)
        cpass.end()
        staging = self.device.createBuffer(js_obj({"size": nbytes, "usage": 0x1 | 0x8}))
        enc.copyBufferToBuffer(out, 0, staging, 0, nbytes)
        self.device.queue.submit(js.Array.of(enc.finish()))
        run_sync(staging.mapAsync(0x1))
        got = np.frombuffer(js.Uint8Array.new(staging.getMappedRange()).to_bytes(), np.float32)
        staging.unmap()
        staging.destroy()
        return got


def matmul(gpu: Gpu, tm: int, tn: int, a: np.ndarray, b: np.ndarray, reps: int = 1,
           batches: int = 0) -> tuple[np.ndarray, float]:
    """C = A @ B on the GPU, and the median seconds per dispatch when batches > 0."""
    m, k = a.shape
    n = b.shape[1]
    storage = 0x80 | 0x8 | 0x4
    bufs = [gpu.buffer(a, storage), gpu.buffer(b, storage),
            gpu.buffer(np.zeros(m * n, np.float32), storage),
            gpu.buffer(np.array([m, n, k, 0], np.uint32), 0x40 | 0x8)]
    pipe = gpu.pipeline(shader(tm, tn))
    grid = (n // (16 * tn), m // (16 * tm))
    out = gpu.run(pipe, bufs, grid, 1, bufs[2], 4 if batches else m * n * 4)
    times = []
    for _ in range(batches):
        t = time.perf_counter()
        gpu.run(pipe, bufs, grid, reps, bufs[2], 4)
        times.append((time.perf_counter() - t) / reps)
    for buf in bufs:
        buf.destroy()
    return out.reshape(m, n) if not batches else out, statistics.median(times) if times else 0.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--check", type=int, default=512)
    p.add_argument("--reps", type=int, default=10)
    a = p.parse_args()
    gpu = Gpu()
    rng = np.random.default_rng(0)
    out: dict = {"configs": gpu.configs, "check_n": a.check, "n": a.n, "variants": []}
    x = rng.standard_normal((a.check, a.check)).astype(np.float16)
    y = rng.standard_normal((a.check, a.check)).astype(np.float16)
    ref = x.astype(np.float32) @ y.astype(np.float32)
    big_a = rng.standard_normal((a.n, a.n)).astype(np.float16)
    big_b = rng.standard_normal((a.n, a.n)).astype(np.float16)
    for tm, tn in VARIANTS:
        try:
            got, _ = matmul(gpu, tm, tn, x, y)
        except Exception as e:  # noqa: BLE001 - a variant Tint refuses is reported
            out["variants"].append({"tiles": f"{tm}x{tn}", "error": str(e)[:1500]})
            continue
        rel = float(np.abs(got - ref).max() / np.abs(ref).max())
        _, sec = matmul(gpu, tm, tn, big_a, big_b, a.reps, 5)
        out["variants"].append({"tiles": f"{tm}x{tn}", "max_rel_err_vs_numpy": rel,
                                "ms": sec * 1e3, "tflops": 2.0 * a.n ** 3 / sec / 1e12})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
