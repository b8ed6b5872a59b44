"""Scale-out on one host with Ray (issue 33), one JSON line per measurement:

  embed  MiniLM over N synthetic sentences through webrlx.distributed's Ray Data actors (one
         GPU each): steady sentences/s (each actor's first batch, which compiles, left out)
         and end to end.
  st     sentence-transformers on the same sentences and encode batch size, one torch process
         per GPU (CUDA_VISIBLE_DEVICES=i), each encoding its share; sentences/s over the
         slowest process after one warm-up batch.
  serve  webrlx.distributed.serve_app with R replicas (one GPU each) behind Ray Serve's
         endpoint; bench/openai_load.py's clients (streaming /v1/completions) at C at once.

    python bench/ray_scale.py embed --actors 2 --gpus 1 --sentences 200000
    python bench/ray_scale.py st --procs 2 --sentences 200000
    python bench/ray_scale.py serve --replicas 2 --gpus 1 --model model.gguf --clients 32

On a CPU box use --gpus 0 (the actors share lavapipe) and small sizes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

WORDS = ("the a quick brown fox jumps over lazy dog river mountain city light dark music "
         "science history garden ocean forest bridge window market engine signal harbor "
         "winter summer morning evening teacher student doctor painter farmer pilot").split()


def sentences(start: int, n: int) -> list[str]:
    """n synthetic sentences of 6-40 words, deterministic in their index."""
    out = []
    for i in range(start, start + n):
        rng = np.random.default_rng(i)
        words = rng.choice(WORDS, int(rng.integers(6, 41)))
        out.append(" ".join(words).capitalize() + f" ({i}).")
    return out


def _ray_init(gpus: int, actors: int) -> Any:
    import ray
    # a busy box starts Ray's agents slowly: wait for them rather than abort
    os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
    ray.init(num_gpus=gpus * actors if gpus else 0, include_dashboard=False,
             log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    return ray


def run_embed(args: argparse.Namespace) -> dict[str, Any]:
    """Ray Data: range -> synthetic text (tasks) -> webrlx Embedder actors -> timings."""
    ray = _ray_init(args.gpus, args.actors)
    from webrlx import distributed as wd

    class TimedEmbedder(wd.Embedder):
        """Embedder that stamps each batch with its actor's pid, start/end times and the
        seconds its tokenizer's encode and its executable's runs took."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.spent = {"tok": 0.0, "run": 0.0}
            tok, exe = self.encoder.tokenizer, self.encoder.executable
            tok.encode = self._timed("tok", tok.encode)     # type: ignore[method-assign]
            exe.run = self._timed("run", exe.run)           # type: ignore[method-assign]

        def _timed(self, key: str, fn: Any) -> Any:
            def timed(*a: Any, **k: Any) -> Any:
                t = time.perf_counter()
                try:
                    return fn(*a, **k)
                finally:
                    self.spent[key] += time.perf_counter() - t
            return timed

        def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            t0 = time.time()
            self.spent = {"tok": 0.0, "run": 0.0}
            out = super().__call__(batch)
            n = len(out["id"])
            return {"id": out["id"], "ok": np.array([e is None for e in out["error"]]),
                    "norm": np.linalg.norm(out["embedding"], axis=1),
                    "pid": np.full(n, os.getpid()), "t0": np.full(n, t0),
                    "t1": np.full(n, time.time()), "device": np.array([str(self.device)] * n,
                                                                       dtype=object),
                    "tok_s": np.full(n, self.spent["tok"]), "run_s": np.full(n, self.spent["run"])}

    import pandas as pd
    texts = sentences(0, args.sentences)
    frames = [pd.DataFrame({"id": np.arange(s, min(s + args.batch, args.sentences)),
                            "text": texts[s: s + args.batch]})
              for s in range(0, args.sentences, args.batch)]
    t0 = time.time()
    ds = ray.data.from_pandas(frames)
    kwargs = {"model": args.model_dir or "minilm", "text_column": "text",
              "batch_size": args.encode_batch, "strict": True, "device": None}
    out = wd._map(ds, TimedEmbedder, kwargs, args.batch, args.actors,
                  1 if args.gpus else 0, args.cpus_per_actor, 2, 2)
    cols = out.select_columns(["id", "ok", "norm", "pid", "t0", "t1", "device", "tok_s",
                               "run_s"]).to_pandas()
    wall = time.time() - t0
    ray.shutdown()
    ids = np.sort(cols["id"].to_numpy())
    assert len(ids) == args.sentences and (ids == np.arange(args.sentences)).all(), \
        "rows lost or duplicated"
    assert cols["ok"].all() and np.allclose(cols["norm"], 1, atol=1e-3)
    # steady state: drop each actor's first batch (it compiles the kernels)
    batches = cols.groupby(["pid", "t0"]).agg(rows=("id", "size"), t1=("t1", "max"),
                                              tok_s=("tok_s", "first"),
                                              run_s=("run_s", "first")) \
        .reset_index().sort_values("t0")
    firsts = batches.groupby("pid").head(1)
    rest = batches.drop(firsts.index)
    start = firsts["t1"].max()
    later = rest[rest["t0"] >= start]
    steady = later["rows"].sum() / (later["t1"].max() - start) if len(later) else float("nan")
    return {"what": "embed", "actors": args.actors, "gpus_per_actor": 1 if args.gpus else 0,
            "sentences": args.sentences, "batch": args.batch,
            "encode_batch": args.encode_batch, "wall_s": round(wall, 2),
            "sentences_per_s_end_to_end": round(args.sentences / wall, 1),
            "sentences_per_s_steady": round(float(steady), 1),
            "steady_rows": int(later["rows"].sum()),
            # where a steady batch's time goes inside its actor, microseconds a sentence:
            # tokenizer.encode, the executable's runs (GPU and their host side), the rest of
            # the call (padding, sorting, output), and the time between an actor's calls
            "actor_us_per_sentence": _split(later, args.actors),
            "actor_devices": sorted(set(cols["device"].astype(str))),
            "actor_pids": int(cols["pid"].nunique())}


