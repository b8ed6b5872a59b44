"""The lexer: template source text to a list of (kind, value, offset) tokens, applying trim_blocks,
lstrip_blocks and `-`/`+` whitespace control as jinja2 does."""

from __future__ import annotations

import codecs
import re
import warnings
from functools import lru_cache

from .values import TemplateSyntaxError

Token = tuple  # (kind, value, offset into the source)

# -- lexer ---------------------------------------------------------------------------------------
_TAG_START = re.compile(r"\{([{%#])([-+]?)")
_RAW_BEGIN = re.compile(r"\{%[-+]?\s*raw\s*(?:-%\}\s*|%\})")
_WS = re.compile(r"\s+")
_D = r"\d(?:_?\d)*"                                  # digits, maybe grouped: 1_000
_TOKEN = re.compile(rf"""(?P<ws>\s+)
    |(?P<float>(?<!\.){_D}(?:\.{_D}(?:[eE][+-]?{_D})?|[eE][+-]?{_D}))|(?P<int>{_D})
    |(?P<name>[^\W\d]\w*)|(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
    |(?P<op>//|\*\*|==|!=|<=|>=|[-+*/%~<>=()\[\]{{}},.:|])""", re.S | re.X)
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_DESCRIBE = {"block_end": "end of statement block '%}'", "var_end": "end of print statement '}}'",
             "eof": "end of template"}


@lru_cache(maxsize=2)
def _ends(trim: bool) -> dict[str, re.Pattern[str]]:
    nl = "\n?" if trim else ""      # trim_blocks: a block or comment tag eats one newline
    return {"%": re.compile(rf"\+%\}}|-%\}}\s*|%\}}{nl}"), "{": re.compile(r"-\}\}\s*|\}\}"),
            "#": re.compile(rf"\+#\}}|-#\}}\s*|#\}}{nl}"),
            "raw": re.compile(rf"\{{%([-+]?)\s*endraw\s*(?:\+%\}}|-%\}}\s*|%\}}{nl})")}


def _line_col(src: str, pos: int) -> tuple[int, int]:
    return src.count("\n", 0, pos) + 1, pos - src.rfind("\n", 0, pos)


def _syntax_error(src: str, message: str, pos: int) -> TemplateSyntaxError:
    return TemplateSyntaxError(message, *_line_col(src, pos))


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    with warnings.catch_warnings():   # jinja2 decodes escapes like Python, keeping unknown ones
        warnings.simplefilter("ignore")
        return codecs.decode(text.encode("ascii", "backslashreplace"), "unicode-escape")


def _tokenize(src: str, trim: bool, lstrip: bool) -> list[Token]:
    """Split the source into data and tag tokens, stripping whitespace as jinja2's lexer does."""
    ends, tokens, pos, line_starting = _ends(trim), [], 0, True

    def data(text: str, sign: str, block: bool, at: int) -> None:
        if sign == "-":
            text = text.rstrip()
        elif sign != "+" and lstrip and block:       # lstrip_blocks: only blanks before the tag
            start = text.rfind("\n") + 1
            if (start or line_starting) and _WS.fullmatch(text, start):
                text = text[:start]
        if text:
            tokens.append(("data", text, at))

    while pos < len(src):
        if (m := _TAG_START.search(src, pos)) is None:
            data(src[pos:], "", False, pos)
            break
        kind, sign = m.groups()
        raw = _RAW_BEGIN.match(src, m.start()) if kind == "%" else None
        data(src[pos:m.start()], sign, kind != "{", pos)
        if raw:
            if (end := ends["raw"].search(src, raw.end())) is None:
                raise _syntax_error(src, "missing {% endraw %} for this {% raw %}", m.start())
            line_starting = raw.group().endswith("\n")
            data(src[raw.end():end.start()], end.group(1), True, raw.end())
        elif kind == "#":
            if (end := ends["#"].search(src, m.end())) is None:
                raise _syntax_error(src, "missing '#}' to close this comment", m.start())
        else:
            end = _tag(src, kind, m, ends[kind], tokens)
        pos = end.end()
        line_starting = src[pos - 1] == "\n"
    tokens.append(("eof", None, len(src)))
    return tokens


def _tag(src: str, kind: str, start: re.Match[str], end_re: re.Pattern[str],
         tokens: list[Token]) -> re.Match[str]:
    """Tokenize the inside of a `{% %}` or `{{ }}` tag; return the match of its end."""
    tokens.append(("block_begin" if kind == "%" else "var_begin", None, start.start()))
    pos, stack = start.end(), []
    while True:
        if not stack and (end := end_re.match(src, pos)):
            tokens.append(("block_end" if kind == "%" else "var_end", None, pos))
            return end
        if pos >= len(src):
            raise _syntax_error(src, f"unexpected end of template, expected "
                                     f"{'%}' if kind == '%' else '}}'!r}" + (
                                         f" (unclosed {stack[-1]!r})" if stack else ""),
                                start.start())
        if (m := _TOKEN.match(src, pos)) is None:
            raise _syntax_error(src, f"unexpected character {src[pos]!r}", pos)
        group, value = m.lastgroup, m.group()
        if group == "op" and value in "([{":
            stack.append(_CLOSE[value])
        elif group == "op" and value in ")]}":
            if not stack or stack[-1] != value:
                expected = f", expected {stack[-1]!r}" if stack else ""
                raise _syntax_error(src, f"unexpected {value!r}{expected}", pos)
            stack.pop()
        if group == "string":
            value = _unescape(value[1:-1])
        elif group in ("int", "float"):
            value = int(value) if group == "int" else float(value)
        if group != "ws":
            tokens.append((group, value, pos))
        pos = m.end()
