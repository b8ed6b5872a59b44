"""Whether this wgpu-native can use the adapter's cooperative matrices (tensor cores): does the
adapter list the native feature "cooperative-matrix", can a device be requested with it, does
naga compile an `enable wgpu_cooperative_matrix;` kernel (8x8 f32 tiles: the only shape
wgpu-native 29 implements), does it match numpy, and how fast is it beside webrlx's own f32
matmul at the same size. Run it after each wgpu-py upgrade: when it says "usable", a matmul
variant on cooperative matrices is worth writing. Prints JSON; exits 0 whatever it finds.

    python bench/probes/coop_matrix_probe.py [--n 2048]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

FEATURE = "cooperative-matrix"

# C[M, N] = A[M, K] @ B[K, N], row-major f32; one 8x8 tile of C a workgroup (naga's example
# layout: one subgroup-scoped 8x8 matrix of each role)
KERNEL = """
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@group(0) @binding(3) var<uniform> dims: vec4<u32>;      // M, N, K, 0

@compute @workgroup_size(32)
fn main(@builtin(workgroup_id) wid: vec3<u32>) {
    let n = dims.y;
    let k_len = dims.z;
    let row = wid.y * 8u;
    let col = wid.x * 8u;
    var acc = coopLoad<coop_mat8x8<f32, C>>(&c[row * n + col], n);
    for (var k = 0u; k < k_len; k += 8u) {
        let ta = coopLoad<coop_mat8x8<f32, A>>(&a[row * k_len + k], k_len);
        let tb = coopLoad<coop_mat8x8<f32, B>>(&b[k * n + col], n);
        acc = coopMultiplyAdd(ta, tb, acc);
    }
    coopStore(acc, &c[row * n + col], n);
}
"""


def probe(n: int) -> dict:
    import wgpu
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    out: dict = {"adapter": adapter.info.get("device", ""), "wgpu_py": wgpu.__version__,
                 "listed": FEATURE in adapter.features, "requestable": False,
                 "compiles": False, "matches_numpy": None, "usable": False}
    try:                                        # asked for even when not listed: the error
        device = adapter.request_device_sync(required_features=[FEATURE])
        out["requestable"] = True
    except Exception as e:                      # a probe: report, do not raise
        out["why"] = f"request_device: {e!r}"[:400]
        if not out["listed"]:
            out["why"] = (f"the adapter does not list {FEATURE!r} (wgpu-native offers it only "
                          "where the driver has 8x8x8 f32 cooperative matrices); " + out["why"])
        return out
    try:
        module = device.create_shader_module(code=KERNEL)
        pipe = device.create_compute_pipeline(layout="auto",
                                              compute={"module": module, "entry_point": "main"})
        out["compiles"] = True
    except Exception as e:
        out["why"] = f"shader: {e!r}"[:400]
        return out
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n)).astype(np.float32)
    y = rng.standard_normal((n, n)).astype(np.float32)
    u = wgpu.BufferUsage
    bufs = [device.create_buffer_with_data(data=x, usage=u.STORAGE),
            device.create_buffer_with_data(data=y, usage=u.STORAGE),
            device.create_buffer(size=n * n * 4, usage=u.STORAGE | u.COPY_SRC),
            device.create_buffer_with_data(data=np.array([n, n, n, 0], np.uint32),
                                           usage=u.UNIFORM)]
    group = device.create_bind_group(layout=pipe.get_bind_group_layout(0), entries=[
        {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
        for i, b in enumerate(bufs)])

    def run(times: int) -> None:
        enc = device.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(pipe)
        cp.set_bind_group(0, group)
        for _ in range(times):
            cp.dispatch_workgroups(n // 8, n // 8, 1)
        cp.end()
        device.queue.submit([enc.finish()])
    run(1)
    got = np.frombuffer(device.queue.read_buffer(bufs[2]), np.float32).reshape(n, n)
    want = x @ y
    err = float(np.abs(got - want).max() / np.abs(want).max())
    out["rel_err"] = err
    out["matches_numpy"] = err < 1e-3
    reps = 5
    t = time.perf_counter()
    run(reps)
    device.queue.read_buffer(bufs[2], 0, 4)
    sec = (time.perf_counter() - t) / reps
    out["coop_gflops"] = round(2 * n ** 3 / sec / 1e9, 1)
    out["usable"] = out["matches_numpy"]
    import webrlx as wr
    from webrlx.cli.bench import time_executable
    g = wr.Graph()
    xi, yi = g.input("x", (n, n)), g.input("y", (n, n))
    exe = wr.compile(g, outputs=[xi @ yi])
    out["webrlx_f32_gflops"] = round(2 * n ** 3 / time_executable(exe, {"x": x, "y": y}, 5, 3)
                                     / 1e9, 1)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=2048)
    a = p.parse_args()
    try:
        out = probe(a.n)
    except Exception as e:                      # no adapter at all, or wgpu missing
        out = {"usable": False, "why": repr(e)[:400]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
