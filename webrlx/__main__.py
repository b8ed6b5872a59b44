"""Command line: `python -m webrlx info | demo | chat | generate | serve | bench | lite | dawn
| docs | onnx | embed | serve-llm`."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

DEMO_SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
]


def cmd_info(args: argparse.Namespace) -> int:
    """Print the adapter, its limits and features, and the shaders webrlx ships."""
    import webrlx as wr
    from webrlx.kernels import all_shaders
    dev = wr.device(args.device)
    info = dev.info
    print(f"webrlx {wr.__version__}")
    print(f"adapter:  {info.name}")
    print(f"backend:  {info.backend}")
    print(f"features: {', '.join(sorted(info.features)) or '-'}")
    for key in sorted(info.limits):
        if key.startswith(("max-storage", "max-buffer", "max-compute", "min-")):
            print(f"  {key}: {info.limits[key]}")
    print(f"shaders:  {len(all_shaders())} ({', '.join(all_shaders())})")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Embed sentences with all-MiniLM-L6-v2; print cosine similarities and time per batch."""
    from webrlx.models import minilm
    from webrlx.models.safetensors import tqdm_like_progress
    t0 = time.perf_counter()
    enc = minilm.load(args.model, device=args.device, progress=tqdm_like_progress("weights"))
    t1 = time.perf_counter()
    print(f"device: {enc.device.info.name} ({enc.device.info.backend}); "
          f"model loaded in {t1 - t0:.2f} s")
    emb = enc.encode(DEMO_SENTENCES)
    t2 = time.perf_counter()
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        emb = enc.encode(DEMO_SENTENCES)
        times.append(time.perf_counter() - t)
    sim = emb @ emb.T
    width = max(len(s) for s in DEMO_SENTENCES)
    print(f"\ncosine similarity ({len(DEMO_SENTENCES)} sentences, 384-d embeddings):")
    print(" " * (width + 2) + " ".join(f"{i:>5d}" for i in range(len(sim))))
    for i, (s, row) in enumerate(zip(DEMO_SENTENCES, sim)):
        print(f"{s:<{width}} {i:d} " + " ".join(f"{v:5.2f}" for v in row))
    best = np.argsort(-(sim - 2 * np.eye(len(sim))), axis=1)[:, 0]
    print("\nnearest neighbours:")
    for i, j in enumerate(best):
        print(f"  {DEMO_SENTENCES[i]!r} ~ {DEMO_SENTENCES[j]!r} ({sim[i, j]:.3f})")
    print(f"\nfirst batch (compile + run): {1000 * (t2 - t1):.1f} ms; "
          f"warm batch of {len(DEMO_SENTENCES)}: median {1000 * float(np.median(times)):.1f} ms "
          f"over {len(times)} runs")
    return 0


def cmd_serve(rest: list[str]) -> int:
    from webrlx.cli.serve import main_serve
    return main_serve(rest)


def cmd_bench(rest: list[str]) -> int:
    from webrlx.cli.bench import main_bench
    print(json.dumps(main_bench(rest), indent=1))
    return 0


def cmd_lite(rest: list[str]) -> int:
    from webrlx.cli.lite import main_lite
    return main_lite(rest)


def cmd_chat(rest: list[str]) -> int:
    from webrlx.cli.chat import main_chat
    return main_chat(rest)


def cmd_generate(rest: list[str]) -> int:
    from webrlx.cli.chat import main_generate
    return main_generate(rest)


def cmd_gguf(rest: list[str]) -> int:
    from webrlx.cli.gguf_info import main_gguf
    return main_gguf(rest)


def cmd_dawn(rest: list[str]) -> int:
    from webrlx.cli.dawn import main_dawn
    return main_dawn(rest)


def cmd_onnx(rest: list[str]) -> int:
    from webrlx.cli.onnx import main_onnx
    return main_onnx(rest)


def cmd_embed(rest: list[str]) -> int:
    from webrlx.cli.embed import main_embed
    return main_embed(rest)


def cmd_serve_llm(rest: list[str]) -> int:
    from webrlx.cli.serve_llm import main_serve_llm
    return main_serve_llm(rest)


def cmd_docs(rest: list[str]) -> int:
    from webrlx.cli.docs import main_docs
    return main_docs(rest)


# Subcommands with their own options, in webrlx/cli/ (apart from the runtime's layers).
PASS_THROUGH = {"serve": cmd_serve, "bench": cmd_bench, "lite": cmd_lite, "chat": cmd_chat,
                "generate": cmd_generate, "dawn": cmd_dawn, "docs": cmd_docs, "onnx": cmd_onnx,
                "gguf": cmd_gguf, "embed": cmd_embed, "serve-llm": cmd_serve_llm}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        return _main(argv)
    except Exception as e:
        from webrlx.cli import input_error
        if not input_error(e) or os.environ.get("WEBRLX_TRACEBACK") == "1":
            raise
        command = argv[0] if argv else ""
        print(f"python -m webrlx {command}: error: {e}", file=sys.stderr)
        return 2


def _main(argv: list[str]) -> int:
    if argv and argv[0] in PASS_THROUGH:
        return PASS_THROUGH[argv[0]](argv[1:])
    from webrlx.cli.docs import DOCS_PORT, INSTALL
    from webrlx.cli.serve import LITE_PORT, SERVE_PORT
    parser = argparse.ArgumentParser(prog="python -m webrlx", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="adapter, limits, features, shaders")
    p.add_argument("--device", default=None, help="gpu | reference (default: the adapter)")
    p.set_defaults(fn=cmd_info)
    p = sub.add_parser("demo", help="MiniLM sentence embeddings on the default adapter")
    p.add_argument("--device", default=None, help="gpu | reference (default: the adapter)")
    p.add_argument("--model", default=None, help="directory with the MiniLM files")
    p.add_argument("--repeat", type=int, default=5)
    p.set_defaults(fn=cmd_demo)
    sub.add_parser("serve", help=f"serve the web/ pages with a local Pyodide on port "
                   f"{SERVE_PORT} (serve --help)")
    sub.add_parser("bench", help="benchmarks as JSON (bench --help)")
    sub.add_parser("chat", help="chat with a GGUF model (default SmolLM2) in the terminal, "
                   "streamed (chat --help)")
    sub.add_parser("generate", help="one completion of a prompt by a GGUF model (generate "
                   "--help)")
    sub.add_parser("gguf", help="gguf info FILE: metadata, tensor types, whether webrlx runs "
                   "it")
    sub.add_parser("onnx", help="inspect (onnx info M.onnx) or run (onnx run M.onnx) an "
                   ".onnx file (onnx --help)")
    sub.add_parser("embed", help="embed INPUT OUTPUT: MiniLM over a Parquet/JSONL/CSV text "
                   "column with Ray Data, locally or on a cluster (embed --help; webrlx[ray])")
    sub.add_parser("serve-llm", help="an OpenAI-compatible server for a GGUF model "
                   "(serve-llm --help; webrlx[ray])")
    sub.add_parser("dawn", help="run python, pytest or bench in Pyodide over Dawn in Node "
                   "(dawn --help)")
    sub.add_parser("lite", help=f"build and serve the JupyterLite notebooks site on port "
                   f"{LITE_PORT} (lite --help)")
    sub.add_parser("docs", help=f"build and serve the documentation site on port {DOCS_PORT}; "
                   f"needs {INSTALL} (docs --help)")
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
