"""Hugging Face chat templates (the Jinja2 subset they use), rendered in pure Python.

GGUF files and tokenizer_config.json carry the chat template as Jinja text; jinja2 may be missing
inside Pyodide, so this module implements what those templates use with the stdlib alone: a lexer
that applies trim_blocks, lstrip_blocks and `-`/`+` whitespace control exactly as jinja2 does, a
parser to tuple ASTs, and an evaluator. `Template(source)` compiles once and renders many times.

Semantics follow transformers' ImmutableSandboxedEnvironment: `a.b` tries the attribute, then the
item (`a['b']` the other way round); names starting with `_`, mutating methods and str.format are
off limits; undefined values print as '', are falsy and iterate as empty; `tojson` is HF's
(ensure_ascii off, keys unsorted); `raise_exception(msg)` raises TemplateError(msg). Statements:
if/elif/else, for (loop.*, unpacking, an `if` filter, else, break/continue), set (name, tuple,
namespace attribute, block), raw, comments, and transformers' generation tags. Not supported:
macros, inheritance, include/import, call and filter blocks, recursive loops, autoescaping.
"""

from __future__ import annotations

import re
from collections import ChainMap
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from .jinja.evaluator import _Run
from .jinja.lexer import _line_col, _tokenize
from .jinja.parser import _Parser
from .jinja.values import GLOBALS, TemplateError, TemplateSyntaxError, UndefinedError

__all__ = ["Template", "TemplateError", "TemplateSyntaxError", "UndefinedError", "render_chat"]


# -- public API --------------------------------------------------------------------------------
class Template:
    """A template compiled once, rendered many times: `Template(source).render(**variables)`.

    trim_blocks and lstrip_blocks are jinja2's options of those names; transformers sets both.
    """

    def __init__(self, source: str, *, trim_blocks: bool = True,
                 lstrip_blocks: bool = True) -> None:
        source = re.sub(r"\r\n?", "\n", source)
        self.source = source[:-1] if source.endswith("\n") else source   # as jinja2: drop one
        tokens = _tokenize(self.source, trim_blocks, lstrip_blocks)
        self.body = _Parser(self.source, tokens).body()[0]

    def render(self, **context: Any) -> str:
        """Render with `context` as the variables, over the globals (range, namespace, ...)."""
        run = _Run()
        try:
            return "".join(run.exec(self.body, ChainMap({}, context, GLOBALS), []))
        except UndefinedError as e:
            raise UndefinedError(f"{e} ({self._where(run.pos)})") from None
        except TemplateError:
            raise                                            # raise_exception(message)
        except (TypeError, ValueError, LookupError, ArithmeticError, AttributeError) as e:
            raise TemplateError(f"{type(e).__name__}: {e} ({self._where(run.pos)})") from e

    def _where(self, pos: int) -> str:
        return "in the tag at line {}, column {}".format(*_line_col(self.source, pos))


@lru_cache(maxsize=16)
def _compiled(source: str) -> Template:
    return Template(source)


def render_chat(template: str, messages: list[dict[str, Any]], add_generation_prompt: bool = True,
                **extra: Any) -> str:
    """Render a HF chat template over `messages` as transformers' apply_chat_template does.

    Args:
        template: the Jinja text (`tokenizer.chat_template`); compiled once, then cached.
        messages: dicts, each with str 'role' and 'content' (other keys pass through).
        add_generation_prompt: end with the opening of an assistant turn.
        extra: more variables (bos_token, eos_token, tools, ...); `tools` and `documents`
            default to None, as in transformers.
    """
    if not isinstance(messages, (list, tuple)):
        raise ValueError(f"render_chat(): messages must be a list of dicts, got "
                         f"{type(messages).__name__}")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"render_chat(): messages[{i}] must be a dict with 'role' and "
                             f"'content', got {type(message).__name__}")
        for field in ("role", "content"):
            if not isinstance(message.get(field), str):
                got = f"a {type(message[field]).__name__}" if field in message else "missing"
                raise ValueError(f"render_chat(): messages[{i}][{field!r}] must be a str, "
                                 f"got {got}")
    extra = {"tools": None, "documents": None, **extra}
    return _compiled(template).render(messages=list(messages),
                                      add_generation_prompt=add_generation_prompt, **extra)
