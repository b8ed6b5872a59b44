"""Autotuner: where the compiler offers kernel variants for a call (matmul tile sizes), time
each once on the device and keep the fastest, cached per adapter name — on disk natively
(~/.cache/webrlx/tune.json), in memory in the browser. Without a way to time (an async-only
browser), the compiler's default stands."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from ..compiler.program import KernelCall, Variant

CACHE_FILE = Path(os.path.expanduser("~")) / ".cache" / "webrlx" / "tune.json"
PREFER: str | None = None   # a variant name to use wherever offered (tests cover each kernel)
# False: never time, take the compiler's defaults ($WEBRLX_AUTOTUNE=0; the in-browser test
# session does this, where timing every variant of every new shape on SwiftShader took ~12 of
# its minutes; each variant still runs there through PREFER)
TIME_VARIANTS = os.environ.get("WEBRLX_AUTOTUNE") != "0"
_memory: dict[str, dict[str, str]] = {}      # adapter name -> tune key -> variant name
_loaded = False


def _cache() -> dict[str, dict[str, str]]:
    global _loaded
    if not _loaded and sys.platform != "emscripten":
        _loaded = True
        try:
            _memory.update(json.loads(CACHE_FILE.read_text()))
        except (OSError, ValueError):
            pass
    return _memory


def _save() -> None:
    if sys.platform == "emscripten":
        return
    try:
        CACHE_FILE.parent.mkdir(parents=True, exist_ok=True)
        CACHE_FILE.write_text(json.dumps(_memory, indent=1, sort_keys=True))
    except OSError:
        pass   # a read-only home: tuning still works, it is just not remembered


def choose(adapter: str, call: KernelCall, time_variant: Callable[[Variant], float | None]
           ) -> Variant:
    """Return the variant to run for call: cached, else the fastest measured, else default."""
    default = Variant(call.name, call.source, call.grid, call.overrides)
    if not call.variants:
        return default
    options = {v.name: v for v in [default, *call.variants]}
    if PREFER is not None:
        return options.get(PREFER, default)
    # the key names the options too: a release that adds a variant times the call again
    key = f"{call.tune_key} [{' '.join(sorted(options))}]"
    known = _cache().get(adapter, {}).get(key)
    if known in options:
        return options[known]
    if not TIME_VARIANTS:
        return default
    times = {name: time_variant(v) for name, v in options.items()}
    if any(t is None for t in times.values()):
        return default
    best = min(times, key=lambda name: times[name])
    _memory.setdefault(adapter, {})[key] = best
    _save()
    return options[best]


def timer(backend: Any, entries: list) -> Callable[[Variant], float | None]:
    """Return a function timing one variant's dispatch with these bind group entries."""
    from ..backends.base import Dispatch

    def time_variant(v: Variant) -> float | None:
        pipe = backend.pipeline(v.source, "main", v.overrides)
        dispatch = Dispatch(pipe, backend.bind_group(pipe, entries), v.grid)
        return backend.time_dispatch(dispatch)
    return time_variant
