"""Debug tools of an Executable: a divergence finder (validate), a NaN/Inf finder
(check_finite), per-kernel GPU time (profile) and a kernel dump (dump).

validate and check_finite run the plan kernel by kernel (one submit each) and read back every
node value right after the kernel that completes it, so the first wrong node is found before
later kernels reuse its memory. All are Steps (steps.py): one body for the sync and async forms.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import dtype as dt
from ..backends.base import Copy, quantized
from ..graph import Graph, Node
from .engines import GpuEngine, ReferenceEngine
from .plan import Plan
from .steps import ReadRequest, Steps, no_reads


class ValidationError(AssertionError):
    """A kernel's output differs from the numpy reference of the node it computes."""


def _where(graph: Graph, node_id: int) -> str:
    """Where a node sits: itself, what feeds it and what reads it."""
    node = graph.nodes[node_id]
    lines = [f"  node   {node}"]
    lines += [f"  input  {graph.nodes[i]}" for i in node.inputs]
    lines += [f"  used by {n}" for n in graph.nodes if node_id in n.inputs][:4]
    return "\n".join(lines)


@dataclass
class Divergence:
    """The first node whose kernel output differs from the reference."""
    node: Node
    shape: tuple[int, ...]            # its bound shape
    kernel: str                       # the call's name, e.g. "elementwise[add]"
    call: int                         # its index in the plan
    max_error: float
    at: tuple[int, ...]               # index of the largest error
    got: float
    want: float
    where: str


@dataclass
class ValidationReport:
    """What validate() found: ok, the nodes compared, and the first divergence if any."""
    checked: int
    first: Divergence | None = None
    device: str = ""

    @property
    def ok(self) -> bool:
        return self.first is None

    def raise_if_diverged(self) -> None:
        if self.first is not None:
            raise ValidationError(str(self))

    def __str__(self) -> str:
        if self.first is None:
            return f"validate: {self.checked} node values match the numpy reference ({self.device})"
        d = self.first
        return (f"validate: node %{d.node.id} ({d.node.op}, shape {d.shape}, {d.node.dtype}) "
                f"diverges in kernel {d.call} '{d.kernel}' on {self.device}: max |error| "
                f"{d.max_error:.3g} at {d.at} (got {d.got:.6g}, reference {d.want:.6g}); "
                f"{self.checked} earlier values matched\n{d.where}")


@dataclass
class NonFinite:
    """The first node (in run order) whose value holds NaN or Inf."""
    node: Node
    kernel: str
    count: int                        # NaN/Inf elements
    at: tuple[int, ...]               # the first of them
    value: float
    where: str

    def __str__(self) -> str:
        return (f"check_finite: node %{self.node.id} ({self.node.op}) holds {self.count} "
                f"NaN/Inf values (first {self.value} at {self.at}), computed by "
                f"'{self.kernel}'\n{self.where}")


