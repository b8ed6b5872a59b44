"""Where a one-op run's wall time goes beyond its kernel: for each case, the bench's figure
(runs submitted back to back, one submit each), the kernel's GPU time (timestamp queries), the
time per run when R runs share one submit (same dispatches repeated, one compute pass), and
torch's time where CUDA is present. A large gap between the first and the third is per-submit
cost; between the third and the second, per-dispatch cost inside a pass. `timeline` submits
the run N times, each submit with its own timestamped pass: the GPU's idle gap between one
submit's end and the next one's start, beside the host's time per submit. Prints JSON.

    python bench/probes/submit_gap_probe.py [--repeat 16] [--only CASE]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import webrlx as wr  # noqa: E402
from webrlx.cli.bench import _ref_timer, _time, time_executable  # noqa: E402


def cases() -> list[tuple[str, object, list[tuple[int, ...]], object]]:
    def softmax(x):
        return x.softmax(-1)

    def layer_norm(x):
        return wr.nn.layer_norm(x, eps=1e-5)

    def add(x):
        return x + 1.0

    def gemv(a, b):
        return a @ b

    def t_ln(t):
        import torch
        return torch.nn.functional.layer_norm(t, t.shape[-1:], eps=1e-5)
    return [("add 1024", add, [(1024,)], lambda t: t + 1.0),
            ("softmax 4096x384", softmax, [(4096, 384)], lambda t: t.softmax(-1)),
            ("softmax 4096x4096", softmax, [(4096, 4096)], lambda t: t.softmax(-1)),
            ("layer_norm 4096x4096", layer_norm, [(4096, 4096)], t_ln),
            ("gemv 1x4096x4096", gemv, [(1, 4096), (4096, 4096)], lambda a, b: a @ b),
            ("matmul 2048", gemv, [(2048, 2048), (2048, 2048)], lambda a, b: a @ b)]


def timeline(plan, n: int = 32) -> dict:
    """Submit plan's first dispatch n times back to back, each in its own submit with a
    timestamped pass; return the median GPU kernel time, the median GPU idle gap between
    consecutive submits, and the host's median time per submit (None without timestamps)."""
    import time
    be = plan.backend
    if "timestamp-query" not in be.info.features:
        return {}
    dev = be.device
    qs = dev.create_query_set(type="timestamp", count=2 * n)
    import wgpu
    resolve = dev.create_buffer(size=16 * n, usage=wgpu.BufferUsage.QUERY_RESOLVE |
                                wgpu.BufferUsage.COPY_SRC)
    d = plan.dispatches[0]
    host = []
    for i in range(n):
        t0 = time.perf_counter()
        enc = dev.create_command_encoder()
        cp = enc.begin_compute_pass(timestamp_writes={
            "query_set": qs, "beginning_of_pass_write_index": 2 * i,
            "end_of_pass_write_index": 2 * i + 1})
        cp.set_pipeline(d.pipeline)
        cp.set_bind_group(0, d.bind_group)
        cp.dispatch_workgroups(*d.grid)
        cp.end()
        be.queue.submit([enc.finish()])
        host.append(time.perf_counter() - t0)
    enc = dev.create_command_encoder()
    enc.resolve_query_set(qs, 0, 2 * n, resolve, 0)
    be.queue.submit([enc.finish()])
    t = np.frombuffer(be.queue.read_buffer(resolve, 0, 16 * n), np.uint64).astype(np.int64)
    kern = [t[2 * i + 1] - t[2 * i] for i in range(n)]
    gaps = [t[2 * i + 2] - t[2 * i + 1] for i in range(n - 1)]
    return {"timeline_kernel_us": round(float(np.median(kern)) / 1e3, 2),
            "timeline_gap_us": round(float(np.median(gaps)) / 1e3, 2),
            "timeline_gap_min_max_us": [round(min(gaps) / 1e3, 2), round(max(gaps) / 1e3, 2)],
            "timeline_host_per_submit_us": round(float(np.median(host)) * 1e6, 2)}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=16)
    p.add_argument("--only", default="")
    a = p.parse_args()
    rng = np.random.default_rng(0)
    out = {"device": wr.device().info.name, "repeat_per_submit": a.repeat, "cases": []}
    for name, fn, shapes, fn_torch in cases():
        if a.only and a.only not in name:
            continue
        g = wr.Graph()
        ins = [g.input(f"x{i}", s) for i, s in enumerate(shapes)]
        exe = wr.compile(g, outputs=[fn(*ins)])
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        feeds = {f"x{i}": v for i, v in enumerate(arrays)}
        wall = time_executable(exe, feeds, 10, 5)
        prof = exe.profile(feeds, repeats=5)
        plan = exe.last_plan
        be = plan.backend
        many = list(plan.dispatches) * a.repeat

        def sync() -> None:
            be.submit([], plan.copies[:1])
            be.read_buffer(plan.staging, 0, 4)
        batched = _time(lambda: be.submit(many), sync, 4, 5) / a.repeat
        row = {"case": name, "dispatches": len(plan.dispatches),
               "wall_back_to_back_us": round(wall * 1e6, 2),
               "gpu_timestamps_us": round(prof.total_ms * 1e3, 2),
               f"per_run_{a.repeat}_per_submit_us": round(batched * 1e6, 2)}
        try:
            row.update(timeline(plan))
        except Exception as e:                 # a probe: say why, go on
            row["timeline_error"] = repr(e)[:200]
        ref = _ref_timer(lambda *x: None, fn_torch, arrays, 10, 5, "float32")
        if "torch" in ref.get("reference", ""):
            row["torch_us"] = round(ref["ref_ms"] * 1e3, 2)
        print(row, file=sys.stderr)
        out["cases"].append(row)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
