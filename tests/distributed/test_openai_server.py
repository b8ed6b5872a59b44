"""The OpenAI-compatible app (webrlx.openai_api) with SmolLM2 and MiniLM on lavapipe: greedy
chat and completions (streamed or not) equal the model's own generate/chat, embeddings equal
encode, bad requests get 400 in OpenAI's error shape and the server keeps serving; on uvicorn,
a request past --max-queue gets 429 and a client that disconnects mid-stream frees its place."""
from __future__ import annotations

import json
import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
from fastapi.testclient import TestClient  # noqa: E402

from webrlx.models import minilm, smollm2  # noqa: E402
from webrlx.openai_api import create_app  # noqa: E402

MESSAGES = [{"role": "system", "content": "You are brief."},
            {"role": "user", "content": "Name a fruit."}]
TOKENS = 8


@pytest.fixture(scope="module")
def lm():
    return smollm2.load(capacity=512)


@pytest.fixture(scope="module")
def encoder():
    return minilm.load()


@pytest.fixture(scope="module")
def client(lm, encoder):
    return TestClient(create_app(lm, encoder, max_queue=4))


def is_openai_error(r, status: int, param: str | None = None) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if param is not None:
        assert err["param"] == param
    return err


def sse(lines) -> tuple[list[dict], bool]:
    chunks, done = [], False
    for line in lines:
        if line.startswith("data: "):
            if line == "data: [DONE]":
                done = True
            else:
                chunks.append(json.loads(line[6:]))
    return chunks, done


def test_chat_equals_lm_chat(client, lm):
    want = "".join(lm.chat(MESSAGES, max_new_tokens=TOKENS))
    r = client.post("/v1/chat/completions", json={"model": "x", "messages": MESSAGES,
                                                  "max_tokens": TOKENS, "temperature": 0})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": want}
    assert body["usage"]["completion_tokens"] == lm.stats.new_tokens
    with client.stream("POST", "/v1/chat/completions",
                       json={"messages": MESSAGES, "max_tokens": TOKENS, "stream": True}) as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        chunks, done = sse(s.iter_lines())
    assert done and chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == want
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_completions_equal_generate(client, lm):
    prompt = "The capital of France is"
    want = lm.generate(prompt, TOKENS)
    r = client.post("/v1/completions", json={"prompt": prompt, "max_tokens": TOKENS})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == want
    with client.stream("POST", "/v1/completions",
                       json={"prompt": prompt, "max_tokens": TOKENS, "stream": True}) as s:
        chunks, done = sse(s.iter_lines())
    assert done and "".join(c["choices"][0]["text"] for c in chunks) == want


def test_embeddings_equal_encode(client, encoder):
    texts = ["A man is eating food.", "Quantum harbors glow at dusk, 42 times."]
    r = client.post("/v1/embeddings", json={"input": texts, "model": "all-MiniLM-L6-v2"})
    assert r.status_code == 200, r.text
    got = np.array([d["embedding"] for d in r.json()["data"]], np.float32)
    want = encoder.encode(texts)
    cos = np.sum(got * want, 1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert got.shape == (2, 384) and cos.min() >= 0.99999
    one = client.post("/v1/embeddings", json={"input": texts[0]}).json()["data"]
    assert len(one) == 1 and np.allclose(one[0]["embedding"], want[0], atol=1e-6)


def test_models_lists_both(client, lm):
    ids = [m["id"] for m in client.get("/v1/models").json()["data"]]
    assert ids == [lm.name, "all-MiniLM-L6-v2"]


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
    ("/v1/completions", {"prompt": 5}, "prompt"),
    ("/v1/embeddings", {"input": [1, 2]}, "input"),
    ("/v1/embeddings", {"input": ""}, "input"),
    ("/v1/embeddings", {"input": "word " * 400}, "input"),
])
def test_bad_requests_get_400_and_the_server_goes_on(client, path, body, param):
    if isinstance(body, bytes):
        r = client.post(path, content=body, headers={"content-type": "application/json"})
    else:
        r = client.post(path, json=body)
    err = is_openai_error(r, 400, param)
    assert err["type"] == "invalid_request_error"
    assert client.get("/v1/models").status_code == 200
    assert client.app.state.server.in_flight == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def live(lm, encoder):
    """The app with max_queue=0 on uvicorn in a thread: (base url, Server)."""
    app = create_app(lm, encoder, max_queue=0)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", app.state.server
    server.should_exit = True
    thread.join(30)


def wait_for(cond, seconds: float = 120) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return False


def test_queue_limit_429_and_disconnect_frees_the_slot(live, lm):
    url, server = live
    count = [{"role": "user", "content": "Count from 1 to 500, comma separated."}]
    long = {"messages": count, "max_tokens": 400, "stream": True}
    with httpx.Client(base_url=url, timeout=120) as c:
        with c.stream("POST", "/v1/chat/completions", json=long) as s:
            lines = (line for line in s.iter_lines() if line.startswith("data: "))
            first = json.loads(next(lines)[6:])
            assert first["choices"][0]["delta"]["role"] == "assistant"
            assert json.loads(next(lines)[6:])["choices"][0]["delta"]["content"]
            assert server.in_flight == 1
            busy = c.post("/v1/chat/completions", json={"messages": MESSAGES, "max_tokens": 2})
            err = is_openai_error(busy, 429)
            assert err["type"] == "requests" and err["code"] == "rate_limit_exceeded"
        # the client hung up mid-stream: its place frees at the next piece of text
        assert wait_for(lambda: server.in_flight == 0)
        assert server.dropped == 1                       # cut short, not run to its end
        prompt = "The capital of France is"
        r = c.post("/v1/completions", json={"prompt": prompt, "max_tokens": TOKENS})
        assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == lm.generate(prompt, TOKENS)
