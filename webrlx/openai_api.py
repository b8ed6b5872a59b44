"""An OpenAI-compatible HTTP app (FastAPI) over one webrlx language model and one MiniLM encoder:
/v1/chat/completions and /v1/completions (streamed by server-sent events or not),
/v1/embeddings, /v1/models. `python -m webrlx serve-llm` runs it with uvicorn;
webrlx.distributed.serve_app runs it as Ray Serve replicas.

One sequence runs at a time (webrlx has no batched decoding engine yet): requests wait in a
queue of at most `max_queue`; past it they get 429. A client that disconnects is dropped at the
next piece of text and frees its place. Errors have OpenAI's shape,
`{"error": {"message", "type", "param", "code"}}`.
"""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

DEFAULT_MAX_QUEUE = 8


class APIError(Exception):
    """An HTTP error in OpenAI's shape."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 type: str = "invalid_request_error", code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.type, self.code = (
            status, message, param, type, code)

    def response(self) -> JSONResponse:
        return JSONResponse({"error": {"message": self.message, "type": self.type,
                                       "param": self.param, "code": self.code}}, self.status)


def _number(body: dict[str, Any], name: str, default: float, ok: Callable[[float], bool],
            rule: str, integer: bool = False) -> Any:
    v = body.get(name)
    if v is None:
        return default
    kinds = (int,) if integer else (int, float)
    if isinstance(v, bool) or not isinstance(v, kinds) or not ok(v):
        raise APIError(400, f"'{name}' must be {rule}, got {v!r}", name)
    return v


def sampling_args(body: dict[str, Any]) -> dict[str, Any]:
    """LanguageModel.stream() keyword arguments from an OpenAI request body (400 if bad)."""
    n = body.get("n")
    if n not in (None, 1):
        raise APIError(400, f"'n' must be 1 (one completion per request), got {n!r}", "n")
    stop = body.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and (not isinstance(stop, list) or len(stop) > 4
                             or not all(isinstance(s, str) and s for s in stop)):
        raise APIError(400, f"'stop' must be a string or up to 4 non-empty strings, "
                       f"got {stop!r}", "stop")
    if not isinstance(body.get("stream", False), bool):
        raise APIError(400, f"'stream' must be a boolean, got {body['stream']!r}", "stream")
    return {
        "temperature": _number(body, "temperature", 0.0, lambda v: 0 <= v <= 2,
                               "a number in [0, 2]"),
        "top_p": _number(body, "top_p", 1.0, lambda v: 0 < v <= 1, "a number in (0, 1]"),
        "top_k": _number(body, "top_k", 0, lambda v: v >= 0, "an integer >= 0", True),
        "repetition_penalty": _number(body, "repetition_penalty", 1.0, lambda v: v > 0,
                                      "a number > 0"),
        "seed": _number(body, "seed", 0, lambda v: 0 <= v < 1 << 31,
                        "an integer in [0, 2**31)", True),
        "stop": stop}


class Server:
    """The models, their worker threads (one each: a model serves one call at a time) and the
    queue count. Models load on first use unless given loaded."""

    def __init__(self, model: Any = None, embedding_model: Any = "minilm",
                 max_queue: int = DEFAULT_MAX_QUEUE, max_context: int | None = None) -> None:
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 0:
            raise ValueError(f"max_queue must be an int >= 0, got {max_queue!r}")
        self.model, self.embedding_model = model, embedding_model
        self.max_queue, self.max_context = max_queue, max_context
        self.in_flight = 0                  # admitted requests, running or waiting
        self.dropped = 0                    # completions cut short by a client that left
        self.lm_pool = ThreadPoolExecutor(1, "webrlx-lm")
        self.embed_pool = ThreadPoolExecutor(1, "webrlx-embed")
        self.lm_lock = asyncio.Lock()

    def _lm(self) -> Any:
        if self.model is None:
            raise APIError(404, "this server has no language model (serve-llm --model)",
                           "model", code="model_not_found")
        if isinstance(self.model, str):
            from .models import llm
            self.model = llm.load(self.model, max_context=self.max_context)
        return self.model

    def _encoder(self) -> Any:
        if self.embedding_model is None:
            raise APIError(404, "this server has no embedding model", "model",
                           code="model_not_found")
        if isinstance(self.embedding_model, str):
            from .models import minilm
            name = self.embedding_model
            self.embedding_model = minilm.load(None if name == "minilm" else name)
        return self.embedding_model

    def load(self) -> None:
        """Load both models now (in their threads) rather than on the first request."""
        self.lm_pool.submit(self._lm if self.model is not None else lambda: None).result()
        if self.embedding_model is not None:
            self.embed_pool.submit(self._encoder).result()

    def model_names(self) -> list[str]:
        names = []
        if self.model is not None:
            names.append(self.model if isinstance(self.model, str) else self.model.name)
        if self.embedding_model is not None:
            names.append("all-MiniLM-L6-v2")
        return names

    def admit(self) -> None:
        """Count one more request, or raise 429 past the queue limit."""
        if self.in_flight >= 1 + self.max_queue:
            raise APIError(429, f"the server is busy: {self.in_flight} requests are running or "
                           f"queued (max_queue {self.max_queue}); retry later", None,
                           "requests", "rate_limit_exceeded")
        self.in_flight += 1

    async def pieces(self, prompt: str, max_tokens: int | None, sampling: dict[str, Any],
                     usage: dict[str, Any]) -> AsyncIterator[str]:
        """Text pieces of one completion; `usage` gets the token counts and finish_reason."""
        loop = asyncio.get_running_loop()
        async with self.lm_lock:            # one sequence at a time on the model
            def start() -> Any:
                lm = self._lm()
                ids = lm.tokenizer.encode(prompt)
                n = lm.capacity - len(ids) if max_tokens is None else max_tokens
                usage["prompt_tokens"], usage["max_tokens"] = len(ids), n
                try:
                    return lm.stream(ids, max(n, 1), **sampling)
                except ValueError as e:
                    raise APIError(400, str(e), "max_tokens" if "tokens" in str(e) else None
                                   ) from None
            it = await loop.run_in_executor(self.lm_pool, start)
            finished = False
            try:
                while True:                 # a cancelled await drops `it`: the slot is free
                    piece = await loop.run_in_executor(self.lm_pool, next, it, None)
                    if piece is None:
                        break
                    yield piece
                finished = True
            finally:
                self.dropped += not finished
            stats = self._lm().stats
            usage["completion_tokens"] = stats.new_tokens
            usage["finish_reason"] = "length" if stats.new_tokens >= usage["max_tokens"] \
                else "stop"

    async def embed(self, texts: list[str]) -> tuple[Any, int]:
        """(n, 384) embeddings and the token count; 400 for empty or over-long texts."""
        from .models.minilm import MAX_LENGTH

        def run() -> tuple[Any, int]:
            enc = self._encoder()
            lengths = [len(enc.tokenizer.encode(t, None)) for t in texts]
            for i, (t, n) in enumerate(zip(texts, lengths)):
                if not t.strip():
                    raise APIError(400, f"input[{i}] is empty", "input")
                if n > MAX_LENGTH:
                    raise APIError(400, f"input[{i}] has {n} tokens, over the model's "
                                   f"context of {MAX_LENGTH}", "input",
                                   code="context_length_exceeded")
            return enc.encode(texts), sum(lengths)
        return await asyncio.get_running_loop().run_in_executor(self.embed_pool, run)


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise APIError(400, f"the request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise APIError(400, f"the request body must be a JSON object, got "
                       f"{type(body).__name__}")
    return body


def _messages(body: dict[str, Any], roles: tuple[str, ...]) -> list[dict[str, str]]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise APIError(400, "'messages' must be a non-empty list of {role, content} objects",
                       "messages")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in roles:
            raise APIError(400, f"messages[{i}].role must be one of {', '.join(roles)}",
                           f"messages[{i}].role")
        content = m.get("content")
        if isinstance(content, list):       # [{"type": "text", "text": ...}, ...]
            if not all(isinstance(p, dict) and p.get("type") == "text"
                       and isinstance(p.get("text"), str) for p in content):
                raise APIError(400, f"messages[{i}].content parts must be text parts",
                               f"messages[{i}].content")
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise APIError(400, f"messages[{i}].content must be a string",
                           f"messages[{i}].content")
        out.append({"role": m["role"], "content": content})
    return out


def _max_tokens(body: dict[str, Any]) -> int | None:
    name = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise APIError(400, f"'{name}' must be an integer >= 1, got {v!r}", name)
    return v


def create_app(model: Any = None, embedding_model: Any = "minilm",
               max_queue: int = DEFAULT_MAX_QUEUE, max_context: int | None = None) -> FastAPI:
    """Build the app.

    Args:
        model: a .gguf path (loaded on first use) or a loaded LanguageModel; None: no chat.
        embedding_model: "minilm", a MiniLM directory, a loaded encoder, or None.
        max_queue: requests that may wait behind the running one before 429s.
        max_context: KV cache positions of the language model.
    """
    from .models.llm import ROLES
    app = FastAPI(title="webrlx OpenAI-compatible server")
    server = Server(model, embedding_model, max_queue, max_context)
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
        sampling, max_tokens = sampling_args(body), _max_tokens(body)
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
                async for piece in server.pieces(prompt, max_tokens, sampling, usage):
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
                gen = server.pieces(prompt, max_tokens, sampling, usage)
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
        body = await _json_body(request)
        messages = _messages(body, ROLES)
        lm = await asyncio.get_running_loop().run_in_executor(server.lm_pool, server._lm)
        try:
            prompt = lm.render_chat(messages)
        except ValueError as e:
            raise APIError(400, str(e), "messages") from None
        return await complete(request, body, prompt, chat=True)

    @app.post("/v1/completions", response_model=None)
    async def completions(request: Request) -> Any:
        body = await _json_body(request)
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str) or not prompt:
            raise APIError(400, "'prompt' must be a non-empty string", "prompt")
        return await complete(request, body, prompt, chat=False)

    @app.post("/v1/embeddings")
    async def embeddings(request: Request) -> dict[str, Any]:
        body = await _json_body(request)
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
