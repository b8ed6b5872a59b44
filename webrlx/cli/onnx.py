"""`python -m webrlx onnx info model.onnx` (inputs, outputs, opsets, the op histogram and every
unsupported op) and `python -m webrlx onnx run model.onnx` (random or given inputs; prints the
outputs and the cold and warm time per run)."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from typing import Any, TextIO

import numpy as np


def _walk(graph: Any) -> list[Any]:
    """Every node of graph and of its subgraphs (If branches, Loop bodies)."""
    from ..onnx.reader import GraphDef
    out = []
    for n in graph.nodes:
        out.append(n)
        for v in n.attrs.values():
            for sub in (v if isinstance(v, list) else [v]):
                if isinstance(sub, GraphDef):
                    out.extend(_walk(sub))
    return out


def parse_dims(text: str) -> dict[str, int]:
    """'batch=1,seq=128' -> {'batch': 1, 'seq': 128}."""
    out = {}
    for part in filter(None, text.split(",")):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise argparse.ArgumentTypeError(f"--dims: expected name=int[,name=int...], got "
                                             f"{part!r}")
        out[name.strip()] = int(value)
    return out


def info(path: str, out: TextIO | None = None) -> int:
    """Print a model's inputs, outputs, opsets, op histogram and unsupported ops."""
    out = out or sys.stdout
    from ..onnx import load
    from ..onnx.importer import unsupported
    from ..onnx.session import _node_arg
    model = load(path)
    g = model.graph
    inits = g.initializers
    print(f"model:    {path} (ir {model.ir_version}, producer {model.producer or '-'})", file=out)
    opsets = sorted(model.opsets.items())
    print("opsets:   " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in opsets), file=out)
    print(f"weights:  {len(inits)} initializers, "
          f"{sum(int(np.prod(t.dims)) for t in inits.values()):,} values", file=out)
    for title, items in (("inputs", [vi for vi in g.inputs if vi.name not in inits]),
                         ("outputs", g.outputs)):
        print(f"{title}:", file=out)
        for a in map(_node_arg, items):
            print(f"  {a.name}: {a.type} {a.shape}", file=out)
    nodes = _walk(g)
    hist = Counter((n.domain or "ai.onnx", n.op_type) for n in nodes)
    print(f"ops:      {len(nodes)} nodes, {len(hist)} op types", file=out)
    for (domain, op_type), count in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {count:6d}  {op_type}" + ("" if domain == "ai.onnx" else f" ({domain})"),
              file=out)
    missing = unsupported(model)
    if missing:
        print(f"unsupported: {len(missing)}", file=out)
        for d, o, v, names in missing:
            print(f"  {d or 'ai.onnx'}::{o} (opset {v}): {len(names)} node(s), "
                  f"e.g. {', '.join(names[:3])}", file=out)
    else:
        print("unsupported: none", file=out)
    return 1 if missing else 0


def random_feeds(inputs: list[Any], dims: dict[str, int], seed: int = 0
                 ) -> tuple[dict[str, np.ndarray], list[str]]:
    """Random arrays for inputs (NodeArgs): symbolic dims from dims (else 1), floats normal,
    integers in [0, 100) (inputs named *mask* all ones), bools random. Also returns the
    symbolic dims that defaulted to 1."""
    rng = np.random.default_rng(seed)
    feeds, defaulted = {}, []
    for a in inputs:
        shape = []
        for i, d in enumerate(a.shape):
            if isinstance(d, int) and d >= 0:
                shape.append(d)
                continue
            key = d if isinstance(d, str) and d else f"{a.name}_{i}"
            if key not in dims and key not in defaulted:
                defaulted.append(key)
            shape.append(dims.get(key, 1))
        np_dtype = np.dtype(_NP_TYPES.get(a.type, "float32"))
        if np_dtype == np.bool_:
            v = rng.random(shape) < 0.5
        elif np_dtype.kind in "iu":
            v = np.ones(shape, np_dtype) if "mask" in a.name.lower() else \
                rng.integers(0, 100, shape).astype(np_dtype)
        else:
            v = rng.standard_normal(shape).astype(np_dtype)
        feeds[a.name] = v
    return feeds, defaulted