def _split(batches: Any, actors: int) -> dict[str, float]:
    """Steady batches' actor time split a sentence (see run_embed)."""
    rows = batches["rows"].sum()
    if not rows:
        return {}
    call = (batches["t1"] - batches["t0"]).sum()
    span = (batches["t1"].max() - batches["t0"].min()) * actors
    parts = {"tokenize": batches["tok_s"].sum(), "runs": batches["run_s"].sum(),
             "rest_of_call": call - batches["tok_s"].sum() - batches["run_s"].sum(),
             "between_calls": span - call}
    return {k: round(float(v) / rows * 1e6, 2) for k, v in parts.items()}


def st_worker(args: argparse.Namespace) -> dict[str, Any]:
    """One torch process: its share of the sentences, sentence-transformers on cuda:0."""
    import torch
    from sentence_transformers import SentenceTransformer

    from webrlx.models.assets import minilm_dir
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = SentenceTransformer(str(minilm_dir(args.model_dir)), device=device)
    share = args.sentences // args.procs
    texts = sentences(args.rank * share, share)
    model.encode(texts[:args.encode_batch], batch_size=args.encode_batch)      # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    emb = model.encode(texts, batch_size=args.encode_batch, convert_to_numpy=True)
    dt = time.perf_counter() - t0
    assert emb.shape == (share, 384)
    return {"rank": args.rank, "sentences": share, "seconds": dt, "device": device,
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", "")}


def run_st(args: argparse.Namespace) -> dict[str, Any]:
    """Spawn one process per GPU and combine their timings."""
    procs = []
    for rank in range(args.procs):
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(rank))
        cmd = [sys.executable, __file__, "st-worker", "--rank", str(rank),
               "--procs", str(args.procs), "--sentences", str(args.sentences),
               "--encode-batch", str(args.encode_batch)]
        if args.model_dir:
            cmd += ["--model-dir", args.model_dir]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
    rows = []
    for p in procs:
        out, _ = p.communicate()
        if p.returncode:
            raise RuntimeError(f"st-worker failed ({p.returncode})")
        rows.append(json.loads(out.strip().splitlines()[-1]))
    slowest = max(r["seconds"] for r in rows)
    total = sum(r["sentences"] for r in rows)
    return {"what": "sentence-transformers", "procs": args.procs, "sentences": total,
            "encode_batch": args.encode_batch, "device": rows[0]["device"],
            "sentences_per_s": round(total / slowest, 1), "per_process": rows}


def _cpu_seconds(replicas: set[str]) -> dict[str, float]:
    """CPU seconds so far of this host's Serve processes by role (the proxy, the replicas of
    these pids, the controller, Ray's raylet and GCS) and of this process with its children
    (the load); empty without psutil (Ray ships one in ray/thirdparty_files)."""
    try:
        import psutil
    except ImportError:
        return {}
    out: dict[str, float] = {}
    me = psutil.Process()
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            role = ("proxy" if "ProxyActor" in cmd else
                    f"replica.{p.pid}" if str(p.pid) in replicas else
                    "controller" if "ServeController" in cmd else
                    "raylet" if "/raylet" in cmd.split(" ")[0] else
                    "gcs" if "gcs_server" in cmd.split(" ")[0] else None)
            if role is None:
                continue
            t = p.cpu_times()
            out[role] = out.get(role, 0.0) + t.user + t.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    t = me.cpu_times()
    out["load"] = t.user + t.system + t.children_user + t.children_system
    return out


