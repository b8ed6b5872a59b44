"""One-line op checks: build a graph from a webrlx function, run it on a backend, and compare
with the same computation written in numpy (float64)."""
from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import webrlx as wr


def for_browser() -> bool:
    """Whether this session runs (or collects for) the in-browser backend suite: Pyodide, or
    the native collection of the node ids the browser must reproduce. Tests whose cases are
    each a compile of a large shader under SwiftShader keep a bounded slice there."""
    return sys.platform == "emscripten" or os.environ.get("WEBRLX_COLLECT_FOR_BROWSER") == "1"


def formats_taking_turns(formats: list[str], cases: list[tuple]) -> list[tuple]:
    """(fmt, *case) for every format and case natively. In the browser's bounded slice
    (for_browser) each case runs once, the formats taking turns: every kernel form and every
    format still compiles under Tint there, at 1 / len(formats) of the cost."""
    return [(f, *c) for i, c in enumerate(cases) for j, f in enumerate(formats)
            if not for_browser() or i % len(formats) == j]


def limited_device(binding_limit: int) -> Any:
    """A private GPU device (not the shared one) that plans with maxStorageBufferBindingSize
    lowered to binding_limit and maxBufferSize to 16x it: tests of what goes past the limits
    run fast on small tensors, through real windows (the device's true limits are larger)."""
    if sys.platform == "emscripten":
        from webrlx.backends.js_webgpu import create_backend
        dev = create_backend()
    else:
        from webrlx.backends import auto
        dev, why = auto._native_gpu()
        assert dev is not None, why
    dev.info.limits["max-storage-buffer-binding-size"] = binding_limit
    dev.info.limits["max-buffer-size"] = 16 * binding_limit
    return dev


def run_coroutine(coro: Any) -> Any:
    """Run a coroutine to completion: asyncio natively, JSPI's run_sync inside Pyodide."""
    if sys.platform == "emscripten":
        from pyodide.ffi import run_sync
        return run_sync(coro)
    return asyncio.run(coro)


def rand(*shape: int, seed: int = 0, low: float = -1.0, high: float = 1.0,
         dtype: Any = np.float32) -> np.ndarray:
    rng = np.random.default_rng(seed + 7919 * len(shape) + sum(shape))
    return rng.uniform(low, high, shape).astype(dtype)