_NP_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
             "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int16)": "int16",
             "tensor(int8)": "int8", "tensor(uint8)": "uint8", "tensor(uint16)": "uint16",
             "tensor(uint32)": "uint32", "tensor(uint64)": "uint64", "tensor(bool)": "bool",
             "tensor(bfloat16)": "float32"}


def run(path: str, given: dict[str, str], dims: dict[str, int], runs: int, device: str | None,
        seed: int = 0, out: TextIO | None = None) -> int:
    """Run a model on random or given inputs; print its outputs and cold/warm times."""
    out = out or sys.stdout
    from ..onnx import InferenceSession
    t0 = time.perf_counter()
    sess = InferenceSession(path, device=device)
    t_load = time.perf_counter() - t0
    inputs = sess.get_inputs()
    names = [a.name for a in inputs]
    unknown = sorted(set(given) - set(names))
    if unknown:
        print(f"onnx run: --input names {unknown} are not inputs of the model; inputs are "
              f"{names}", file=sys.stderr)
        return 2
    feeds, defaulted = random_feeds([a for a in inputs if a.name not in given], dims, seed)
    for name, file in given.items():
        feeds[name] = np.load(file)
    if defaulted:
        print(f"symbolic dims set to 1: {', '.join(defaulted)} (bind with --dims)", file=out)
    for a in inputs:
        v = feeds[a.name]
        print(f"input  {a.name}: {v.dtype} {list(v.shape)}"
              + (f" from {given[a.name]}" if a.name in given else " random"), file=out)
    t0 = time.perf_counter()
    results = sess.run(None, feeds)
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        warm.append(time.perf_counter() - t)
    for o, v in zip(sess.get_outputs(), results):
        v = np.asarray(v)
        line = f"output {o.name}: {v.dtype} {list(v.shape)}"
        if v.size and v.dtype.kind in "fiub":
            f = v.astype(np.float64)
            line += (f" mean {f.mean():.6g} std {f.std():.6g} min {f.min():.6g} "
                     f"max {f.max():.6g}")
        if v.size:
            line += f" first {np.ravel(v)[:4].tolist()}"
        print(line, file=out)
    dev = sess.executable.device.info if sess.executable is not None else None
    where = f"{dev.name} ({dev.backend})" if dev is not None else "host (all outputs folded)"
    print(f"device: {where}", file=out)
    print(f"load {1000 * t_load:.1f} ms; cold run (import + compile + run) "
          f"{1000 * cold:.1f} ms", file=out)
    if warm:
        print(f"warm run: median {1000 * statistics.median(warm):.2f} ms, min "
              f"{1000 * min(warm):.2f} ms over {len(warm)} runs (upload + run + readback)",
              file=out)
    return 0


def main_onnx(argv: list[str]) -> int:
    """Parse `python -m webrlx onnx ...` and dispatch."""
    parser = argparse.ArgumentParser(prog="python -m webrlx onnx",
                                     description="inspect or run an .onnx file with webrlx")
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("info", help="inputs, outputs, opsets, op histogram, unsupported ops")
    p.add_argument("model")
    p = sub.add_parser("run", help="run on random or given inputs; print outputs and timing")
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                   help="an input from a .npy file (repeatable); the others are random")
    p.add_argument("--dims", type=parse_dims, default={}, metavar="NAME=INT,...",
                   help="values of symbolic dims, e.g. batch=1,sequence=128 (default 1)")
    p.add_argument("--runs", type=int, default=10, help="warm runs timed (default 10)")
    p.add_argument("--device", default=None, help="gpu | reference (default: the adapter)")
    p.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.what == "info":
        return info(args.model)
    given = {}
    for item in args.input:
        name, sep, file = item.partition("=")
        if not sep:
            parser.error(f"--input: expected NAME=FILE.npy, got {item!r}")
        given[name] = file
    return run(args.model, given, args.dims, args.runs, args.device, args.seed)
