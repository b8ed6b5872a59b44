"""Host-side costs of one webrlx run, measured the same way natively and inside Pyodide.

bench/probes/ffi_overhead.py runs this file natively and sends its source to the browser.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

import webrlx as wr

N_NODES = 100   # matmuls in the chain: each one is its own dispatch


def chain(n: int, device: Any) -> tuple[Any, dict[str, np.ndarray]]:
    """A graph of n dependent 16x16 matmuls (n dispatches), compiled, params set, run once."""
    g = wr.Graph()
    x = g.input("x", (16, 16))
    w = g.param("w", (16, 16))
    h = x
    for _ in range(n):
        h = h @ w
    exe = wr.compile(g, outputs=[h], device=device)
    exe.set_params({"w": np.eye(16, dtype=np.float32)})
    feeds = {"x": np.ones((16, 16), np.float32)}
    exe.run(feeds)
    return exe, feeds


def per_call_us(fn: Any, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats * 1e6


async def per_await_us(fn: Any, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        await fn()
    return (time.perf_counter() - start) / repeats * 1e6


async def measure(device: Any = None, repeats: int = 50) -> dict[str, Any]:
    """Return microsecond costs: encode+submit per dispatch, readback, upload, whole runs."""
    big, feeds = chain(N_NODES, device)
    small, _ = chain(1, device)
    plan, plan1 = big.last_plan, small.last_plan
    backend = plan.backend
    assert len(plan.dispatches) == N_NODES and len(plan1.dispatches) == 1

    def drain() -> None:
        backend.read_buffer(plan.staging, 0, plan.readback_bytes)

    def submit_us(p: Any) -> float:
        """Host time of encode + submit alone: the GPU is idle before each (lavapipe and
        SwiftShader run on the same CPU cores)."""
        total = 0.0
        for _ in range(repeats):
            start = time.perf_counter()
            p.submit()
            total += time.perf_counter() - start
            drain()
        return total / repeats * 1e6

    submit_big, submit_small = submit_us(plan), submit_us(plan1)
    read = per_call_us(drain, repeats)
    read_async = await per_await_us(
        lambda: backend.read_buffer_async(plan.staging, 0, plan.readback_bytes), repeats)
    upload = per_call_us(lambda: plan.upload("x", feeds["x"]), repeats)
    return {
        "device": f"{backend.info.name} ({backend.info.backend})",
        "nodes": N_NODES,
        "encode_submit_us_per_dispatch": (submit_big - submit_small) / (N_NODES - 1),
        "encode_submit_us_1_dispatch": submit_small,
        "readback_us": read,
        "readback_async_us": read_async,
        "upload_1KiB_us": upload,
        "run_ms": per_call_us(lambda: big.run(feeds), repeats) / 1e3,
        "run_async_ms": await per_await_us(lambda: big.run_async(feeds), repeats) / 1e3,
    }
