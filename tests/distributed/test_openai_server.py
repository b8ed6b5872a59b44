"""The OpenAI-compatible app (webrlx.openai_api) on uvicorn, driven by the official `openai`
client: greedy chat and completions (streamed or not, with stop strings) equal the model's own
chat/generate, 16 concurrent streaming clients share the batched engine and each gets its own
text, bad requests get 400 in OpenAI's error shape and the server keeps serving, a request past
max_sequences + max_queue gets 429, and a client that disconnects mid-stream frees its slot.

The language model is the small random-weight llama fixture (tools/make_llm_fixtures.py);
WEBRLX_SERVER_FULL=1 runs the same tests on SmolLM2-135M. Embeddings: MiniLM against encode.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")

from webrlx.models import llm, minilm  # noqa: E402
from webrlx.openai_api import create_app  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "build" / "llm_fixtures" / "llama-q8_0.gguf"
FULL = os.environ.get("WEBRLX_SERVER_FULL") == "1"
CONTEXT = 256
MESSAGES = [{"role": "system", "content": "You are brief."},
            {"role": "user", "content": "Name a fruit."}]
PROMPTS = ["The capital of France is", "Once upon a time, there was a little robot named",
           "1 2 3", "def fibonacci(n):"]
TOKENS = 16


def _model_path() -> Path:
    if FULL:
        from webrlx.models.assets import smollm2_gguf
        return Path(smollm2_gguf(None))
    if not FIXTURE.exists():
        pytest.importorskip("torch")
        pytest.importorskip("transformers")
        sys.path.insert(0, str(ROOT / "tools"))
        import make_llm_fixtures as mk
        FIXTURE.parent.mkdir(parents=True, exist_ok=True)
        mk.write_gguf("llama", *mk.make_model("llama"), "Q8_0", FIXTURE)
    return FIXTURE


@pytest.fixture(scope="module")
def lm():
    return llm.load(_model_path(), max_context=CONTEXT)


@pytest.fixture(scope="module")
def encoder():
    return minilm.load()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Live:
    """create_app(...) on uvicorn in a thread: .url, .server (the app's Server), .stop()."""

    def __init__(self, *args, **kwargs) -> None:
        app = create_app(*args, **kwargs)
        app.state.server.load()
        self.server = app.state.server
        self.uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(),
                                                log_level="error"))
        self.thread = threading.Thread(target=self.uv.run, daemon=True)
        self.thread.start()
        while not self.uv.started:
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.uv.config.port}"

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key="none", max_retries=0,
                             timeout=120)

    def stop(self) -> None:
        self.uv.should_exit = True
        self.thread.join(30)


@pytest.fixture(scope="module")
def live(lm, encoder):
    """8 sequence slots and 8 queued requests: 16 clients fit."""
    srv = Live(lm, encoder, max_queue=8, max_sequences=8)
    yield srv
    srv.stop()


def is_openai_error(r, status: int, param: str | None = None) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if param is not None:
        assert err["param"] == param
    return err


