"""An OpenAI-compatible HTTP app (FastAPI) over one webrlx language model and one MiniLM encoder:
/v1/chat/completions and /v1/completions (streamed by server-sent events or not),
/v1/embeddings, /v1/models. `python -m webrlx serve-llm` runs it with uvicorn;
webrlx.distributed.serve_app runs it as Ray Serve replicas.

Completions share one batched Engine (webrlx.models.engine): a worker thread owns it, adds
each request as an engine stream when a slot is free (`max_sequences` live at once), steps
every live sequence together and hands each step's text pieces to the requests' event loop
in one wake-up; a streaming request sends what came since its last chunk as one chunk (so a
client or writer that is behind gets fewer, longer chunks, the same text). Admitted requests
beyond the slots wait in the worker's queue; past `max_sequences + max_queue` admitted
requests, a request gets 429. A client that disconnects cancels its request: its slot (or
place in the queue) frees before the next step. Errors have OpenAI's shape,
`{"error": {"message", "type", "param", "code"}}`.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from .openai_requests import APIError, json_body, max_tokens_of, messages_of, sampling_args

DEFAULT_MAX_QUEUE = 8
DEFAULT_MAX_SEQUENCES = 8


@dataclass
class _Done:
    """The end of a request's pieces: the tokens it drew (an end-of-turn token included)."""
    tokens: int


@dataclass(eq=False)
class Job:
    """One completion request as the worker sees it; lists of its pieces go to `out` on
    `loop`."""
    ids: list[int]
    max_new: int
    sampling: Any
    loop: asyncio.AbstractEventLoop
    out: asyncio.Queue[list[Any]] = field(default_factory=asyncio.Queue)
    stream: Any = None

    def put(self, item: Any) -> None:
        """Hand a piece, _Done or an APIError to the request (from the worker thread)."""
        self.loop.call_soon_threadsafe(self.out.put_nowait, [item])


def _deliver(batch: list[tuple[Job, list[Any]]]) -> None:
    """On the requests' loop: each job's items of one engine step, as one list."""
    for job, items in batch:
        job.out.put_nowait(items)


class EngineWorker:
    """The thread that owns the Engine: it takes jobs and cancellations from a queue between
    steps, gives free slots to waiting jobs in order, steps while any sequence is live and
    passes each stream's new pieces on."""

    def __init__(self, make_engine: Callable[[], Any]) -> None:
        self.make_engine = make_engine
        self.engine: Any = None
        self.error: BaseException | None = None
        self.ready = threading.Event()
        self.commands: queue.SimpleQueue[tuple[str, Job | None]] = queue.SimpleQueue()
        self.waiting: deque[Job] = deque()
        self.active: list[Job] = []
        self.thread = threading.Thread(target=self._run, name="webrlx-engine", daemon=True)
        self.thread.start()

    def submit(self, job: Job) -> None:
        """Queue a job; it gets a slot when one is free."""
        self.commands.put(("add", job))

    def cancel(self, job: Job) -> None:
        """Drop a job (waiting or live); a live one's slot frees before the next step."""
        self.commands.put(("cancel", job))

    def close(self) -> None:
        """Stop the thread after the current step."""
        self.commands.put(("stop", None))

    def _run(self) -> None:
        try:
            self.engine = self.make_engine()
        except BaseException as e:  # noqa: BLE001 - reported to every request
            self.error = e
        self.ready.set()
        if self.error is not None:
            return
        while True:
            if not self._take(block=not self.active and not self.waiting):
                return
            self._admit()
            if not self.active:
                continue
            try:
                self.engine.step()
            except Exception as e:  # noqa: BLE001 - a failed step fails its requests only
                for job in self.active:
                    job.stream.cancel()
                    job.put(APIError(500, f"the engine failed: {type(e).__name__}: {e}",
                                     type="server_error"))
                self.active.clear()
                continue
            self._flush()

    def _take(self, block: bool) -> bool:
        """Apply queued commands (waiting for one if `block`); False on stop."""
        while True:
            try:
                kind, job = self.commands.get(block=block)
            except queue.Empty:
                return True
            block = False
            if kind == "stop":
                return False
            if kind == "add":
                self.waiting.append(job)                     # type: ignore[arg-type]
            elif job in self.waiting:
                self.waiting.remove(job)                     # type: ignore[arg-type]
            elif job in self.active:
                job.stream.cancel()                          # type: ignore[union-attr]
                self.active.remove(job)                      # type: ignore[arg-type]

    def _admit(self) -> None:
        from .models.decoding import Sampling
        eng = self.engine
        while self.waiting and eng.live < eng.max_sequences:
            job = self.waiting.popleft()
            try:
                job.stream = eng.add_request(job.ids, Sampling(**job.sampling), job.max_new)
            except ValueError as e:
                job.put(APIError(400, str(e), "max_tokens" if "tokens" in str(e) else None))
                continue
            self.active.append(job)

    def _flush(self) -> None:
        """Hand each job its new pieces (and its end): one wake-up of each requests' loop a
        step, not one a piece."""
        batches: dict[asyncio.AbstractEventLoop, list[tuple[Job, list[Any]]]] = {}
        for job in list(self.active):
            s = job.stream
            items: list[Any] = list(s.pieces)
            s.pieces.clear()
            if s.finished:
                items.append(_Done(len(s.token_ids)))
                self.active.remove(job)
            if items:
                batches.setdefault(job.loop, []).append((job, items))
        for loop, batch in batches.items():
            loop.call_soon_threadsafe(_deliver, batch)


