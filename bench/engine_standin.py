"""A GPU-free stand-in for webrlx.models.engine.Engine, to measure the OpenAI server's front end
(FastAPI, SSE, the engine thread's hand-off, Ray Serve's proxy, the load generator) alone.

It has the Engine interface the server uses (add_request -> the real engine.Stream, step,
live, max_sequences, max_context, steps, lm with the model's real tokenizer and chat
template) and emits tokens at a fixed rate: a step prefills the sequences added since
(`prefill_ms` each), then gives every live sequence one token in `step_ms`, of which `cpu_ms`
is Python busy work holding the GIL (the real step's host side) and the rest a sleep (the GPU).
As in the real engine, tokens are read back (decoded into text pieces) every READ_EVERY steps
and when a sequence reaches its budget. The tokens are a fixed text's, cycled; no end of turn.

    python bench/openai_load.py --standin 4,1 --clients 32 --requests 4 --max-tokens 32
    python bench/ray_scale.py serve --gpus 0 --replicas 2 --standin 4,1 --clients 32

`factory(spec)` gives create_app / serve_app's engine_factory hook; `timed(factory,
stats_dir)` wraps that or the real Engine's so that each engine times its steps (wall and
the engine thread's CPU seconds, rows stepped) into stats_dir/<pid>.json, which
bench/ray_scale.py reads before and after its timed level: an engine busy nearly all the wall
time is what limits the rate; one that waits is held up in front of it.
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from webrlx.models.decoding import READ_EVERY, Sampling
from webrlx.models.engine import Stream

TEXT = ("The quick brown fox jumps over the lazy dog while the river runs to the sea, and "
        "a small robot named Pip counts the stars above the old harbor every night. ")


class StandinLM:
    """What the server reads of a LanguageModel: name, tokenizer, render_chat, stop_ids."""

    def __init__(self, gguf_path: str | None) -> None:
        from webrlx.models import gguf
        from webrlx.models.assets import smollm2_gguf
        from webrlx.models.llm import SPECIAL_TOKEN_NAMES, make_tokenizer
        md = gguf.load(gguf_path or smollm2_gguf(None)).metadata
        self.tokenizer = make_tokenizer(md)
        self.chat_template = md.get("tokenizer.chat_template")
        self.name = "standin-" + str(md.get("general.name", "model"))
        tokens = md["tokenizer.ggml.tokens"]
        self.special = {name: tokens[int(md[f"tokenizer.ggml.{kind}_token_id"])]
                        for kind, name in SPECIAL_TOKEN_NAMES.items()
                        if f"tokenizer.ggml.{kind}_token_id" in md}
        self.stop_ids: set[int] = set()
        self.device = "standin"

    def render_chat(self, messages: Sequence[dict[str, str]],
                    add_generation_prompt: bool = True) -> str:
        from webrlx.models.chat_template import render_chat
        return render_chat(self.chat_template or "", list(messages), add_generation_prompt,
                           model=self.name, **self.special)


class _Seq:
    def __init__(self, ids: list[int], max_new: int, stream: Stream, decoder: Any) -> None:
        self.ids, self.max_new, self.stream, self.decoder = ids, max_new, stream, decoder
        self.produced = self.shown = 0
        self.prefilled = False


class StandinEngine:
    """Engine's interface at a fixed token rate (see the module docstring)."""

    def __init__(self, lm: StandinLM, max_sequences: int, max_context: int | None,
                 step_ms: float = 4.0, cpu_ms: float = 1.0, prefill_ms: float = 4.0,
                 releases: int = 1) -> None:
        self.lm, self.max_sequences = lm, max_sequences
        self.max_context = max_context or 2048
        self.step_s, self.cpu_s, self.prefill_s = step_ms / 1e3, cpu_ms / 1e3, prefill_ms / 1e3
        self.releases = max(1, releases)
        self.text_ids = lm.tokenizer.encode(TEXT * 4)
        self.seqs: list[_Seq] = []
        self.steps = 0
        self.tokens = 0

    @property
    def live(self) -> int:
        return len(self.seqs)

    def add_request(self, ids: Sequence[int], sampling: Sampling | None = None,
                    max_new_tokens: int = 128) -> Stream:
        if len(ids) + max_new_tokens > self.max_context:
            raise ValueError(f"prompt of {len(ids)} tokens + max_new_tokens {max_new_tokens} "
                             f"exceeds max_context {self.max_context}")
        if self.live >= self.max_sequences:
            raise RuntimeError("all slots are live")
        stream = Stream(self)                                   # type: ignore[arg-type]
        self.seqs.append(_Seq(list(ids), max_new_tokens, stream, self.lm.tokenizer.stream()))
        return stream

    def _release(self, stream: Stream) -> None:
        self.seqs = [s for s in self.seqs if s.stream is not stream]

    def _work(self, seconds: float) -> None:
        """`seconds` of wall time, the first cpu_s of it busy in Python (holding the GIL, but
        letting it go `releases` times, as the real step's calls into wgpu-native do)."""
        t0 = time.perf_counter()
        busy = min(self.cpu_s, seconds)
        for k in range(1, self.releases + 1):
            while time.perf_counter() - t0 < busy * k / self.releases:
                pass
            time.sleep(0)
        rest = seconds - (time.perf_counter() - t0)
        if rest > 0:
            time.sleep(rest)

    def step(self) -> int:
        new = [s for s in self.seqs if not s.prefilled]
        for s in new:
            s.prefilled, s.produced = True, 1
        if new:
            self._work(self.prefill_s * len(new))
        old = [s for s in self.seqs if s.prefilled and s not in new and s.produced < s.max_new]
        for s in old:
            s.produced += 1
        if old:
            self._work(self.step_s)
        self.steps += 1
        if new or any(s.produced >= s.max_new for s in self.seqs) \
                or self.steps % READ_EVERY == 0:
            self._consume()
        return self.live

    def _consume(self) -> None:
        n = len(self.text_ids)
        for s in list(self.seqs):
            while s.shown < s.produced:
                t = self.text_ids[(len(s.ids) + s.shown) % n]
                s.shown += 1
                s.stream.token_ids.append(t)
                piece = s.decoder.feed(t)
                if piece:
                    s.stream.pieces.append(piece)
            if s.shown >= s.max_new:
                tail = s.decoder.flush()
                if tail:
                    s.stream.pieces.append(tail)
                s.stream.finished = True
                self.tokens += s.shown
                self.seqs.remove(s)