def test_chat_equals_lm_chat(live, lm):
    want = "".join(lm.chat(MESSAGES, max_new_tokens=TOKENS))
    c = live.client()
    r = c.chat.completions.create(model="x", messages=MESSAGES, max_tokens=TOKENS,
                                  temperature=0)
    assert r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == want
    assert r.usage.completion_tokens == lm.stats.new_tokens
    assert r.choices[0].finish_reason == ("length" if lm.stats.new_tokens == TOKENS
                                          else "stop")
    chunks = list(c.chat.completions.create(model="x", messages=MESSAGES, max_tokens=TOKENS,
                                            stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == want
    assert chunks[-1].choices[0].finish_reason == r.choices[0].finish_reason


def test_completions_and_stop_strings_equal_generate(live, lm):
    c = live.client()
    for prompt in PROMPTS[:2]:
        want = lm.generate(prompt, TOKENS)
        r = c.completions.create(model="x", prompt=prompt, max_tokens=TOKENS)
        assert r.choices[0].text == want
        stream = c.completions.create(model="x", prompt=prompt, max_tokens=TOKENS,
                                      stream=True)
        assert "".join(ch.choices[0].text for ch in stream) == want
        stop = want[len(want) // 2: len(want) // 2 + 3]       # a stop string mid-completion
        cut = lm.generate(prompt, TOKENS, stop=[stop])
        assert len(cut) < len(want)
        r = c.completions.create(model="x", prompt=prompt, max_tokens=TOKENS, stop=stop)
        assert r.choices[0].text == cut and r.choices[0].finish_reason == "stop"
        stream = c.completions.create(model="x", prompt=prompt, max_tokens=TOKENS,
                                      stop=[stop], stream=True)
        assert "".join(ch.choices[0].text for ch in stream) == cut


def test_16_concurrent_streaming_clients(live, lm):
    """16 clients at once (8 decode together, 8 wait for a slot), each text its own."""
    want = {p: lm.generate(p, TOKENS) for p in PROMPTS}
    want_chat = "".join(lm.chat(MESSAGES, max_new_tokens=TOKENS))

    def one(i: int) -> tuple[str, str]:
        c = live.client()
        if i % 4 == 3:
            s = c.chat.completions.create(model="x", messages=MESSAGES, max_tokens=TOKENS,
                                          stream=True)
            return want_chat, "".join(ch.choices[0].delta.content or "" for ch in s)
        p = PROMPTS[i % 4]
        s = c.completions.create(model="x", prompt=p, max_tokens=TOKENS, stream=True)
        return want[p], "".join(ch.choices[0].text for ch in s)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(16)))
    assert [got for _, got in results] == [w for w, _ in results]
    assert live.server.in_flight == 0 and live.server.dropped == 0


def test_streams_coalesce_pieces_and_keep_the_text():
    """Behind a GPU-free stand-in engine (bench/engine_standin.py, tokens read back every
    READ_EVERY steps as the real engine does), 12 concurrent streams each get their whole
    text, cut at a stop string where one is asked, in one chunk per engine hand-off rather
    than one per token."""
    sys.path.insert(0, str(ROOT / "bench"))
    import engine_standin

    from webrlx.models.decoding import READ_EVERY
    srv = Live(str(_model_path()), None, max_queue=4, max_sequences=8, max_context=CONTEXT,
               engine_factory=engine_standin.factory("1,0.2"))
    lm = srv.server.worker.engine.lm            # the stand-in's: the model's tokenizer
    tokens = 40

    def one(i: int) -> tuple[str, str, int]:
        prompt = PROMPTS[i % 4]
        want = engine_standin.expected_text(lm, lm.tokenizer.encode(prompt), tokens)
        stop = [want[20:24]] if i % 3 == 0 else None
        if stop:
            want = want[:want.index(stop[0])]
        with httpx.Client(base_url=srv.url, timeout=120) as c:
            r = c.post("/v1/completions", json={"prompt": prompt, "max_tokens": tokens,
                                                "stream": True, "stop": stop})
        texts = [json.loads(line[6:])["choices"][0]["text"] for line in r.text.splitlines()
                 if line.startswith("data: ") and line != "data: [DONE]"]
        return want, "".join(texts), sum(1 for t in texts if t)

    try:
        with ThreadPoolExecutor(12) as pool:
            results = list(pool.map(one, range(12)))
    finally:
        srv.stop()
    assert [got for _, got, _ in results] == [want for want, _, _ in results]
    assert all(want for want, _, _ in results)
    # the engine reads tokens back every READ_EVERY steps and at each of the 12 prefills and
    # 12 ends; a stream gets one chunk a read at most (one a token: about `tokens` chunks)
    assert max(n for _, _, n in results) <= tokens // READ_EVERY + 2 * 12 + 1 < tokens
    assert srv.server.in_flight == 0


def test_queued_requests_start_when_every_slot_ends_at_once():
    """2 slots, 4 requests of one length: the first two end in the same step, and the two
    queued then start at once (the worker does not wait for another request to wake it)."""
    import asyncio

    from webrlx.openai_api import EngineWorker, Job, _Done
    sys.path.insert(0, str(ROOT / "bench"))
    import engine_standin
    make = engine_standin.factory("1,0.2")

    def slow_engine():
        time.sleep(0.3)                 # the 4 jobs are queued before the first step
        return make(str(_model_path()), 2, CONTEXT)

    async def run() -> list[int]:
        worker = EngineWorker(slow_engine)
        loop = asyncio.get_running_loop()
        jobs = [Job([1, 2, 3], 12, {}, loop) for _ in range(4)]
        for job in jobs:
            worker.submit(job)

        async def done(job: Job) -> int:
            while True:
                for item in await job.out.get():
                    if isinstance(item, _Done):
                        return item.tokens
        try:
            return await asyncio.wait_for(asyncio.gather(*map(done, jobs)), 30)
        finally:
            worker.close()
    # in a thread of its own: earlier tests in the session (Playwright's sync API) may leave an
    # event loop running in this one, where asyncio.run refuses to start
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, run()).result() == [12] * 4