def run_graph(backend: Any, fn: Callable, arrays: list[np.ndarray],
              params: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """Build fn over inputs shaped like arrays (params become graph params), run it once."""
    g = wr.Graph()
    args = [g.input(f"x{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
    pargs = {k: g.param(k, v.shape, v.dtype) for k, v in (params or {}).items()}
    out = fn(*args, **pargs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    exe = wr.compile(g, outputs=outs, device=backend)
    if params:
        exe.set_params(params)
    return exe.run({f"x{i}": a for i, a in enumerate(arrays)})


def check(backend: Any, fn: Callable, np_fn: Callable, *arrays: np.ndarray,
          rtol: float = 1e-5, atol: float = 1e-6, exact_dtype: bool = True) -> None:
    """Assert fn(webrlx tensors) matches np_fn(float64 numpy arrays) on backend."""
    got = run_graph(backend, fn, list(arrays))
    wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    want = np_fn(*wide)
    wants = list(want) if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(wants)
    for g, w in zip(got, wants):
        w = np.asarray(w)
        assert g.shape == w.shape, f"shape {g.shape} != numpy {w.shape}"
        if exact_dtype and w.dtype.kind != "f":
            assert g.dtype.kind == w.dtype.kind or w.dtype == np.int64, (g.dtype, w.dtype)
        if g.dtype == np.bool_ or g.dtype.kind in "iu":
            np.testing.assert_array_equal(g, w.astype(g.dtype))
        else:
            np.testing.assert_allclose(g.astype(np.float64), w, rtol=rtol, atol=atol)


def kernel_spy(monkeypatch: Any, module: Any) -> list[str]:
    """Record the name of every kernel a compiler module builds (its `kernel` function) while
    the test runs; return the list it fills."""
    used: list[str] = []
    real = module.kernel
    monkeypatch.setattr(module, "kernel",
                        lambda name, **slots: used.append(name) or real(name, **slots))
    return used


def force_regs_rows(monkeypatch: Any, min_n: int | None = None) -> list[str]:
    """Force the register-row kernels on every backend (lower_rows.REGS_ROWS_ON_SOFTWARE, and
    REGS_ROW_MIN_N lowered to min_n); return the list of kernels lower_rows builds."""
    from webrlx.compiler import lower_rows
    monkeypatch.setattr(lower_rows, "REGS_ROWS_ON_SOFTWARE", True)
    if min_n is not None:
        monkeypatch.setattr(lower_rows, "REGS_ROW_MIN_N", min_n)
    return kernel_spy(monkeypatch, lower_rows)


def force_subgroup_rows(monkeypatch: Any, backend: Any) -> tuple[int, list[int]]:
    """Probe the backend's subgroups (Backend.probe_subgroups: software adapters skip it by
    default) and let the row kernels reduce with them; return the subgroup size (0: none, or
    unchecked as in the browser) and the list of rows-per-workgroup for which
    lower_rows.row_reduce_slots picked the subgroup helper."""
    from webrlx.compiler import lower_rows
    size = 0 if backend.name == "reference" else backend.probe_subgroups()
    if backend.name != "reference":
        monkeypatch.setattr(backend.info, "subgroup_size", size)
    picked: list[int] = []
    real = lower_rows.row_reduce_slots

    def spy(L: Any, rpw: int, wg: int = 256) -> dict[str, str]:
        slots = real(L, rpw, wg)
        if slots:
            picked.append(rpw)
        return slots
    monkeypatch.setattr(lower_rows, "row_reduce_slots", spy)   # (attention's softmax too)
    return size, picked


def qkv_into_caches(g: Any, h: Any, p: dict[str, Any], fmts: tuple[str, str, str], k: int,
                    heads: int, kv: int, hd: int, cap: int, pos: Any, slots: int = 1,
                    base: float = 10000.0, factors: tuple[float, ...] = (), layer: str = ""
                    ) -> tuple[Any, ...]:
    """A decoder layer's attention inputs from h (B, S, k) through quantized p["wq"], p["wk"],
    p["wv"] (block formats fmts): q roped; k roped and v written into graph g's KV cache states
    "kc" / "vc" (slots, kv, cap, hd; their names suffixed with `layer`) at pos. Returns
    (q, kc, vc)."""
    from webrlx import nn
    b = h.shape[0]
    q = nn.rope(nn.qlinear(h, p["wq"], fmts[0], heads * hd, k).reshape(b, -1, heads, hd), pos,
                base, factors=factors)
    kr = nn.rope(nn.qlinear(h, p["wk"], fmts[1], kv * hd, k).reshape(b, -1, kv, hd), pos, base,
                 factors=factors)
    kc = nn.cache_write(g.state("kc" + layer, (slots, kv, cap, hd)), kr, pos)
    vc = nn.cache_write(g.state("vc" + layer, (slots, kv, cap, hd)),
                        nn.qlinear(h, p["wv"], fmts[2], kv * hd, k).reshape(b, -1, kv, hd), pos)
    return q, kc, vc


def rss_mb() -> float | None:
    """Host resident memory in MB, from /proc (None where there is none: not Linux)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError, AttributeError):
        return None


def check_last_logits(lm: Any, cases: list[dict], logits: np.ndarray, n: int) -> None:
    """The first n reference cases (a transformers fixture: ids, last logits): lm's last
    logits within 1e-3 of max |logit| of transformers'."""
    for case, want in list(zip(cases, logits))[:n]:
        lm.generate_ids(case["ids"], 1)
        got = lm.last_logits.numpy().reshape(-1)
        err = np.abs(got - want).max()
        assert err <= 1e-3 * np.abs(want).max(), (case["name"], err, np.abs(want).max())


def check_greedy(lm: Any, cases: list[dict], n: int, steps: int) -> None:
    """The first n reference cases: lm's first `steps` greedy tokens equal transformers'
    (to EOS where transformers produced it: generation stops there)."""
    for case in cases[:n]:
        want = case["greedy"][:steps]
        if lm.eos_id in want:
            want = want[:want.index(lm.eos_id) + 1]
        assert lm.generate_ids(case["ids"], steps) == want, case["name"]