def expected_text(lm: StandinLM, prompt_ids: Sequence[int], max_new: int) -> str:
    """The text the stand-in serves for a prompt of `prompt_ids` and `max_new` tokens."""
    eng = StandinEngine(lm, 1, None, 0, 0, 0)
    stream = eng.add_request(prompt_ids, None, max_new)
    while not stream.finished:
        eng.step()
    return "".join(stream.pieces)


def factory(spec: str) -> Callable[[Any, int, int | None], StandinEngine]:
    """create_app's engine_factory for `STEP_MS[,CPU_MS[,PREFILL_MS[,RELEASES]]]` (CPU_MS 1,
    PREFILL_MS = STEP_MS and RELEASES 1 unless given); the model argument is the .gguf (or
    None: SmolLM2) whose tokenizer it uses."""
    parts = [float(x) for x in spec.split(",")]
    step = parts[0]
    cpu = parts[1] if len(parts) > 1 else min(1.0, step)
    prefill = parts[2] if len(parts) > 2 else step
    releases = int(parts[3]) if len(parts) > 3 else 1

    def make(model: Any, max_sequences: int, max_context: int | None,
             device: Any = None) -> StandinEngine:
        return StandinEngine(StandinLM(model if isinstance(model, str) else None),
                             max_sequences, max_context, step, cpu, prefill, releases)
    return make


def real_engine(model: Any, max_sequences: int, max_context: int | None,
                device: Any = None) -> Any:
    """The server's own engine: Engine(llm.load(model)), as openai_api.Server makes it."""
    from webrlx.models import llm
    from webrlx.models.engine import Engine
    lm = llm.load(model, device, max_context=max_context) if isinstance(model, str) else model
    return Engine(lm, max_sequences, max_context)


class TimedEngine:
    """An engine whose steps are timed; its counters go to `path` (JSON) at most every
    0.25 s and whenever it runs out of sequences (so they are exact while it idles)."""

    def __init__(self, engine: Any, path: Path, where: dict[str, Any]) -> None:
        self.engine, self.path, self.written = engine, path, 0.0
        self.stats: dict[str, Any] = {"steps": 0, "step_s": 0.0, "step_cpu_s": 0.0,
                                      "rows": 0, **where}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def step(self) -> int:
        rows = self.engine.live
        t0, c0 = time.perf_counter(), time.thread_time()
        live = self.engine.step()
        t1 = time.perf_counter()
        st = self.stats
        st["steps"] += 1
        st["rows"] += rows
        st["step_s"] += t1 - t0
        st["step_cpu_s"] += time.thread_time() - c0
        if live == 0 or t1 - self.written > 0.25:
            self.written = t1
            self.write()
        return int(live)

    def write(self) -> None:
        """The counters to `path` (atomically)."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.stats))
        tmp.replace(self.path)


def timed(make: Callable[..., Any] | None, stats_dir: str) -> Callable[..., TimedEngine]:
    """An engine_factory: `make`'s engine (None: the real Engine) as a TimedEngine writing
    stats_dir/<pid>.json."""
    inner = make or real_engine

    def make_timed(model: Any, max_sequences: int, max_context: int | None,
                   device: Any = None) -> TimedEngine:
        Path(stats_dir).mkdir(parents=True, exist_ok=True)
        where = {"device": str(device), "adapter": None,
                 "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
        engine = inner(model, max_sequences, max_context, device)
        info = getattr(getattr(engine.lm, "device", None), "info", None)
        if info is not None:
            where["adapter"] = str(getattr(info, "name", info))
        timed_engine = TimedEngine(engine, Path(stats_dir) / f"{os.getpid()}.json", where)
        timed_engine.write()
        return timed_engine
    return make_timed


def read_stats(stats_dir: str) -> dict[str, dict[str, float]]:
    """Each engine's counters (by pid) as last written."""
    out = {}
    for f in sorted(Path(stats_dir).glob("*.json")):
        try:
            out[f.stem] = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
    return out


def engine_row(a: dict[str, Any], b: dict[str, Any], wall: float) -> dict[str, Any]:
    """One engine's counters between two reads (a, then b) over `wall` seconds: device, busy
    share of the wall time (in step()), the engine thread's CPU share of that, rows a step,
    steps a second, ms a step."""
    d = {k: b[k] - a.get(k, 0) for k in ("steps", "step_s", "step_cpu_s", "rows")}
    steps = max(d["steps"], 1)
    return {"device": b.get("device"), "adapter": b.get("adapter"),
            "cuda_visible_devices": b.get("cuda_visible_devices"),
            "busy": round(d["step_s"] / wall, 3),
            "cpu_in_step": round(d["step_cpu_s"] / max(d["step_s"], 1e-9), 3),
            "rows_per_step": round(d["rows"] / steps, 2),
            "steps_per_s": round(d["steps"] / wall, 1),
            "ms_per_step": round(d["step_s"] * 1e3 / steps, 3)}
