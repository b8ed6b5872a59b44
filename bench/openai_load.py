"""A bounded load test of the OpenAI-compatible server (webrlx.openai_api): N concurrent
streaming clients, each sending a fixed number of /v1/completions requests one after another;
reports requests/s and the p50/p99 time to first token (the first chunk with text) per level of
concurrency, as JSON. It starts the server itself on 127.0.0.1 (uvicorn in a thread, the
batched engine behind it) unless --url names a running one (a Ray Serve endpoint), and stops
by itself: every level is `clients x --requests` requests, no more.

    python bench/openai_load.py                           # SmolLM2, 1 / 4 / 16 clients
    python bench/openai_load.py --model build/llm_fixtures/llama-q8_0.gguf --clients 1,4
    python bench/openai_load.py --url http://127.0.0.1:8000 --clients 32   # a running server
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

PROMPTS = ["The capital of France is", "Once upon a time, there was a little robot named",
           "def fibonacci(n):", "The three primary colors are", "Water boils at",
           "My favourite book is", "In 1969, astronauts", "A good breakfast has"]


def one_request(client: Any, prompt: str, max_tokens: int) -> tuple[float, float, int]:
    """(time to first text chunk, total seconds, text chunks) of one streaming completion."""
    t0 = time.perf_counter()
    first, chunks = None, 0
    with client.stream("POST", "/v1/completions",
                       json={"prompt": prompt, "max_tokens": max_tokens, "stream": True,
                             "temperature": 0}) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.read().decode()[:200]}")
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            if json.loads(line[6:])["choices"][0]["text"]:
                chunks += 1
                if first is None:
                    first = time.perf_counter() - t0
    total = time.perf_counter() - t0
    return (total if first is None else first), total, chunks


def _clients(url: str, first: int, clients: int, requests: int, max_tokens: int
             ) -> list[tuple[float, float, int]]:
    """Clients first..first+clients-1 on threads of this process, all their results."""
    import httpx

    def client_loop(i: int) -> list[tuple[float, float, int]]:
        with httpx.Client(base_url=url, timeout=600) as c:
            return [one_request(c, PROMPTS[(i + k) % len(PROMPTS)], max_tokens)
                    for k in range(requests)]

    with ThreadPoolExecutor(clients) as pool:
        return [r for rs in pool.map(client_loop, range(first, first + clients)) for r in rs]


_BARRIER: Any = None


def _init_worker(barrier: Any) -> None:
    global _BARRIER
    _BARRIER = barrier
    import httpx  # noqa: F401 - imported before the start, not timed


def _worker(task: tuple[str, int, int, int, int]) -> list[tuple[float, float, int]]:
    _BARRIER.wait()
    return _clients(*task)


def run_level(url: str, clients: int, requests: int, max_tokens: int, procs: int = 1
              ) -> dict[str, Any]:
    """`clients` clients, each sending `requests` streaming completions back to back, on
    threads of `procs` processes (one Python process's GIL can be what limits the load)."""
    procs = max(1, min(procs, clients))
    if procs == 1:
        t0 = time.perf_counter()
        results = _clients(url, 0, clients, requests, max_tokens)
        wall = time.perf_counter() - t0
    else:
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        barrier = ctx.Barrier(procs + 1)
        cuts = [clients * k // procs for k in range(procs + 1)]
        tasks = [(url, cuts[k], cuts[k + 1] - cuts[k], requests, max_tokens)
                 for k in range(procs)]
        with ctx.Pool(procs, _init_worker, (barrier,)) as pool:
            pending = pool.map_async(_worker, tasks, chunksize=1)
            barrier.wait()
            t0 = time.perf_counter()
            results = [r for rs in pending.get() for r in rs]
            wall = time.perf_counter() - t0
    ttft = np.array([r[0] for r in results]) * 1000
    lat = np.array([r[1] for r in results]) * 1000
    return {"clients": clients, "requests": len(results), "load_procs": procs,
            "wall_s": round(wall, 3),
            "requests_per_s": round(len(results) / wall, 3),
            "tokens_per_s_at_max": round(len(results) * max_tokens / wall, 1),
            "ttft_ms_p50": round(float(np.percentile(ttft, 50)), 1),
            "ttft_ms_p99": round(float(np.percentile(ttft, 99)), 1),
            "latency_ms_p50": round(float(np.percentile(lat, 50)), 1),
            "latency_ms_p99": round(float(np.percentile(lat, 99)), 1),
            "text_chunks": int(sum(r[2] for r in results))}


def start_server(model: str, max_sequences: int, max_queue: int, max_context: int,
                 standin: str | None = None) -> tuple[str, Any, Any]:
    """The app on uvicorn in a thread on a free 127.0.0.1 port: (url, uvicorn server, app).
    `standin`: bench/engine_standin.py's engine at that rate instead of the model's Engine;
    either is timed (engine_standin.timed)."""
    import tempfile

    import engine_standin
    import uvicorn

    from webrlx.openai_api import create_app
    factory = engine_standin.timed(engine_standin.factory(standin) if standin else None,
                                   tempfile.mkdtemp(prefix="webrlx-engine-stats-"))
    app = create_app(model, None, max_queue, max_context, max_sequences,
                     engine_factory=factory)
    app.state.server.load()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server, app


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=None, help="a .gguf (default: SmolLM2-135M)")
    p.add_argument("--url", default=None, help="load a running server instead of starting one")
    p.add_argument("--clients", default="1,4,16", help="comma-separated concurrency levels")
    p.add_argument("--requests", type=int, default=2, help="requests per client per level")
    p.add_argument("--max-tokens", type=int, default=16, help="tokens per completion")
    p.add_argument("--max-sequences", type=int, default=16, help="the engine's slots")
    p.add_argument("--max-context", type=int, default=256, help="positions per sequence")
    p.add_argument("--warmup", type=int, default=1,
                   help="requests at each level's concurrency before it is timed (compiles "
                        "the engine's plan for that many sequences)")
    p.add_argument("--procs", type=int, default=1,
                   help="processes the clients are spread over (threads in each)")
    p.add_argument("--standin", default=None, metavar="STEP_MS[,CPU_MS[,PREFILL_MS[,RELEASES]]]",
                   help="serve from bench/engine_standin.py's GPU-free engine at this rate "
                        "(e.g. 4,1: a 4 ms step, 1 ms of it Python): the front end alone")
    p.add_argument("--out", default=None, help="also write the JSON here")
    args = p.parse_args(argv)
    levels = [int(c) for c in args.clients.split(",")]
    server = app = None
    url = args.url
    t0 = time.perf_counter()
    if url is None:
        from webrlx.models.assets import smollm2_gguf
        model = args.model or str(smollm2_gguf(None))
        url, server, app = start_server(model, args.max_sequences,
                                        max(0, max(levels) - args.max_sequences),
                                        args.max_context, args.standin)
    setup_s = time.perf_counter() - t0
    rows = []
    try:
        for n in levels:
            if args.warmup:
                run_level(url, n, args.warmup, args.max_tokens, args.procs)
            before = dict(app.state.server.worker.engine.stats) if app is not None else None
            rows.append(run_level(url, n, args.requests, args.max_tokens, args.procs))
            if before is not None:
                import engine_standin
                rows[-1]["engine"] = engine_standin.engine_row(
                    before, app.state.server.worker.engine.stats, rows[-1]["wall_s"])
            print(json.dumps(rows[-1]), file=sys.stderr)
    finally:
        if server is not None:
            server.should_exit = True
    out: dict[str, Any] = {
        "what": "streaming /v1/completions, greedy, each client sends its requests back to "
                "back; time to first token = to the first SSE chunk with text",
        "url": args.url or "127.0.0.1 (started here)", "max_tokens": args.max_tokens,
        "requests_per_client": args.requests, "levels": rows,
        "setup_s": round(setup_s, 1), "python": platform.python_version(),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "command": "python bench/openai_load.py " + " ".join(argv or sys.argv[1:])}
    if app is not None:
        srv = app.state.server
        eng = srv.worker.engine
        out.update(model=eng.lm.name, max_sequences=eng.max_sequences,
                   max_context=eng.max_context, adapter=getattr(
                       getattr(eng.lm.device, "info", None), "name", str(eng.lm.device)))
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return out


if __name__ == "__main__":
    main()