def test_embeddings_equal_encode(live, encoder):
    texts = ["A man is eating food.", "Quantum harbors glow at dusk, 42 times."]
    r = live.client().embeddings.create(model="all-MiniLM-L6-v2", input=texts,
                                        encoding_format="float")
    got = np.array([d.embedding for d in r.data], np.float32)
    want = encoder.encode(texts)
    cos = np.sum(got * want, 1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert got.shape == (2, 384) and cos.min() >= 0.99999


def test_models_lists_both(live, lm):
    assert [m.id for m in live.client().models.list()] == [lm.name, "all-MiniLM-L6-v2"]


@pytest.mark.parametrize("path,body,param", [
    ("/v1/chat/completions", b"{not json", None),
    ("/v1/chat/completions", b"[1, 2]", None),
    ("/v1/chat/completions", {"messages": []}, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]},
     "messages[0].role"),
    ("/v1/chat/completions", {"messages": MESSAGES, "temperature": -1}, "temperature"),
    ("/v1/chat/completions", {"messages": MESSAGES, "top_p": 0}, "top_p"),
    ("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 0}, "max_tokens"),
    ("/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 100000}, "max_tokens"),
    ("/v1/chat/completions", {"messages": MESSAGES, "n": 2}, "n"),
    ("/v1/chat/completions", {"messages": MESSAGES, "stop": [""]}, "stop"),
    ("/v1/chat/completions", {"messages": MESSAGES, "repetition_penalty": 1.3},
     "repetition_penalty"),
    ("/v1/completions", {"prompt": 5}, "prompt"),
    ("/v1/embeddings", {"input": [1, 2]}, "input"),
    ("/v1/embeddings", {"input": ""}, "input"),
    ("/v1/embeddings", {"input": "word " * 400}, "input"),
])
def test_bad_requests_get_400_and_the_server_goes_on(live, path, body, param):
    with httpx.Client(base_url=live.url, timeout=60) as c:
        if isinstance(body, bytes):
            r = c.post(path, content=body, headers={"content-type": "application/json"})
        else:
            r = c.post(path, json=body)
        err = is_openai_error(r, 400, param)
        assert err["type"] == "invalid_request_error"
        assert c.get("/v1/models").status_code == 200
    assert live.server.in_flight == 0


def test_openai_client_raises_bad_request(live):
    with pytest.raises(openai.BadRequestError, match="temperature"):
        live.client().chat.completions.create(model="x", messages=MESSAGES, temperature=5)
    r = live.client().completions.create(model="x", prompt=PROMPTS[0], max_tokens=2)
    assert r.choices[0].text


def wait_for(cond, seconds: float = 120) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def test_queue_limit_429_and_disconnect_frees_the_slot(lm):
    """2 slots + 1 queued: the 4th request gets 429; a client that hangs up mid-stream frees
    its slot for the queued one long before any sequence could have run to its end, and after
    every client left, max_sequences new requests all get slots at once."""
    srv = Live(lm, None, max_queue=1, max_sequences=2)
    worker, long_tokens = srv.server.worker, CONTEXT - 32
    long = {"prompt": PROMPTS[1], "max_tokens": long_tokens, "stream": True}

    def first_text(lines) -> str:
        for line in lines:
            if line.startswith("data: ") and line != "data: [DONE]":
                text = json.loads(line[6:])["choices"][0]["text"]
                if text:
                    return text
        raise AssertionError("the stream ended without text")

    try:
        with httpx.Client(base_url=srv.url, timeout=120) as c:
            with c.stream("POST", "/v1/completions", json=long) as a, \
                    c.stream("POST", "/v1/completions", json=long) as b:
                a_lines, b_lines = a.iter_lines(), b.iter_lines()
                assert first_text(a_lines) and first_text(b_lines)
                with c.stream("POST", "/v1/completions", json=long) as q:
                    assert wait_for(lambda: srv.server.in_flight == 3 and
                                    len(worker.waiting) == 1)
                    busy = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
                    err = is_openai_error(busy, 429)
                    assert err["type"] == "requests" and err["code"] == "rate_limit_exceeded"
                    a.close()                            # hang up mid-stream
                    q_lines = q.iter_lines()             # (held: a dropped iterator hangs up)
                    assert first_text(q_lines)           # the queued one got a's slot
                    assert worker.engine.steps < long_tokens   # before any could finish
                    assert srv.server.dropped == 1
            assert wait_for(lambda: srv.server.in_flight == 0 and worker.engine.live == 0)
            assert srv.server.dropped == 3
            steps = worker.engine.steps
            with c.stream("POST", "/v1/completions", json=long) as a, \
                    c.stream("POST", "/v1/completions", json=long) as b:
                a_lines, b_lines = a.iter_lines(), b.iter_lines()
                assert first_text(a_lines) and first_text(b_lines)
                assert worker.engine.live == 2 and not worker.waiting
                assert worker.engine.steps - steps < long_tokens
            r = c.post("/v1/completions", json={"prompt": PROMPTS[0], "max_tokens": TOKENS})
            assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["text"] == lm.generate(PROMPTS[0], TOKENS)
    finally:
        srv.stop()
