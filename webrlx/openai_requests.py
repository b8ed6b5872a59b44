"""Reading and checking the request bodies of the OpenAI-compatible app (webrlx.openai_api):
JSON objects, sampling settings and `stop`, chat messages, token limits. A bad field raises
APIError, which the app answers in OpenAI's error shape, naming the field (`param`)."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse


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
    """Sampling settings and `stop` from an OpenAI request body (400 if bad)."""
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
    penalty = _number(body, "repetition_penalty", 1.0, lambda v: v > 0, "a number > 0")
    if penalty != 1.0:
        raise APIError(400, f"'repetition_penalty' must be 1.0 on this server (the batched "
                       f"engine has no penalty), got {penalty!r}", "repetition_penalty")
    return {
        "temperature": _number(body, "temperature", 0.0, lambda v: 0 <= v <= 2,
                               "a number in [0, 2]"),
        "top_p": _number(body, "top_p", 1.0, lambda v: 0 < v <= 1, "a number in (0, 1]"),
        "top_k": _number(body, "top_k", 0, lambda v: v >= 0, "an integer >= 0", True),
        "seed": _number(body, "seed", 0, lambda v: 0 <= v < 1 << 31,
                        "an integer in [0, 2**31)", True),
        "stop": stop or []}


async def json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise APIError(400, f"the request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise APIError(400, f"the request body must be a JSON object, got "
                       f"{type(body).__name__}")
    return body


def messages_of(body: dict[str, Any], roles: tuple[str, ...]) -> list[dict[str, str]]:
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


def max_tokens_of(body: dict[str, Any]) -> int | None:
    name = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise APIError(400, f"'{name}' must be an integer >= 1, got {v!r}", name)
    return v
