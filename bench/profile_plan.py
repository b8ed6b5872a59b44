"""Per-kernel GPU time of a compiled MiniLM run, from timestamp queries (wgpu-py backend):
each dispatch gets its own compute pass with begin/end timestamps, all in one submit.

    python bench/profile_plan.py [--model DIR] [--batch 1] [--seq 128]
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from webrlx.models import minilm  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default=None)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128)
    a = p.parse_args()
    enc = minilm.load(a.model)
    rows = [[101] + [2000 + i for i in range(a.seq - 2)] + [102] for _ in range(a.batch)]
    exe = enc.executable
    exe.run(enc.feeds(rows))
    plan = exe.last_plan
    be = plan.backend
    import numpy as np
    import wgpu
    dev = be.device
    n = len(plan.dispatches)
    qs = dev.create_query_set(type="timestamp", count=2 * n)
    res = dev.create_buffer(size=16 * n, usage=wgpu.BufferUsage.QUERY_RESOLVE
                            | wgpu.BufferUsage.COPY_SRC)
    tot: collections.Counter = collections.Counter()
    count: collections.Counter = collections.Counter()
    for rep in range(3):
        enc = dev.create_command_encoder()
        for i, d in enumerate(plan.dispatches):
            cp = enc.begin_compute_pass(timestamp_writes={
                "query_set": qs, "beginning_of_pass_write_index": 2 * i,
                "end_of_pass_write_index": 2 * i + 1})
            cp.set_pipeline(d.pipeline)
            cp.set_bind_group(0, d.bind_group)
            cp.dispatch_workgroups(*d.grid)
            cp.end()
        enc.resolve_query_set(qs, 0, 2 * n, res, 0)
        be.queue.submit([enc.finish()])
        ts = np.frombuffer(be.queue.read_buffer(res), np.uint64).astype(np.int64)
        if rep == 2:
            for i, c in enumerate(plan.program.calls):
                tot[c.name] += (ts[2 * i + 1] - ts[2 * i]) / 1e6
                count[c.name] += 1
    t = time.perf_counter()
    for _ in range(10):
        be.submit(plan.dispatches)
    be.submit([], plan.copies[:1])
    be.read_buffer(plan.staging, 0, 4)
    whole = (time.perf_counter() - t) / 10
    print(json.dumps({"whole_run_ms": whole * 1e3, "gpu_sum_ms": sum(tot.values()),
                      "per_kernel_ms": {k: [round(v, 4), count[k]] for k, v in tot.most_common()}},
                     indent=1))


if __name__ == "__main__":
    main()
