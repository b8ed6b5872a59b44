"""Benchmarks printed as JSON: webrlx beside a reference measured in the same run
(numpy on the CPU; torch on CUDA where present).
`python -m webrlx bench [--quick | --full] [--only K]`; a progress line per case on stderr.
`--only llm` times a language model's generation (webrlx/cli/bench_llm.py).

Sizes (TIERS): GPUs run the full sizes by default; software adapters (lavapipe, SwiftShader)
and the numpy reference device run the "cpu" tier, which finishes in minutes on 2 cores;
`--full` runs the full sizes anywhere, `--quick` the smallest.

Method: webrlx runs a compiled executable with inputs already on the device; `iters` runs are
submitted back to back and synchronized once at the end (a 4-byte readback), `iters` doubled
until a batch takes 20 ms; the time per run is the median over `repeats` such batches, after a
warm-up. torch: the op in a loop, then
torch.cuda.synchronize(), same batching. numpy: the op in a loop.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import webrlx as wr
from webrlx.backends.base import Copy

from . import clocks

MIN_BATCH_S = 0.02    # grow a batch until it runs this long: one sync's cost stays < ~2% of it
T0 = time.perf_counter()

# Case sizes per tier: square matmul sizes (plus a GEMV at the largest), f32 and f16,
# (iters, repeats), row op shapes, attention sequence lengths (1 x 12 heads x seq x 64), MiniLM
# (batch, seq), and whether training runs its small models. On lavapipe (2 cores, shared) the
# cpu tier took 8.6 min with f16 at 1024, which alone took 3.9 (f16 is emulated there).
TIERS: dict[str, dict[str, Any]] = {
    "quick": {"sizes": [128, 256, 512], "f16_sizes": [128, 256, 512], "iters": (3, 3),
              "rows": [(512, 384), (1024, 128)], "seqs": [64, 128], "minilm": [(1, 16)],
              "train_quick": True},
    "cpu": {"sizes": [256, 512, 1024], "f16_sizes": [256, 512], "iters": (3, 3),
            "rows": [(4096, 384), (1024, 1024)], "seqs": [128, 256], "minilm": [(1, 128)],
            "train_quick": True},
    "full": {"sizes": [512, 1024, 2048, 4096], "f16_sizes": [512, 1024, 2048, 4096],
             "iters": (10, 5), "rows": [(4096, 384), (6144, 512), (32, 49152), (4096, 4096)],
             "seqs": [128, 512, 2048], "minilm": [(1, 128), (32, 128)], "train_quick": False},
}


def progress(msg: str) -> None:
    """One line on stderr (stdout stays the JSON): seconds since start and what runs next."""
    print(f"[bench {time.perf_counter() - T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


def _time(fn: Callable[[], Any], sync: Callable[[], Any], iters: int, repeats: int,
          warm_s: float | None = None) -> float:
    """Seconds per call of fn: the median over `repeats` batches of back-to-back calls ended
    by one sync. A batch has at least `iters` calls, more (doubling, up to 4096) until it takes
    MIN_BATCH_S: with 10 calls of a 15 us kernel, the one readback that ends the batch was half
    of the figure (H100, bench/probes/submit_probe.py), and natively a 4-byte readback costs ~0.4 ms
    (H200, wgpu-py's read_buffer), 8% of a 5 ms batch. clocks.WARM_S of calls go first
    (hold_clocks)."""
    fn()
    sync()
    clocks.hold_clocks(fn, sync, warm_s)
    while iters < 4096:
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        if time.perf_counter() - t >= MIN_BATCH_S:
            break
        iters *= 2
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        samples.append((time.perf_counter() - t) / iters)
    return statistics.median(samples)


def _submit_and_sync(exe: wr.Executable, feeds: dict[str, np.ndarray]
                     ) -> tuple[Callable[[], Any], Callable[[], Any], float | None]:
    """exe's run as (submit, sync, warm seconds): its dispatches submitted with inputs already
    on the device, a sync that waits for them, and the warm-up's seconds (0 on software
    adapters and the reference device, which has no plan: there a submit is a whole run; None:
    clocks.WARM_S)."""
    exe.run(feeds)                       # compile, upload inputs, warm up
    plan = exe.last_plan
    if plan is None:                     # the reference device: whole runs
        return (lambda: exe.run(feeds)), (lambda: None), 0.0
    backend = plan.backend

    # the batch's end: 4 bytes of the first output copied and read back (queue order makes it
    # wait for every run). The whole output copied there (as before) cost 1.3 ms at 64 MB on
    # an H200 (its staging buffer is host memory), a quarter of a 5 ms batch.
    first = plan.copies[0]
    probe = Copy(first.src, first.src_offset, first.dst, first.dst_offset, min(4, first.nbytes))

    def sync() -> None:
        backend.submit([], [probe])
        backend.read_buffer(plan.staging, 0, 4)
    return (lambda: backend.submit(plan.dispatches)), sync, \
        (0.0 if backend.info.software else None)


def time_executable(exe: wr.Executable, feeds: dict[str, np.ndarray], iters: int,
                    repeats: int) -> float:
    """Seconds per run of exe on the device (inputs uploaded once, no output readback)."""
    submit, sync, warm = _submit_and_sync(exe, feeds)
    return _time(submit, sync, iters, repeats, warm)


def warm_executable(exe: wr.Executable, feeds: dict[str, np.ndarray],
                    seconds: float | None = None) -> None:
    """exe's runs back to back for `seconds` (clocks.WARM_S; none on software adapters): the
    GPU's clock up before a profile() or another timing of it (see clocks.hold_clocks)."""
    submit, sync, warm = _submit_and_sync(exe, feeds)
    clocks.hold_clocks(submit, sync, warm if seconds is None else seconds)


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


