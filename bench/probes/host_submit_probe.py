"""Where a one-op run's time goes on the host: per run, the bench's wall time (runs back to
back, one sync), the host time of the submit loop alone, and the parts of one submit
(encode + finish, queue submit) timed apart; with deferred submits off and on, with a few
MAX_HELD. Prints JSON.
    python bench/probes/host_submit_probe.py"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.backends import wgpu_native as wn  # noqa: E402
from webrlx.cli.bench import time_executable  # noqa: E402


def _parts(dev, plan, n=2000) -> dict:
    """Host us of encode+finish alone, and of encode+finish+wgpuQueueSubmit (one cb each)."""
    lib, libf, ffi = dev._c_api()

    def encode():
        enc = libf.wgpuDeviceCreateCommandEncoder(dev.device._internal, ffi.NULL)
        cid = lib.wgpuCommandEncoderBeginComputePass(enc, ffi.NULL)
        dev._record(lib, ffi, cid, plan.dispatches)
        lib.wgpuComputePassEncoderEnd(cid)
        lib.wgpuComputePassEncoderRelease(cid)
        cb = libf.wgpuCommandEncoderFinish(enc, ffi.NULL)
        lib.wgpuCommandEncoderRelease(enc)
        return cb
    out = {}
    t = time.perf_counter()
    for _ in range(n):
        lib.wgpuCommandBufferRelease(encode())
    out["encode_finish_us"] = (time.perf_counter() - t) / n * 1e6
    dev.flush()
    t = time.perf_counter()
    for _ in range(n):
        cb = encode()
        libf.wgpuQueueSubmit(dev.queue._internal, 1, ffi.new("WGPUCommandBuffer[1]", [cb]))
        lib.wgpuCommandBufferRelease(cb)
    out["encode_submit_us"] = (time.perf_counter() - t) / n * 1e6
    dev.device._poll(True)
    t = time.perf_counter()
    for _ in range(n):
        lib.wgpuDevicePoll(dev.device._internal, 0, ffi.NULL)
    out["poll_us"] = (time.perf_counter() - t) / n * 1e6
    return out


def main() -> None:
    dev = wr.device()
    rng = np.random.default_rng(0)
    res = {"device": dev.info.name, "cases": {}}
    cases = [("add 1024", lambda a, b: a + b, [(1024,), (1024,)]),
             ("softmax 4096x384", lambda a: a.softmax(-1), [(4096, 384)]),
             ("gemv 1x4096x4096", lambda a, b: a @ b, [(1, 4096), (4096, 4096)])]
    configs = [("off", False, 32), ("on", True, 32), ("on, max 8", True, 8),
               ("on, max 128", True, 128)]
    for name, fn, shapes in cases:
        g = wr.Graph()
        ins = [g.input(f"x{i}", s) for i, s in enumerate(shapes)]
        exe = wr.compile(g, outputs=[fn(*ins)])
        feeds = {f"x{i}": rng.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)}
        exe.run(feeds)
        plan = exe.last_plan
        row = {"parts": _parts(dev, plan)}
        for label, defer, mx in configs:
            wn.DEFER_SUBMITS, wn.MAX_HELD = defer, mx
            dev.stats.clear()
            wall = time_executable(exe, feeds, 10, 5)
            t = time.perf_counter()
            for _ in range(2000):
                dev.submit(plan.dispatches)
            host = (time.perf_counter() - t) / 2000
            dev.flush()
            dev.device._poll(True)
            row[label] = {"wall_us": round(wall * 1e6, 1), "host_loop_us": round(host * 1e6, 1),
                          "held": dev.stats["submits_held"],
                          "queue_submits": dev.stats["queue_submits"]}
        wn.DEFER_SUBMITS, wn.MAX_HELD = True, 32
        res["cases"][name] = row
        print(name, row, file=sys.stderr)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
