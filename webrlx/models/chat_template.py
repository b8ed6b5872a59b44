"""Hugging Face chat templates rendered with jinja2, in the environment transformers renders them.

GGUF files and tokenizer_config.json carry the chat template as Jinja text. This module compiles
it as transformers' `apply_chat_template` does (an ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, loopcontrols and the `{% generation %}` tag; the `raise_exception`,
`strftime_now`, `dict` and `namespace` globals; a `tojson` filter that keeps non-ASCII text and
takes indent, separators and sort_keys) and prepares messages as it does (None-valued keys
dropped, reasoning under all the names templates read), so a prompt reads exactly as
transformers writes it. jinja2 ships with Pyodide, so the same code runs in the browser.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.exceptions import SecurityError, TemplateError, TemplateSyntaxError, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment

__all__ = ["ChatTemplateError", "Template", "TemplateError", "TemplateSyntaxError",
           "UndefinedError", "render_chat"]

# Names a message's reasoning comes under; templates read the first (transformers' aliasing).
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


class ChatTemplateError(TemplateError):
    """A chat template failed to parse or raised while rendering; the message names it."""


class _Generation(jinja2.ext.Extension):
    """transformers' `{% generation %}...{% endgeneration %}`: renders its body (transformers
    also records where it lands, for assistant-token masks, which prompts do not need)."""

    tags = {"generation"}

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return str(caller())


def _raise_exception(message: str) -> None:
    raise TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class _TemplateDict:
    """`dict(...)` for templates, without the dict type's attributes to reach through."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """jinja2's namespace that refuses underscore names (no way to CPython internals)."""

    def __init__(*args: Any, **kwargs: Any) -> None:       # jinja2's own signature trick
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise SecurityError(f"Chat templates cannot store underscore-prefixed attributes on "
                                f"a namespace, but got {name!r}. Please rename the attribute.")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


# jinja2 before 3.1.6 (Pyodide 0.27 ships 3.1.3) sandboxes str.format only where a template calls
# it directly; reached through a name or the attr filter it escapes (CVE-2024-56326,
# CVE-2025-27516), so there templates get no str.format at all.
STR_FORMAT_UNSAFE = _version(jinja2.__version__) < (3, 1, 6)


def _str_format(obj: Any, name: Any) -> bool:
    return STR_FORMAT_UNSAFE and isinstance(obj, str) and name in ("format", "format_map")


class _Sandbox(ImmutableSandboxedEnvironment):
    """transformers' sandbox, closed to str.format where jinja2 is too old to wrap it (`a.b`,
    `a['b']` and the attr filter all ask one of these three)."""

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        return not _str_format(obj, attr) and bool(super().is_safe_attribute(obj, attr, value))

    def getattr(self, obj: Any, attribute: str) -> Any:
        if _str_format(obj, attribute):
            return self.unsafe_undefined(obj, attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if _str_format(obj, argument):
            return self.unsafe_undefined(obj, argument)
        return super().getitem(obj, argument)


def _environment() -> ImmutableSandboxedEnvironment:
    env = _Sandbox(trim_blocks=True, lstrip_blocks=True,
                   extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now,
                       dict=_TemplateDict(), namespace=_TemplateNamespace)
    return env


ENV = _environment()


def _who(name: str | None) -> str:
    return f"chat template of {name!r}" if name else "chat template"


class Template:
    """A chat template compiled once, rendered many times: `Template(source).render(**vars)`.

    `name` (the model's) goes into the message of every error the template gives.
    """

    def __init__(self, source: str, name: str | None = None) -> None:
        self.source, self.name = source, name
        try:
            self.compiled = ENV.from_string(source)
        except TemplateSyntaxError as e:
            raise ChatTemplateError(f"{_who(name)} does not parse: {e.message} "
                                    f"(line {e.lineno})") from e

    def render(self, **context: Any) -> str:
        """Render with `context` as the variables; errors become ChatTemplateError."""
        try:
            return self.compiled.render(**context)
        except ChatTemplateError:
            raise
        except TemplateError as e:
            # raise_exception(message) is the template's own word; anything else names its kind
            what = str(e) if type(e) is TemplateError else f"{type(e).__name__}: {e}"
            raise ChatTemplateError(f"{_who(self.name)} raised: {what}") from e
        except (TypeError, ValueError, LookupError, ArithmeticError, AttributeError) as e:
            raise ChatTemplateError(f"{_who(self.name)} raised: {type(e).__name__}: {e}") from e


@lru_cache(maxsize=16)
def _compiled(source: str, name: str | None) -> Template:
    return Template(source, name)


def _prepared(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """Check `messages` and copy them as transformers hands them to the template."""
    if not isinstance(messages, (list, tuple)):
        raise ValueError(f"render_chat(): messages must be a list of dicts, got "
                         f"{type(messages).__name__}")
    if not messages:
        raise ValueError("render_chat(): messages is empty; give at least one message")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"render_chat(): messages[{i}] must be a dict with 'role' and "
                             f"'content', got {type(message).__name__}")
        if not isinstance(message.get("role"), str):
            got = type(message["role"]).__name__ if "role" in message else "missing"
            raise ValueError(f"render_chat(): messages[{i}]['role'] must be a str, got {got}")
        copy = {k: v for k, v in message.items() if v is not None}
        reasoning = next((copy[k] for k in REASONING_FIELDS if k in copy), None)
        if reasoning is not None:
            copy = {"thinking": reasoning, **copy, "reasoning_content": reasoning}
        out.append(copy)
    return out


def render_chat(template: str, messages: Sequence[dict[str, Any]],
                add_generation_prompt: bool = True, *, model: str | None = None,
                tools: list[dict[str, Any]] | None = None,
                documents: list[dict[str, Any]] | None = None, **extra: Any) -> str:
    """Render a HF chat template over `messages` as transformers' apply_chat_template does.

    Args:
        template: the Jinja text (`tokenizer.chat_template`); compiled once, then cached.
        messages: dicts with a str 'role'; 'content' (str or a list of parts), 'tool_calls',
            'tool_call_id', 'reasoning_content' and other keys pass through, None ones dropped.
        add_generation_prompt: end with the opening of an assistant turn.
        model: the model's name, for error messages.
        tools: JSON schemas of the tools the model may call.
        documents: dicts with 'title' and 'text', for templates that take them.
        extra: more variables (bos_token, eos_token, enable_thinking, ...).

    Raises:
        ChatTemplateError: the template does not parse, or raised (`raise_exception`, an
            undefined value used, ...); the message names `model`.
    """
    if tools is not None and not all(isinstance(t, Mapping) for t in tools):
        raise ValueError("render_chat(): tools must be a list of JSON schema dicts")
    if documents is not None and not all(isinstance(d, Mapping) for d in documents):
        raise ValueError("render_chat(): documents must be a list of dicts with 'title' and "
                         "'text'")
    return _compiled(template, model).render(
        messages=_prepared(messages), tools=tools, documents=documents,
        add_generation_prompt=add_generation_prompt, **extra)