@dataclass
class Profile:
    """Per-kernel time of one run: rows of (index, kernel (the variant that ran), node, op,
    grid, ms)."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    source: str = ""                  # "timestamp-query", "host" or "numpy"
    device: str = ""

    @property
    def total_ms(self) -> float:
        return sum(r["ms"] for r in self.rows)

    def by_kernel(self) -> dict[str, float]:
        """Milliseconds summed by kernel name, largest first."""
        out: dict[str, float] = {}
        for r in self.rows:
            out[r["kernel"]] = out.get(r["kernel"], 0.0) + r["ms"]
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def __str__(self) -> str:
        head = f"{'#':>4} {'kernel':<28} {'node':>6} {'op':<14} {'grid':<16} {'ms':>9}"
        lines = [f"profile on {self.device} ({self.source}), total {self.total_ms:.3f} ms",
                 head]
        for r in self.rows:
            lines.append(f"{r['index']:>4} {r['kernel']:<28} {'%' + str(r['node']):>6} "
                         f"{r['op']:<14} {str(r['grid']):<16} {r['ms']:>9.4f}")
        return "\n".join(lines)


# -- walking a plan kernel by kernel -----------------------------------------------------------
def _owners(plan: Plan) -> dict[int, int]:
    """Buffer id -> the node whose value it holds (the latest node when several alias it)."""
    owners: dict[int, int] = {}
    for nid, buf in plan.program.values.items():
        owners[buf.id] = max(owners.get(buf.id, -1), nid)
    return owners


def _decode(raw: memoryview, shape: tuple[int, ...], d: dt.DType, f16: bool) -> np.ndarray:
    sd = dt.storage_np(d, f16)
    n = int(np.prod(shape))
    return np.frombuffer(raw, np.uint8)[:n * sd.itemsize].view(sd).reshape(shape).astype(
        d.np_dtype)


def walk_kernels(graph: Graph, plan: Plan, before: list[Copy],
                 visit: Callable[[int, int, np.ndarray], bool]) -> Steps[None]:
    """Submit the plan's kernels one at a time; after the last kernel writing a node's buffer,
    read the node's value and call visit(call index, node id, value); stop when it says so."""
    program, backend = plan.program, plan.backend
    last_write = {c.writes.id: i for i, c in enumerate(program.calls)}
    owners = _owners(plan)
    for i, (call, dispatch) in enumerate(zip(program.calls, plan.dispatches)):
        nid = owners.get(call.writes.id) if last_write[call.writes.id] == i else None
        copies = []
        if nid is not None:
            src, off = plan.where[call.writes.id]
            nbytes = max(4, -(-call.writes.nbytes // 4) * 4)
            staging = backend.staging(nbytes)
            copies = [Copy(src, off, staging, 0, nbytes)]
        backend.submit([dispatch], copies, before if i == 0 else [])
        if nid is None:
            continue
        raw = yield ReadRequest(backend, staging, 0, nbytes)
        value = _decode(raw, program.shapes[nid], graph.nodes[nid].dtype, plan.f16)
        if visit(i, nid, value):
            return


def _reference_values(engine: GpuEngine, params: Mapping[str, np.ndarray],
                      arrays: Mapping[str, Any], env: Mapping[str, int],
                      states: Mapping[str, np.ndarray]) -> dict[int, np.ndarray]:
    """Every node's numpy value, with the params and (the device's current) states."""
    ref = ReferenceEngine(engine.graph, engine.outputs, engine.fuse, None)
    for name, arr in params.items():
        ref.set_param(name, arr)
    ref.states.update(states)
    return ref.values(arrays, env, keep_all=True)


def _compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float
             ) -> tuple[float, tuple[int, ...]] | None:
    """(max error, where) when got diverges from want, else None. NaN must match NaN."""
    if got.shape != want.shape:
        return float("inf"), ()
    if got.dtype.kind != "f":
        bad = got != want.astype(got.dtype)
        if not bad.any():
            return None
        at = np.unravel_index(int(np.argmax(bad)), got.shape)
        return float(abs(float(got[at]) - float(want[at]))), tuple(int(a) for a in at)
    g, w = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(w)
    scale = max(1.0, float(np.abs(w[finite]).max())) if finite.any() else 1.0
    with np.errstate(invalid="ignore"):
        off = np.where(np.isnan(w), ~np.isnan(g), g != w)       # non-finite want: exact
        err = np.where(finite, np.abs(g - w), np.where(off, np.inf, 0.0))
    err = np.where(np.isnan(err), np.inf, err)
    bad = err > atol * scale + rtol * np.where(finite, np.abs(w), 0.0)
    if not bad.any():
        return None
    at = np.unravel_index(int(np.argmax(np.where(bad, err, -1.0))), got.shape)
    return float(err[at]), tuple(int(a) for a in at)


def validate_steps(engine: Any, params: Mapping[str, np.ndarray], device: str,
                   arrays: Mapping[str, Any], env: Mapping[str, int], rtol: float = 2e-3,
                   atol: float = 1e-4) -> Steps[ValidationReport]:
    """Steps of validate() on engine, holding params, of the device named device: see
    Executable.validate."""
    if not isinstance(engine, GpuEngine):   # the reference device is the oracle itself
        engine.values(arrays, env, keep_all=True)
        return (yield from no_reads(ValidationReport(0, None, device)))
    states = {}
    graph = engine.graph
    for name in graph.states:                # the reference starts where the device is
        states[name] = yield from engine.read_state(name)
    want = _reference_values(engine, params, arrays, env, states)
    plan, before = engine.prepare(arrays, env)
    report = ValidationReport(0, None, device)

    def visit(i: int, nid: int, got: np.ndarray) -> bool:
        if nid not in want:
            return False
        bad = _compare(got, want[nid], rtol, atol)
        if bad is None:
            report.checked += 1
            return False
        err, at = bad
        report.first = Divergence(graph.nodes[nid], tuple(got.shape),
                                  plan.program.calls[i].name, i, err, at,
                                  float(got[at]) if at else float("nan"),
                                  float(want[nid][at]) if at else float("nan"),
                                  _where(graph, nid))
        return True
    yield from walk_kernels(graph, plan, before, visit)
    return report


def check_finite_steps(engine: Any, arrays: Mapping[str, Any], env: Mapping[str, int]
                       ) -> Steps[NonFinite | None]:
    """Steps of check_finite() on engine: see Executable.check_finite. On a GPU the caller
    passes the engine of an unfused twin (one kernel per node), so the op that makes the first
    NaN/Inf is named exactly, not the fused kernel it would be part of."""
    g = engine.graph
    for name, arr in arrays.items():          # a fed NaN is found at its input
        value = np.asarray(arr.numpy() if hasattr(arr, "numpy") else arr)
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            return (yield from no_reads(_non_finite(g, g.inputs[name], "input", value)))
    if not isinstance(engine, GpuEngine):
        values = engine.values(arrays, env, keep_all=True)
        for nid in sorted(values):
            v = np.asarray(values[nid])
            if v.dtype.kind == "f" and not np.isfinite(v).all():
                return (yield from no_reads(_non_finite(g, nid, "numpy reference", v)))
        return None
    plan, before = engine.prepare(arrays, env)
    found: list[NonFinite] = []

    def visit(i: int, nid: int, got: np.ndarray) -> bool:
        if got.dtype.kind == "f" and not np.isfinite(got).all():
            found.append(_non_finite(g, nid, plan.program.calls[i].name, got))
            return True
        return False
    yield from walk_kernels(g, plan, before, visit)
    return found[0] if found else None


def _non_finite(g: Graph, nid: int, kernel: str, value: np.ndarray) -> NonFinite:
    bad = ~np.isfinite(value)
    at = tuple(int(a) for a in np.unravel_index(int(np.argmax(bad)), value.shape)) \
        if value.ndim else ()
    return NonFinite(g.nodes[nid], kernel, int(bad.sum()), at, float(value[at]),
                     _where(g, nid))


def profile_steps(engine: Any, device: str, arrays: Mapping[str, Any], env: Mapping[str, int],
                  repeats: int = 3) -> Steps[Profile]:
    """Steps of profile() on engine, of the device named device: see Executable.profile."""
    if not isinstance(engine, GpuEngine):
        return (yield from no_reads(_profile_reference(engine, arrays, env, device)))
    plan, before = engine.prepare(arrays, env)
    backend = plan.backend
    calls = plan.program.calls
    ts = backend.timestamps(len(calls))
    best = [float("inf")] * len(calls)
    if ts is not None:
        period = 1e-6                          # timestamps are in nanoseconds
        for _ in range(max(1, repeats)):
            backend.submit(plan.dispatches, [], before, timestamps=ts)
            raw = yield ReadRequest(backend, ts.readback, 0, 16 * len(calls))
            t = np.frombuffer(raw, np.uint64).astype(np.int64)
            if quantized(t):                   # a browser's rounded clock: time on the host
                ts, best = None, [float("inf")] * len(calls)
                break
            for i in range(len(calls)):
                best[i] = min(best[i], max(0, int(t[2 * i + 1] - t[2 * i])) * period)
    if ts is not None:
        source = "timestamp-query"
    else:        # host-timed: one dispatch, then a 4-byte copy and read that wait for it
        src, probe = backend.create_buffer(4, "storage"), backend.staging(4)

        def timed(dispatches: list) -> Steps[float]:
            t0 = time.perf_counter()
            backend.submit(dispatches, [Copy(src, 0, probe, 0, 4)], before)
            yield ReadRequest(backend, probe, 0, 4)
            return (time.perf_counter() - t0) * 1e3
        for _ in range(max(1, repeats)):
            empty = yield from timed([])
            for i, d in enumerate(plan.dispatches):
                ms = yield from timed([d])
                best[i] = min(best[i], max(0.0, ms - empty))
        source = "host"
    rows = [{"index": i, "kernel": plan.ran[i], "node": c.node,
             "op": engine.graph.nodes[c.node].op if c.node >= 0 else "", "grid": c.grid,
             "ms": best[i]} for i, c in enumerate(calls)]
    return Profile(rows, source, device)


def _profile_reference(engine: Any, arrays: Mapping[str, Any], env: Mapping[str, int],
                       device: str) -> Profile:
    t0 = time.perf_counter()
    engine.values(arrays, env, keep_all=True)
    ms = (time.perf_counter() - t0) * 1e3
    return Profile([{"index": 0, "kernel": "interpret", "node": -1, "op": "(all)",
                     "grid": (), "ms": ms}], "numpy", device)


def dump(graph: Graph, plan: Plan, directory: Path) -> list[Path]:
    """Write each kernel of graph's plan as NNN_<name>.wgsl with a header, and schedule.txt;
    return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, c in enumerate(plan.program.calls):
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in c.name)
        path = directory / f"{i:03d}_{safe}.wgsl"
        node = graph.nodes[c.node] if c.node >= 0 else None
        binds = ", ".join(f"{n}=#{b.id} ({b.kind}, {b.nbytes} B)"
                          for n, b in zip(c.binding_names, c.buffers))
        header = [f"// webrlx dump: call {i} '{c.name}' (shader {c.shader or '-'})",
                  f"// node: {node}" if node else "// node: -",
                  f"// grid: {c.grid}",
                  f"// overrides: {json.dumps(c.overrides, sort_keys=True)}",
                  f"// params: {json.dumps(c.args, sort_keys=True, default=str)}",
                  f"// bindings: {binds}", ""]
        path.write_text("\n".join(header) + c.source)
        paths.append(path)
    schedule = directory / "schedule.txt"
    schedule.write_text(plan.program.schedule() + "\n")
    return paths + [schedule]