def run_serve(args: argparse.Namespace) -> dict[str, Any]:
    """serve_app with R replicas, then the load test's clients against Serve's endpoint."""
    import openai_load
    from ray import serve

    from webrlx import distributed as wd
    ray = _ray_init(args.gpus, args.replicas)
    # the replicas get the stand-in's code by value; each engine times its steps into
    # stats_dir (engine_standin.timed: the real Engine unless --standin)
    import tempfile

    import engine_standin
    from ray import cloudpickle
    cloudpickle.register_pickle_by_value(engine_standin)
    stats_dir = tempfile.mkdtemp(prefix="webrlx-engine-stats-")
    factory = engine_standin.timed(
        engine_standin.factory(args.standin) if args.standin else None, stats_dir)
    if args.model is None:
        from webrlx.models.assets import smollm2_gguf
        args.model = str(smollm2_gguf(None))
    t0 = time.time()
    app = wd.serve_app(args.model, args.replicas, num_gpus=1 if args.gpus else 0,
                       embedding_model=None, max_queue=args.max_queue,
                       max_context=args.max_context, max_sequences=args.max_sequences,
                       engine_factory=factory)
    serve.start(http_options={"host": "127.0.0.1", "port": 8000})
    serve.run(app)
    setup = time.time() - t0
    url = "http://127.0.0.1:8000"
    try:
        openai_load.run_level(url, args.clients, 1, args.max_tokens, args.load_procs)  # warm
        eng0 = engine_standin.read_stats(stats_dir)
        cpu0 = _cpu_seconds(set(eng0))
        row = openai_load.run_level(url, args.clients, args.requests, args.max_tokens,
                                    args.load_procs)
        cpu1, eng1 = _cpu_seconds(set(eng0)), engine_standin.read_stats(stats_dir)
    finally:
        serve.shutdown()
        ray.shutdown()
    return {"what": "serve", "replicas": args.replicas, "gpus_per_replica": 1 if args.gpus
            else 0, "model": Path(args.model).name,
            "engine": f"standin {args.standin}" if args.standin else "Engine",
            "max_sequences": args.max_sequences,
            "max_tokens": args.max_tokens, "setup_s": round(setup, 1), **row,
            # busy fraction of a core during the timed level: a GIL-bound process at ~1.0
            # (the load at ~load_procs) is what limits the rate
            "cpu_busy": {k: round((cpu1[k] - cpu0.get(k, 0.0)) / row["wall_s"], 2)
                         for k in sorted(cpu1)},
            # CPU ms each role spent per request: 1000 / it bounds a one-core role's rate
            "cpu_ms_per_request": {k: round((cpu1[k] - cpu0.get(k, 0.0)) * 1e3
                                            / row["requests"], 2) for k in sorted(cpu1)},
            # per replica's engine: the share of the wall time inside step() (near 1: the
            # engine limits), the engine thread's CPU share of that, rows a step, steps/s
            "engines": [engine_standin.engine_row(eng0.get(k, {}), v, row["wall_s"])
                        for k, v in sorted(eng1.items())]}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["embed", "st", "st-worker", "serve"])
    p.add_argument("--sentences", type=int, default=200_000)
    p.add_argument("--actors", type=int, default=1)
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--gpus", type=int, default=1, help="1: one GPU per actor; 0: CPU box")
    p.add_argument("--cpus-per-actor", type=float, default=1)
    p.add_argument("--batch", type=int, default=2048, help="rows per Ray Data batch")
    p.add_argument("--encode-batch", type=int, default=128, help="rows per GPU submit")
    p.add_argument("--model-dir", default=None, help="MiniLM dir (default: the package's)")
    p.add_argument("--model", default=None, help="serve: a .gguf (default: SmolLM2)")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--requests", type=int, default=4, help="serve: requests per client")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--max-sequences", type=int, default=16)
    p.add_argument("--max-queue", type=int, default=32)
    p.add_argument("--max-context", type=int, default=256)
    p.add_argument("--load-procs", type=int, default=1,
                   help="serve: processes the clients are spread over")
    p.add_argument("--standin", default=None, metavar="STEP_MS[,CPU_MS[,PREFILL_MS[,RELEASES]]]",
                   help="serve: bench/engine_standin.py's GPU-free engine in each replica "
                        "(the front end alone; --model only gives the tokenizer)")
    args = p.parse_args(argv)
    fn = {"embed": run_embed, "st": run_st, "st-worker": st_worker, "serve": run_serve}
    print(json.dumps(fn[args.what](args)), flush=True)


if __name__ == "__main__":
    main()