class _StopFilter:
    """Cuts text at the first stop string, holding back an end that may still become one (as
    LanguageModel.stream does)."""

    def __init__(self, stop: list[str]) -> None:
        self.stop, self.text, self.emitted, self.hit = stop, "", 0, False

    def feed(self, piece: str) -> str:
        from .models.llm import _find_stop, _stop_prefix
        self.text += piece
        cut = _find_stop(self.text, self.stop)
        if cut is not None:
            self.text, self.hit = self.text[:cut], True
            safe = cut
        else:
            safe = len(self.text) - _stop_prefix(self.text, self.stop)
        out, self.emitted = self.text[self.emitted:safe], max(self.emitted, safe)
        return out

    def tail(self) -> str:
        out, self.emitted = self.text[self.emitted:], len(self.text)
        return out


class Server:
    """The models, the engine worker, the embedding thread and the admitted-request count.
    Models load on first use unless given loaded (or on load())."""

    def __init__(self, model: Any = None, embedding_model: Any = "minilm",
                 max_queue: int = DEFAULT_MAX_QUEUE, max_context: int | None = None,
                 max_sequences: int = DEFAULT_MAX_SEQUENCES, device: Any = None,
                 engine_factory: Callable[..., Any] | None = None, int8: Any = None) -> None:
        for name, v, low in (("max_queue", max_queue, 0), ("max_sequences", max_sequences, 1)):
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
        self.model, self.embedding_model = model, embedding_model
        self.max_queue, self.max_context = max_queue, max_context
        self.max_sequences, self.device = max_sequences, device
        self.engine_factory = engine_factory
        self.int8 = int8
        self.in_flight = 0                  # admitted requests, running or waiting
        self.dropped = 0                    # completions cut short by a client that left
        self.embed_pool = ThreadPoolExecutor(1, "webrlx-embed")
        self.worker: EngineWorker | None = None
        self._start_lock = threading.Lock()

    def _make_engine(self) -> Any:
        if self.engine_factory is not None:
            return self.engine_factory(self.model, self.max_sequences, self.max_context,
                                       self.device)
        from .models.engine import Engine
        if isinstance(self.model, str):
            from .models import llm
            self.model = llm.load(self.model, self.device, max_context=self.max_context,
                                  int8=self.int8)
        return Engine(self.model, self.max_sequences, self.max_context)

    def _worker(self) -> EngineWorker:
        if self.model is None:
            raise APIError(404, "this server has no language model (serve-llm --model)",
                           "model", code="model_not_found")
        with self._start_lock:
            if self.worker is None:
                self.worker = EngineWorker(self._make_engine)
        return self.worker

    async def lm(self) -> Any:
        """The loaded language model (waits for the worker to load it)."""
        worker = self._worker()
        if not worker.ready.is_set():
            await asyncio.get_running_loop().run_in_executor(None, worker.ready.wait)
        if worker.error is not None:
            raise APIError(500, f"the language model failed to load: "
                           f"{type(worker.error).__name__}: {worker.error}",
                           type="server_error")
        return worker.engine.lm

    def _encoder(self) -> Any:
        if self.embedding_model is None:
            raise APIError(404, "this server has no embedding model", "model",
                           code="model_not_found")
        if isinstance(self.embedding_model, str):
            from .models import minilm
            name = self.embedding_model
            self.embedding_model = minilm.load(None if name == "minilm" else name,
                                               device=self.device)
        return self.embedding_model

    def load(self) -> None:
        """Load both models and compile the engine now rather than on the first request."""
        if self.model is not None:
            worker = self._worker()
            worker.ready.wait()
            if worker.error is not None:
                raise worker.error
        if self.embedding_model is not None:
            self.embed_pool.submit(self._encoder).result()

    def close(self) -> None:
        """Stop the engine worker."""
        if self.worker is not None:
            self.worker.close()

    def model_names(self) -> list[str]:
        names = []
        if self.model is not None:
            names.append(self.model if isinstance(self.model, str) else self.model.name)
        if self.embedding_model is not None:
            names.append("all-MiniLM-L6-v2")
        return names

    def admit(self) -> None:
        """Count one more request, or raise 429 past the slots and the queue limit."""
        if self.in_flight >= self.max_sequences + self.max_queue:
            raise APIError(429, f"the server is busy: {self.in_flight} requests are running or "
                           f"queued (max_sequences {self.max_sequences} + max_queue "
                           f"{self.max_queue}); retry later", None,
                           "requests", "rate_limit_exceeded")
        self.in_flight += 1

    async def pieces(self, prompt: str, max_tokens: int | None, sampling: dict[str, Any],
                     usage: dict[str, Any]) -> AsyncGenerator[str, None]:
        """Text pieces of one completion on the shared engine; `usage` gets the token counts
        and finish_reason. Leaving the iteration early cancels the request."""
        lm = await self.lm()
        worker = self._worker()
        ids = lm.tokenizer.encode(prompt)
        context = int(worker.engine.max_context)
        n = context - len(ids) if max_tokens is None else max_tokens
        if not ids or n < 1 or len(ids) + n > context:
            raise APIError(400, f"the prompt of {len(ids)} tokens + max_tokens {n} exceeds "
                           f"the context of {context} positions; shorten the prompt or lower "
                           f"max_tokens", "max_tokens" if max_tokens else "messages",
                           code="context_length_exceeded")
        usage["prompt_tokens"], usage["max_tokens"] = len(ids), n
        args = dict(sampling)
        stop = _StopFilter(args.pop("stop"))
        job = Job(ids, n, args, asyncio.get_running_loop())
        worker.submit(job)
        done: _Done | None = None
        try:
            while done is None and not stop.hit:
                # all the pieces that came since the last yield, as one text: a client (or an
                # SSE writer) that is behind gets fewer, longer chunks, not a backlog of events
                items = await job.out.get()
                while not job.out.empty():
                    items += job.out.get_nowait()
                text = ""
                for item in items:
                    if isinstance(item, APIError):
                        raise item
                    if isinstance(item, _Done):
                        done = item
                        text += stop.tail()
                        break
                    text += stop.feed(item)
                    if stop.hit:
                        break
                if text:
                    yield text
        finally:
            if done is None:
                worker.cancel(job)
                self.dropped += not stop.hit
        produced = done.tokens if done is not None else len(job.stream.token_ids)
        usage["completion_tokens"] = produced
        usage["finish_reason"] = "length" if produced >= n and not stop.hit else "stop"

    async def embed(self, texts: list[str]) -> tuple[Any, int]:
        """(n, 384) embeddings and the token count; 400 for empty or over-long texts."""
        from .models.minilm import MAX_LENGTH

        def run() -> tuple[Any, int]:
            enc = self._encoder()
            rows = [enc.tokenizer.encode(t, None) for t in texts]   # once: checked, encoded
            for i, (t, row) in enumerate(zip(texts, rows)):
                if not t.strip():
                    raise APIError(400, f"input[{i}] is empty", "input")
                if len(row) > MAX_LENGTH:
                    raise APIError(400, f"input[{i}] has {len(row)} tokens, over the model's "
                                   f"context of {MAX_LENGTH}", "input",
                                   code="context_length_exceeded")
            return enc.encode_ids(rows), sum(map(len, rows))
        return await asyncio.get_running_loop().run_in_executor(self.embed_pool, run)