# --no-ref: the reference is not timed (ref_ms None). Inside Pyodide (the Dawn runner) numpy is
# the only reference, without BLAS and slow (a 1024^3 f16 matmul case took 94 s on the GPU
# machine), and its figures are no peer for a GPU: compare with a native run's torch instead.
NO_REF = False


def _ref_timer(fn_np: Callable, fn_torch: Callable | None, arrays: list[np.ndarray],
               iters: int, repeats: int, dtype: str) -> dict[str, Any]:
    if NO_REF:
        return {"reference": "none (--no-ref)", "ref_ms": None}
    torch = _torch()
    if torch is not None and torch.cuda.is_available() and fn_torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        tdt = torch.float16 if dtype == "float16" else torch.float32
        ts = [torch.from_numpy(a).to("cuda", tdt) if a.dtype.kind == "f" else
              torch.from_numpy(a).to("cuda") for a in arrays]
        sec = _time(lambda: fn_torch(*ts), torch.cuda.synchronize, iters, repeats)
        return {"reference": f"torch {torch.__version__} cuda {dtype}"
                             f"{' (TF32 off)' if dtype == 'float32' else ''}", "ref_ms": sec * 1e3}
    sec = _time(lambda: fn_np(*arrays), lambda: None, max(1, iters // 4), repeats, 0.0)
    return {"reference": f"numpy {np.__version__} cpu", "ref_ms": sec * 1e3}


def _case(name: str, build: Callable, arrays: list[np.ndarray], fn_np: Callable,
          fn_torch: Callable | None, flops: float, iters: int, repeats: int,
          dtype: str = "float32", fuse: bool = True) -> dict[str, Any]:
    progress(f"{name} {dtype}")
    g = wr.Graph()
    ins = [g.input(f"x{i}", a.shape, a.dtype) for i, a in enumerate(arrays)]
    exe = wr.compile(g, outputs=[build(*ins)], fuse=fuse)
    feeds = {f"x{i}": a for i, a in enumerate(arrays)}
    sec = time_executable(exe, feeds, iters, repeats)
    row: dict[str, Any] = {"case": name, "dtype": dtype, "webrlx_ms": sec * 1e3}
    row.update(_ref_timer(fn_np, fn_torch, arrays, iters, repeats, dtype))
    ref = row["ref_ms"]
    row["ratio_vs_ref"] = ref / row["webrlx_ms"] if ref else None   # > 1: webrlx is faster
    if flops:
        row["webrlx_gflops"] = flops / sec / 1e9
        row["ref_gflops"] = flops / (ref / 1e3) / 1e9 if ref else None
    row["dispatches"] = len(exe.last_plan.dispatches) if exe.last_plan else 0
    return row


def matmul_cases(sizes: list[int], dtype: str, iters: int, repeats: int) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    shapes = [((n, n), (n, n)) for n in sizes] + [((1, sizes[-1]), (sizes[-1], sizes[-1]))]
    for a_shape, b_shape in shapes:
        a = rng.standard_normal(a_shape).astype(dtype)
        b = rng.standard_normal(b_shape).astype(dtype)
        m, k = a_shape
        n = b_shape[1]
        rows.append(_case(f"matmul {m}x{k}x{n}", lambda x, y: x @ y, [a, b], np.matmul,
                          lambda x, y: x @ y, 2.0 * m * n * k, iters, repeats, dtype))
    return rows


def f16_speedups(cases: list[dict[str, Any]]) -> None:
    """Give each float16 matmul row `speedup_vs_webrlx_float32`: webrlx's own float32 time for
    the same shape over its float16 time (the issue's f16 target is a ratio to webrlx f32)."""
    f32 = {c["case"]: c["webrlx_ms"] for c in cases if c.get("dtype") == "float32"}
    for c in cases:
        if c.get("dtype") == "float16" and c["case"] in f32:
            c["speedup_vs_webrlx_float32"] = f32[c["case"]] / c["webrlx_ms"]


def io_case(n: int, repeats: int) -> dict[str, Any]:
    """A whole `exe.run` of an n x n x n f32 matmul with numpy in and out (uploads, the
    matmul, the readback into a new array), beside torch doing the same job with its copies:
    torch.from_numpy(...).cuda() for both inputs, the matmul, .cpu().numpy() (numpy's matmul
    where there is no CUDA)."""
    progress(f"exe.run numpy in/out matmul {n}x{n}x{n}")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    g = wr.Graph()
    x, y = g.input("a", (n, n)), g.input("b", (n, n))
    exe = wr.compile(g, outputs=[x @ y])
    feeds = {"a": a, "b": b}
    sec = _time(lambda: exe.run(feeds), lambda: None, 1, repeats)
    row: dict[str, Any] = {"case": f"exe.run numpy in/out matmul {n}x{n}x{n}",
                           "dtype": "float32", "webrlx_ms": sec * 1e3}
    row["dispatches"] = len(exe.last_plan.dispatches) if exe.last_plan else 0
    if NO_REF:              # (inside Pyodide numpy's 4096^3 matmul, without BLAS, takes minutes)
        row.update(reference="none (--no-ref)", ref_ms=None, ratio_vs_ref=None)
        return row
    torch = _torch()
    if torch is not None and torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = False

        def job() -> np.ndarray:
            return (torch.from_numpy(a).cuda() @ torch.from_numpy(b).cuda()).cpu().numpy()
        ref = _time(job, torch.cuda.synchronize, 1, repeats)
        row["reference"] = f"torch {torch.__version__} cuda float32 (TF32 off), H2D + D2H"
    else:
        ref = _time(lambda: a @ b, lambda: None, 1, repeats)
        row["reference"] = f"numpy {np.__version__} cpu"
    row["ref_ms"] = ref * 1e3
    row["ratio_vs_ref"] = row["ref_ms"] / row["webrlx_ms"]
    return row


def elementwise_chain(n_nodes: int, iters: int, repeats: int, fuse: bool) -> dict[str, Any]:
    """100 dependent small elementwise nodes: host cost per dispatch (unfused: 100 kernels)."""
    def build(x: wr.Tensor) -> wr.Tensor:
        for i in range(n_nodes):
            x = x * 1.0001 if i % 2 else x + 0.5
        return x
    a = np.ones(1024, np.float32)

    def fn_np(x: np.ndarray) -> np.ndarray:
        for i in range(n_nodes):
            x = x * 1.0001 if i % 2 else x + 0.5
        return x
    row = _case(f"elementwise chain {n_nodes} nodes{'' if fuse else ' (unfused)'}", build, [a],
                fn_np, fn_np, 0, iters, repeats, fuse=fuse)
    row["us_per_dispatch"] = row["webrlx_ms"] * 1e3 / max(row["dispatches"], 1)
    return row


def row_op_cases(shapes: list[tuple[int, int]], iters: int, repeats: int) -> list[dict]:
    """softmax, layer_norm and rms_norm over rows at transformer sizes."""
    rng = np.random.default_rng(0)
    rows = []

    def np_sm(a: np.ndarray) -> np.ndarray:
        e = np.exp(a - a.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def np_ln(a: np.ndarray) -> np.ndarray:
        return (a - a.mean(-1, keepdims=True)) / np.sqrt(a.var(-1, keepdims=True) + 1e-5)

    def np_rms(a: np.ndarray) -> np.ndarray:
        return a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6)

    def torch_ln(t: Any) -> Any:
        import torch
        return torch.nn.functional.layer_norm(t, t.shape[-1:], eps=1e-5)

    def torch_rms(t: Any) -> Any:
        import torch
        return torch.nn.functional.rms_norm(t, t.shape[-1:], eps=1e-6)
    for m, n in shapes:
        x = rng.standard_normal((m, n)).astype(np.float32)
        rows.append(_case(f"softmax {m}x{n}", lambda t: t.softmax(-1), [x], np_sm,
                          lambda t: t.softmax(-1), 0, iters, repeats))
        rows.append(_case(f"layer_norm {m}x{n}", lambda t: wr.nn.layer_norm(t, eps=1e-5), [x],
                          np_ln, torch_ln, 0, iters, repeats))
        rows.append(_case(f"rms_norm {m}x{n}", lambda t: wr.nn.rms_norm(t, eps=1e-6), [x],
                          np_rms, torch_rms, 0, iters, repeats))
    return rows


def attention_cases(seqs: list[int], iters: int, repeats: int, dtype: str = "float32"
                    ) -> list[dict]:
    """Fused attention, batch 1, 12 heads, head dim 64, vs torch SDPA / numpy (in dtype)."""
    rows = []
    rng = np.random.default_rng(0)
    for s in seqs:
        q, k, v = (rng.standard_normal((1, 12, s, 64)).astype(dtype) for _ in range(3))

        def np_attn(q, k, v):
            sc = q @ np.swapaxes(k, -1, -2) / 8.0
            e = np.exp(sc - sc.max(-1, keepdims=True))
            return (e / e.sum(-1, keepdims=True)) @ v

        def torch_attn(q, k, v):
            import torch
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        rows.append(_case(f"attention 1x12x{s}x64", wr.nn.attention, [q, k, v], np_attn,
                          torch_attn, 4.0 * 12 * s * s * 64, iters, repeats, dtype))
    return rows


def minilm_cases(iters: int, repeats: int, shapes: list[tuple[int, int]],
                 dtype: str = "float32") -> list[dict]:
    """MiniLM end to end on synthetic token ids (batch x seq), beside sentence-transformers on
    torch CUDA where present, in the same dtype (float16: minilm.load(dtype="float16") and the
    torch model .half()); bench/minilm.py adds onnxruntime and an accuracy check."""
    progress(f"minilm {dtype}: load")
    from ..models import minilm
    from ..models.assets import minilm_dir
    try:
        enc = minilm.load(dtype=dtype)
    except FileNotFoundError as e:
        return [{"case": "minilm", "error": str(e)}]
    torch, st = _torch(), None
    if torch is not None and torch.cuda.is_available():
        from sentence_transformers import SentenceTransformer
        st = SentenceTransformer(str(minilm_dir()), device="cuda").eval()
        st = st.half() if dtype == "float16" else st
    rows = []
    rng = np.random.default_rng(0)
    for b, s in shapes:
        progress(f"minilm {b}x{s} {dtype}")
        ids = [[101] + list(rng.integers(1000, 29000, s - 2)) + [102] for _ in range(b)]
        feeds = enc.feeds(ids)
        row: dict[str, Any] = {"case": f"minilm {b}x{s}", "dtype": dtype,
                               "webrlx_ms": time_executable(enc.executable, feeds, iters,
                                                            repeats) * 1e3,
                               "dispatches": len(enc.executable.last_plan.dispatches)
                               if enc.executable.last_plan else 0}
        if st is not None:
            inp = {k: torch.from_numpy(feeds[k].astype(np.int64)).cuda()
                   for k in ("input_ids", "attention_mask", "token_type_ids")}
            with torch.inference_mode():
                sec = _time(lambda: st(inp), torch.cuda.synchronize,  # noqa: B023 - used now
                            iters, repeats)
            row.update({"reference": f"sentence-transformers torch {torch.__version__} cuda "
                                     f"eager {dtype}", "ref_ms": sec * 1e3,
                        "ratio_vs_ref": sec * 1e3 / row["webrlx_ms"]})
        rows.append(row)
    return rows


def peer_tinygrad(sizes: list[int], iters: int, repeats: int) -> list[dict]:
    """tinygrad's WEBGPU backend on the same matmuls (bench/peer_tinygrad.py, a subprocess)."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    script = Path(__file__).resolve().parents[2] / "bench" / "peer_tinygrad.py"
    if not script.is_file():
        return [{"peer": "tinygrad", "error": f"{script} not found (run from a checkout)"}]
    proc = subprocess.run([sys.executable, str(script), ",".join(map(str, sizes)), str(iters),
                           str(repeats)], capture_output=True, text=True, timeout=900)
    if proc.returncode:
        return [{"peer": "tinygrad", "error": proc.stderr[-2000:]}]
    return json.loads(proc.stdout)


def main_bench(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m webrlx bench")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the smallest sizes (a smoke run)")
    size.add_argument("--full", action="store_true", help="the full sizes, also on software "
                      "adapters and the reference device (their default is the cpu tier)")
    p.add_argument("--only", default="",
                   help="comma list: matmul,f16 (on GPU tiers also f16 attention and MiniLM),"
                   "chain,io,rows,attention,minilm,train; llm (a language model's decode, "
                   "prefill and batch: only when named)")
    p.add_argument("--peer", default="", help="tinygrad: its WEBGPU backend, same run; "
                   "llamacpp: llama.cpp on the llm case's file ($LLAMACPP_SO)")
    p.add_argument("--llm-model", default=None, help="the llm case's GGUF (default: SmolLM2)")
    p.add_argument("--no-ref", action="store_true", help="do not time the reference (torch or "
                   "numpy): webrlx's figures only (inside Pyodide, where numpy is no peer)")
    p.add_argument("--tune", metavar="FILE", help="a tools/make_tune_tables.py --here JSON: "
                   "installed as this adapter's autotune picks first (a table's A/B before it "
                   "ships)")
    p.add_argument("--browser", action="store_true", help="MiniLM in headless Chromium beside "
                   "onnxruntime-web (bench --browser --help)")
    if argv and "--browser" in argv:
        from .bench_browser import main as browser_main
        return browser_main([a for a in argv if a != "--browser"])
    args = p.parse_args(argv or [])
    global NO_REF
    NO_REF = args.no_ref
    dev = wr.device()
    only = set(filter(None, args.only.split(",")))
    cpu = dev.info.software or dev.info.backend == "reference"
    if cpu:
        clocks.WARM_S = 0.0         # (no GPU clock to raise: minutes saved on 2 cores)
    tier_name = "quick" if args.quick else "full" if args.full or not cpu else "cpu"
    tier = TIERS[tier_name]
    sizes, (iters, repeats) = tier["sizes"], tier["iters"]
    progress(f"{dev.info.name}: the {tier_name} tier"
             + (" (--full for the GPU sizes)" if tier_name == "cpu" else ""))
    out: dict[str, Any] = {"adapter": dev.info.name, "backend": dev.info.backend,
                           "tier": tier_name,
                           "method": __doc__.split("Method: ")[1].strip(), "cases": []}
    if args.tune:
        from ..runtime import autotune
        out["tune"] = {"file": args.tune,
                       "entries": autotune.install_run(args.tune, dev.info.tune_name)}
    if not only or "matmul" in only:
        out["cases"] += matmul_cases(sizes, "float32", iters, repeats)
    if (not only or "f16" in only) and dev.info.has_f16:
        out["cases"] += matmul_cases(tier["f16_sizes"], "float16", iters, repeats)
        f16_speedups(out["cases"])
        if tier_name == "full":        # (f16 is emulated on software adapters: GPU tiers only)
            out["cases"] += attention_cases(tier["seqs"][-1:], iters, repeats, "float16")
            out["cases"] += minilm_cases(iters, repeats, tier["minilm"], "float16")
    if not only or "chain" in only:
        out["cases"].append(elementwise_chain(100, 20, repeats, fuse=False))
        out["cases"].append(elementwise_chain(100, 20, repeats, fuse=True))
    if not only or "io" in only:
        out["cases"].append(io_case(sizes[-1], repeats))
    if not only or "rows" in only:
        out["cases"] += row_op_cases(tier["rows"], iters, repeats)
    if not only or "attention" in only:
        out["cases"] += attention_cases(tier["seqs"], iters, repeats)
    if not only or "minilm" in only:
        out["cases"] += minilm_cases(iters, repeats, tier["minilm"])
    if not only or "train" in only:
        from .bench_train import train_cases
        out["cases"] += train_cases(tier["train_quick"], progress, peers=not NO_REF)
    if "llm" in only:
        from .bench_llm import llm_cases
        out["cases"] += llm_cases(tier_name, progress, args.llm_model, args.peer)
    if args.peer == "tinygrad":
        progress("tinygrad (a subprocess)")
        out["peer"] = peer_tinygrad(sizes, iters, repeats)
        by_size = {r.get("n"): r for r in out["peer"] if "n" in r}
        for r in out["cases"]:
            n = r["case"].split()[-1].split("x")
            if r["case"].startswith("matmul") and r["dtype"] == "float32" and len(set(n)) == 1 \
                    and int(n[0]) in by_size:
                r["tinygrad_ms"] = by_size[int(n[0])]["ms"]
                r["ratio_vs_tinygrad"] = r["tinygrad_ms"] / r["webrlx_ms"]   # > 1: faster
    return out
