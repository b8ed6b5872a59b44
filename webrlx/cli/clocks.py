"""The GPU's clock before a timing: every benchmark and probe runs its own work back to back
for WARM_S seconds first (hold_clocks), the torch and llama.cpp peers too."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# An NVIDIA GPU idle for ~3 s drops its SM clock to the floor (345 MHz on an H200,
# against 1980) and keeps it there through short bursts of work: under Dawn, 0.4 s of
# attention_flash after Pyodide's numpy reference ran at 345 MHz at 65% utilization, 5.6x its
# time at full clock (nvidia-smi beside it: bench/device_dawn.sh flashclock,
# bench/results/2026-11-27-h200-dawn-clock-after-idle.json). So every timing first runs its own
# work back to back for WARM_S seconds (the torch and llama.cpp peers too); the software tiers
# skip it (main_bench sets 0).
WARM_S = 1.0


def hold_clocks(fn: Callable[[], Any], sync: Callable[[], Any],
                seconds: float | None = None) -> int:
    """Run fn back to back, a sync after each batch, for `seconds` (WARM_S): the GPU's clock
    up before a timing. Returns the calls made."""
    seconds = WARM_S if seconds is None else seconds
    t, calls, n = time.perf_counter(), 0, 1
    while time.perf_counter() - t < seconds:
        for _ in range(n):
            fn()
        sync()
        calls += n
        n = min(2 * n, 64)
    return calls