def create_app(model: Any = None, embedding_model: Any = "minilm",
               max_queue: int = DEFAULT_MAX_QUEUE, max_context: int | None = None,
               max_sequences: int = DEFAULT_MAX_SEQUENCES, device: Any = None,
               engine_factory: Callable[..., Any] | None = None, int8: Any = None) -> FastAPI:
    """Build the app.

    Args:
        model: a .gguf path (loaded on first use) or a loaded LanguageModel; None: no chat.
        embedding_model: "minilm", a MiniLM directory, a loaded encoder, or None.
        max_queue: requests that may wait for a free sequence slot before 429s.
        max_context: KV positions per sequence (prompt + completion); None: the model's
            load(max_context=) for a path, its capacity for a loaded model.
        max_sequences: sequences the batched engine decodes at once (its KV slots).
        device: where models given by name load ("gpu:N", "reference"; None: the default).
        engine_factory: a test and bench hook: `(model, max_sequences, max_context, device)
            ->` an object with Engine's interface, made instead of Engine(load(model)) (the
            GPU-free stand-in of bench/engine_standin.py measures the front end alone).
        int8: llm.load(int8=) for a model given as a path: None, True, "decode" or "prefill"
            (int8 arithmetic for batched decode steps and long prompts on big models).
    """
    from .models.llm import ROLES
    server = Server(model, embedding_model, max_queue, max_context, max_sequences, device,
                    engine_factory, int8)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        server.close()

    app = FastAPI(title="webrlx OpenAI-compatible server", lifespan=lifespan)
    app.state.server = server

    @app.exception_handler(APIError)
    async def api_error(_: Request, e: APIError) -> JSONResponse:
        return e.response()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": n, "object": "model", "created": 0,
                                            "owned_by": "webrlx"}
                                           for n in server.model_names()]}

    async def complete(request: Request, body: dict[str, Any], prompt: str, chat: bool
                       ) -> Any:
        sampling, max_tokens = sampling_args(body), max_tokens_of(body)
        name = server.model_names()[0] if server.model is not None else None
        server.admit()
        kind = "chat.completion" if chat else "text_completion"
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        created = int(time.time())
        usage: dict[str, Any] = {}

        def choice(text: str | None, finish: str | None) -> dict[str, Any]:
            if chat and not body.get("stream"):
                return {"index": 0, "message": {"role": "assistant", "content": text},
                        "finish_reason": finish}
            if chat:                        # deltas: the role first, then text, then {}
                delta = {} if text is None else {"role": "assistant", "content": ""} \
                    if text == "" else {"content": text}
                return {"index": 0, "delta": delta, "finish_reason": finish}
            return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

        def usage_dict() -> dict[str, int]:
            p, c = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
            return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

        if not body.get("stream"):
            try:
                text = []
                async with contextlib.aclosing(
                        server.pieces(prompt, max_tokens, sampling, usage)) as gen:
                    async for piece in gen:
                        text.append(piece)
                        if await request.is_disconnected():
                            return None
            finally:
                server.in_flight -= 1
            return {"id": rid, "object": kind, "created": created, "model": name,
                    "choices": [choice("".join(text), usage["finish_reason"])],
                    "usage": usage_dict()}

        def event(ch: dict[str, Any]) -> str:
            return "data: " + json.dumps({"id": rid, "object": kind + ".chunk",
                                          "created": created, "model": name,
                                          "choices": [ch]}) + "\n\n"

        async def events() -> AsyncIterator[str]:
            try:
                async with contextlib.aclosing(
                        server.pieces(prompt, max_tokens, sampling, usage)) as gen:
                    try:
                        first = await gen.__anext__()
                    except StopAsyncIteration:
                        first = None
                    if chat:
                        yield event(choice("", None))
                    if first is not None:
                        yield event(choice(first, None))
                        async for piece in gen:
                            yield event(choice(piece, None))
                yield event(choice(None, usage["finish_reason"]))
                yield "data: [DONE]\n\n"
            except APIError as e:           # after the 200 went out: an error event
                yield "data: " + json.dumps({"error": {"message": e.message, "type": e.type,
                                                       "param": e.param, "code": e.code}})
                yield "\n\n"
            finally:
                server.in_flight -= 1
        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> Any:
        body = await json_body(request)
        messages = messages_of(body, ROLES)
        lm = await server.lm()
        try:
            prompt = lm.render_chat(messages)
        except ValueError as e:
            raise APIError(400, str(e), "messages") from None
        return await complete(request, body, prompt, chat=True)

    @app.post("/v1/completions", response_model=None)
    async def completions(request: Request) -> Any:
        body = await json_body(request)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise APIError(400, "'prompt' must be a non-empty string", "prompt")
        return await complete(request, body, prompt, chat=False)

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> dict[str, Any]:
        body = await json_body(request)
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str)
                                                               for t in texts):
            raise APIError(400, "'input' must be a string or a non-empty list of strings",
                           "input")
        if body.get("encoding_format", "float") != "float":
            raise APIError(400, "'encoding_format' must be 'float'", "encoding_format")
        server.admit()
        try:
            emb, tokens = await server.embed(texts)
        finally:
            server.in_flight -= 1
        return {"object": "list", "model": "all-MiniLM-L6-v2",
                "data": [{"object": "embedding", "index": i, "embedding": e.tolist()}
                         for i, e in enumerate(emb)],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}

    return app
