"""Autotuner: where the compiler offers kernel variants for a call (matmul tile sizes, GEMV
shapes), pick one. In order:
1. PREFER, a variant name forced wherever offered (tests run each kernel this way);
2. this adapter's own table (keyed by adapter name and driver, DeviceInfo.tune_name: a new
   driver is timed afresh): what an earlier run timed here, in ~/.cache/webrlx/tune.json.
   Natively that is a file on disk; in the browser the same path lives on an IndexedDB-backed
   folder that web/webrlx-boot.js mounts, so a page reload or a later visit finds it;
3. when timing is on, time each variant once on the device, keep the fastest and store it;
4. the table shipped in the wheel (webrlx/data/tune_tables.json: what tuning picked on an
   adapter family: SwiftShader (the browser's software WebGPU) and llvmpipe natively, NVIDIA
   under Dawn (Chrome's WebGPU) on an H100/H200; tools/make_tune_tables.py). Its keys name
   the variants a call offered when it was made; a call that now offers more keeps the pick
   of the largest set it still offers whole (the new variants wait for the next table);
5. the compiler's default (a heuristic by shape and adapter kind).
A call that binds a state (a KV cache a fused GEMV writes) is timed on stand-in buffers of
the state's size, so its trial runs never write a live cache; on software adapters such calls
keep the table's or the default pick (runtime/plan.TIME_STATE_CALLS).
Timing is on natively and OFF in the browser: on a page it would compile every variant and time
it on the critical path of the first run (52 s of a 70 s first MiniLM run on SwiftShader). Turn
it on there with `enable(True)` (e.g. in the background after a first result is shown); what it
learns is stored for the next visit.
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..compiler.program import KernelCall, Variant

CACHE_FILE = Path(os.path.expanduser("~")) / ".cache" / "webrlx" / "tune.json"
SHIPPED_FILE = Path(__file__).resolve().parents[1] / "data" / "tune_tables.json"
# a variant name to use wherever offered (tests cover each kernel); "*suffix": any variant
# whose name ends so (e.g. "*_tile4": every fused prefill's tiled kernel)
PREFER: str | None = None
IN_BROWSER = sys.platform == "emscripten"
# whether to time variants the tables do not know: natively yes ($WEBRLX_AUTOTUNE=0 turns it
# off), in the browser no (enable() turns it on)
TIME_VARIANTS = not IN_BROWSER and os.environ.get("WEBRLX_AUTOTUNE") != "0"
_memory: dict[str, dict[str, str]] = {}      # adapter name -> tune key -> variant name
_loaded = False
_shipped: dict[str, dict[str, str]] | None = None
# adapter families of the shipped table: a name containing the word selects the family
FAMILIES = ("swiftshader", "llvmpipe", "nvidia")


def enable(on: bool = True) -> None:
    """Time variants no table knows (on: slower first runs of new shapes, faster later ones)."""
    global TIME_VARIANTS
    TIME_VARIANTS = bool(on)


def table(adapter: str | None = None) -> dict[str, Any]:
    """What the tuner knows: {adapter: {tune key: variant}} (one adapter's when named)."""
    known = _cache()
    return dict(known.get(adapter, {})) if adapter is not None else \
        {a: dict(t) for a, t in known.items()}


def read_run(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A `tools/make_tune_tables.py --here` run's JSON ({adapter, table}) from a file: the
    whole file, or its last line (the run's stdout, logs before the JSON)."""
    text = Path(path).read_text()
    try:
        got = json.loads(text)
    except json.JSONDecodeError:
        got = json.loads(text.strip().splitlines()[-1])
    if not isinstance(got, dict) or not isinstance(got.get("table"), dict):
        raise ValueError(f"{path}: not a tune run's JSON (no 'table')")
    return got


def add_picks(adapter: str, picks: dict[str, str]) -> None:
    """Take picks ({tune key: variant}, e.g. a `tools/make_tune_tables.py --here` run's) as
    this adapter's own table, in memory (A/B runs of a table before it ships)."""
    _cache().setdefault(adapter, {}).update(picks)


def install_run(path: str | os.PathLike[str], adapter: str) -> int:
    """add_picks of the run in file `path` (read_run) as `adapter`'s table; returns how many
    (bench --tune, bench/engines.py --tune)."""
    picks = read_run(path)["table"]
    add_picks(adapter, picks)
    return len(picks)


def family(adapter: str) -> str | None:
    """The shipped table's family of an adapter name (None: no shipped table applies)."""
    low = adapter.lower()
    return next((f for f in FAMILIES if f in low), None)


def _cache() -> dict[str, dict[str, str]]:
    global _loaded
    if not _loaded:
        _loaded = True
        try:
            for adapter, picks in json.loads(CACHE_FILE.read_text()).items():
                _memory.setdefault(adapter, {}).update(picks)
        except (OSError, ValueError):
            pass
    return _memory


def _shipped_table(adapter: str) -> dict[str, str]:
    global _shipped
    if _shipped is None:
        try:
            _shipped = json.loads(SHIPPED_FILE.read_text())
        except (OSError, ValueError):
            _shipped = {}
    fam = family(adapter)
    return _shipped.get(fam, {}) if fam else {}


def _save() -> None:
    try:
        CACHE_FILE.parent.mkdir(parents=True, exist_ok=True)
        CACHE_FILE.write_text(json.dumps(_memory, indent=1, sort_keys=True))
    except OSError:
        return   # a read-only home: tuning still works, it is just not remembered
    if IN_BROWSER:
        _persist_browser_folder()


def _persist_browser_folder() -> Any:
    """Start flushing Pyodide's file system to IndexedDB (nothing happens where nothing is
    mounted there); return an asyncio future of its end, or None."""
    try:
        import asyncio

        import pyodide_js
        from pyodide.ffi import create_once_callable
        done = asyncio.get_event_loop().create_future()

        def finished(*_: Any) -> None:      # called later by JS: a once-callable proxy
            if not done.done():
                done.set_result(None)
        pyodide_js.FS.syncfs(False, create_once_callable(finished))
        return done
    except Exception:   # noqa: BLE001 - persistence is best effort; the table is in memory
        return None


async def persist_async() -> None:
    """Wait until the table is stored (the browser writes it to IndexedDB in the background:
    await this before a page reloads itself). Natively the file is already written."""
    if IN_BROWSER:
        done = _persist_browser_folder()
        if done is not None:
            await done


def key_of(call: KernelCall) -> str:
    """The table key of a call: its tune key and the variant names it offers (a release that
    adds a variant times the call again)."""
    names = [call.name, *(v.name for v in call.variants)]
    return f"{call.tune_key} [{' '.join(sorted(set(names)))}]"


def known(adapter: str, call: KernelCall) -> Variant | None:
    """The variant to run for call without timing anything; None: it would be timed."""
    default = Variant(call.name, call.source, call.grid, call.overrides)
    if not call.variants:
        return default
    options = {v.name: v for v in [default, *call.variants]}
    if PREFER is not None:
        if PREFER.startswith("*"):
            return next((v for n, v in options.items() if n.endswith(PREFER[1:])), default)
        return options.get(PREFER, default)
    key = key_of(call)
    pick = _cache().get(adapter, {}).get(key)
    if pick in options:
        return options[pick]
    return None if TIME_VARIANTS else _fallback(adapter, call)


def _fallback(adapter: str, call: KernelCall) -> Variant:
    """The shipped table's pick for this adapter's family, else the compiler's default.
    Where the call offers more variants than when the table was made (its exact key is
    missing), the pick of the largest variant set it still offers whole stands until the
    table is made again: the new variants are not chosen, the old pick is not lost."""
    offered = {v.name: v for v in options(call)}
    shipped = _shipped_table(adapter)
    pick = shipped.get(key_of(call))
    if pick is None:
        best = -1
        for key, name in shipped.items():
            tune_key, _, names = key.partition(" [")
            was = names.rstrip("]").split()
            if tune_key == call.tune_key and name in offered and len(was) > best and \
                    all(n in offered for n in was):
                pick, best = name, len(was)
    return offered.get(pick or "", options(call)[0])


def options(call: KernelCall) -> list[Variant]:
    """Every variant of a call, the default first."""
    return [Variant(call.name, call.source, call.grid, call.overrides), *call.variants]


def choose(adapter: str, call: KernelCall, time_variant: Callable[[Variant], float | None]
           ) -> Variant:
    """Return the variant to run for call: a table's pick, else the fastest measured, else the
    shipped table's, else the default."""
    pick = known(adapter, call)
    if pick is not None:
        return pick
    offered = {v.name: v for v in options(call)}
    times = {name: time_variant(v) for name, v in offered.items()}
    measured = {name: t for name, t in times.items() if t is not None}
    if len(measured) < len(times):
        return _fallback(adapter, call)
    best = min(measured, key=measured.__getitem__)
    _memory.setdefault(adapter, {})[key_of(call)] = best
    _save()
    return offered[best]


def timer(backend: Any, entries: list, cold: bool = False,
          fit: Callable[[Variant], Variant] | None = None
          ) -> Callable[[Variant], float | None]:
    """Return a function timing one variant's dispatch with these bind group entries (with
    the GPU's caches evicted before each when `cold`: Backend.time_dispatch); `fit` adapts a
    variant to the entries first (runtime.plan: read-only bindings that share a buffer with
    the output)."""
    from ..backends.base import Dispatch

    def time_variant(v: Variant) -> float | None:
        if fit is not None:
            v = fit(v)
        pipe = backend.pipeline(v.source, "main", v.overrides)
        dispatch = Dispatch(pipe, backend.bind_group(pipe, entries), v.grid)
        return backend.time_dispatch(dispatch, cold=cold)
    return time_variant
