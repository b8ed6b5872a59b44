"""Wall time of one pipeline dispatched back to back, for the probes that time raw shaders
outside the compiler (matmul_variants_probe, f16_alu_probe): `runs` dispatches in one compute
pass, submitted, ended by a 16-byte readback of `sync`; seconds per dispatch."""
from __future__ import annotations

import time
from typing import Any


def seconds_per_dispatch(gdev: Any, pipe: Any, group: Any, grid: tuple[int, ...], runs: int,
                         sync: Any) -> float:
    enc = gdev.create_command_encoder()
    cp = enc.begin_compute_pass()
    cp.set_pipeline(pipe)
    cp.set_bind_group(0, group)
    for _ in range(runs):
        cp.dispatch_workgroups(*grid)
    cp.end()
    t0 = time.perf_counter()
    gdev.queue.submit([enc.finish()])
    gdev.queue.read_buffer(sync, 0, 16)
    return (time.perf_counter() - t0) / runs
