"""Probe: a tensor past the adapter's real maxStorageBufferBindingSize (not a lowered one)
runs through windows (compiler/split.py). Prints JSON: limits, sizes, results vs expected,
seconds. Usage: python bench/probes/big_tensor_probe.py [elements]"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

import webrlx as wr


def main() -> None:
    dev = wr.device()
    limit = dev.info.max_binding_size
    n = int(sys.argv[1]) if len(sys.argv) > 1 else limit // 4 + limit // 8   # 1.5x the limit
    g = wr.Graph()
    x = g.input("x", (n,))
    y = x * 3
    exe = wr.compile(g, outputs=[(x * 2 + 1).sum(), y.max(), y.narrow(0, n - 3, 3)],
                     device=dev)
    a = np.ones(n, np.float32)
    a[-2] = 5
    t = time.perf_counter()
    s, mx, tail = exe.run({"x": a})
    secs = time.perf_counter() - t
    calls = exe.plan({}).program.calls
    print(json.dumps({
        "adapter": dev.info.name, "max_binding_size": limit,
        "max_buffer_size": dev.info.max_buffer_size, "tensor_bytes": 4 * n,
        "sum": float(s), "sum_expected": float(3 * n + 2), "max": float(mx), "max_expected": 15.0,
        "tail": tail.tolist(), "tail_expected": [3.0, 15.0, 3.0],
        "windowed_calls": sum(bool(c.windows) for c in calls), "calls": len(calls),
        "seconds_first_run": round(secs, 3)}, indent=1))


if __name__ == "__main__":
    main()
