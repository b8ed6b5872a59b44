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

import codecs
import json
import operator
import re
import warnings
from collections import ChainMap
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from numbers import Number
from typing import Any, Callable

Scope = ChainMap  # template variables: a child map per loop iteration and set block
Token = tuple  # (kind, value, offset into the source)


class TemplateError(ValueError):
    """An error in a template: its syntax, a failed operation, or raise_exception(message)."""


class TemplateSyntaxError(TemplateError):
    """A template that does not parse; `lineno` and `colno` (1-based) locate the problem."""

    def __init__(self, message: str, lineno: int, colno: int) -> None:
        super().__init__(f"line {lineno}, column {colno}: {message}")
        self.lineno, self.colno = lineno, colno


class UndefinedError(TemplateError):
    """A use of an undefined value other than printing, testing or iterating it."""


class Undefined:
    """Jinja's default Undefined: prints as '', is falsy and empty; other uses raise."""

    __slots__ = ("_name", "_obj", "_hint")

    def __init__(self, name: Any = None, obj: Any = None, hint: str | None = None) -> None:
        self._name, self._obj, self._hint = name, obj, hint

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        kind = type(self._obj).__name__
        raise UndefinedError(self._hint or (
            f"{self._name!r} is undefined" if self._obj is None else
            f"'{kind} object' has no attribute {self._name!r}" if isinstance(self._name, str)
            else f"{kind} object has no element {self._name!r}"))

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = _fail
    __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = __pow__ = _fail
    __rpow__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = __call__ = __getitem__ = _fail
    __int__ = __float__ = _fail
    __hash__ = object.__hash__

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._fail()

    def __str__(self) -> str:
        return ""

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)


class Namespace:
    """`namespace(...)`: the one object whose attributes `{% set ns.x = ... %}` may assign."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.attrs: dict[str, Any] = dict(*args, **kwargs)


class Loop:
    """The `loop` variable of a for loop."""

    def __init__(self, items: list[Any]) -> None:
        self._items, self.index0, self.length = items, 0, len(items)

    index = property(lambda self: self.index0 + 1, doc="1-based position.")
    revindex = property(lambda self: self.length - self.index0, doc="Items left, this included.")
    revindex0 = property(lambda self: self.length - self.index0 - 1, doc="Items left after.")
    first = property(lambda self: self.index0 == 0, doc="The first iteration.")
    last = property(lambda self: self.index0 == self.length - 1, doc="The last iteration.")
    previtem = property(lambda self: self._items[self.index0 - 1] if self.index0
                        else Undefined("previtem"), doc="The item before, if any.")
    nextitem = property(lambda self: Undefined("nextitem") if self.last
                        else self._items[self.index0 + 1], doc="The item after, if any.")

    def cycle(self, *values: Any) -> Any:
        """The value at this index, cycling through `values`."""
        return values[self.index0 % len(values)]


# -- attribute access, filters, tests, globals -------------------------------------------------
_UNSAFE = frozenset("append clear pop popitem setdefault update reverse insert sort extend remove "
                    "add discard format format_map".split())


def _lookup(obj: Any, key: Any, attribute_first: bool) -> Any:
    """`obj.key` (attribute_first) or `obj[key]`: attribute, item, in that order or the other;
    Undefined when neither exists. `_private` attributes and mutating methods are off limits."""
    if isinstance(obj, Namespace):
        return obj.attrs[key] if key in obj.attrs else Undefined(key, obj)
    for attribute in (attribute_first, not attribute_first):
        if attribute and isinstance(key, str) and not key.startswith("_"):
            if key in _UNSAFE and isinstance(obj, (str, dict, list, set)):
                return Undefined(key, obj, f"access to attribute {key!r} of "
                                           f"{type(obj).__name__!r} object is unsafe")
            if (value := getattr(obj, key, _lookup)) is not _lookup:
                return value
        elif not attribute:
            try:
                return obj[key]
            except (TypeError, LookupError):
                pass
    return Undefined(key, obj)


def _path(item: Any, path: Any, default: Any = None) -> Any:
    """The `attribute=` of filters: 'a.b.0' is item['a']['b'][0]."""
    for part in path.split(".") if isinstance(path, str) else [path]:
        item = _lookup(item, int(part) if str(part).isdigit() else part, False)
    return default if default is not None and isinstance(item, Undefined) else item


def tojson(value: Any, ensure_ascii: bool = False, indent: int | str | None = None,
           separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """transformers' `tojson` filter: json.dumps without HTML escaping, keys in their order."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _int(value: Any, default: int = 0, base: int = 10) -> Any:
    try:
        return int(value, base) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return default


def _items(value: Any) -> list[Any]:
    if not isinstance(value, (Mapping, Undefined)):
        raise TypeError("Can only get item pairs from a mapping.")
    return list(value.items()) if value else []


def _select(seq: Any, args: tuple[Any, ...], by_attribute: bool, keep: bool) -> list[Any]:
    """select / reject / selectattr / rejectattr: args are ([attribute,] [test, *test_args])."""
    attr, args = (args[0], args[1:]) if by_attribute else (None, args)
    test = TESTS[args[0]] if args else bool
    return [x for x in seq if bool(test(x if attr is None else _path(x, attr), *args[1:])) == keep]


def _map(seq: Any, *args: Any, attribute: Any = None, default: Any = None) -> list[Any]:
    if attribute is not None:
        return [_path(x, attribute, default) for x in seq]
    return [FILTERS[args[0]](x, *args[1:]) for x in seq]


def _sort(value: Any, reverse: bool = False, case_sensitive: bool = False,
          attribute: Any = None) -> list[Any]:
    def key(item: Any) -> Any:
        item = item if attribute is None else _path(item, attribute)
        return item.lower() if isinstance(item, str) and not case_sensitive else item
    return sorted(value, key=key, reverse=reverse)


def _unique(value: Any) -> list[Any]:
    seen: dict[Any, Any] = {}
    for x in value:
        seen.setdefault(x.lower() if isinstance(x, str) else x, x)
    return list(seen.values())


FILTERS: dict[str, Callable[..., Any]] = {
    "abs": abs, "capitalize": lambda s: str(s).capitalize(), "count": len,
    "default": lambda v, d="", boolean=False: d if isinstance(v, Undefined) or boolean and not v
    else v,
    "first": lambda seq: next(iter(seq), Undefined("first")), "int": _int, "items": _items,
    "join": lambda v, d="", attribute=None: str(d).join(
        str(x if attribute is None else _path(x, attribute)) for x in v),
    "last": lambda seq: ([Undefined("last")] + list(seq))[-1], "length": len, "list": list,
    "lower": lambda s: str(s).lower(), "map": _map,
    "reject": lambda seq, *a: _select(seq, a, False, False),
    "rejectattr": lambda seq, *a: _select(seq, a, True, False),
    "replace": lambda s, old, new, count=None: str(s).replace(
        str(old), str(new), -1 if count is None else count),
    "reverse": lambda v: v[::-1] if isinstance(v, str) else list(v)[::-1],
    "select": lambda seq, *a: _select(seq, a, False, True),
    "selectattr": lambda seq, *a: _select(seq, a, True, True), "sort": _sort, "string": str,
    "title": lambda s: "".join(w[0].upper() + w[1:].lower()
                               for w in re.split(r"([-\s({\[<]+)", str(s)) if w),
    "tojson": tojson, "trim": lambda s, chars=None: str(s).strip(chars),
    "unique": _unique,
    "upper": lambda s: str(s).upper(),
}
FILTERS["d"] = FILTERS["default"]
TESTS: dict[str, Callable[..., Any]] = {
    "boolean": lambda v: v is True or v is False, "callable": callable,
    "defined": lambda v: not isinstance(v, Undefined), "divisibleby": lambda v, n: v % n == 0,
    "even": lambda v: v % 2 == 0, "false": lambda v: v is False,
    "float": lambda v: isinstance(v, float), "in": lambda v, seq: v in seq,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "iterable": lambda v: hasattr(v, "__iter__") or hasattr(v, "__getitem__"),
    "lower": lambda v: str(v).islower(), "mapping": lambda v: isinstance(v, Mapping),
    "none": lambda v: v is None, "number": lambda v: isinstance(v, Number),
    "odd": lambda v: v % 2 == 1, "sameas": lambda v, other: v is other,
    "sequence": lambda v: hasattr(v, "__len__") and hasattr(v, "__getitem__"),
    "string": lambda v: isinstance(v, str), "true": lambda v: v is True,
    "undefined": lambda v: isinstance(v, Undefined), "upper": lambda v: str(v).isupper(),
}
for _names, _op in (("eq equalto ==", operator.eq), ("ne !=", operator.ne), ("ge >=", operator.ge),
                    ("lt lessthan <", operator.lt), ("le <=", operator.le),
                    ("gt greaterthan >", operator.gt)):
    TESTS.update(dict.fromkeys(_names.split(), _op))


def raise_exception(message: Any) -> None:
    """The `raise_exception(message)` global of HF templates."""
    raise TemplateError(str(message))


def _range(*args: int) -> range:
    if len(r := range(*args)) > 100_000:
        raise OverflowError("range() is limited to 100000 items")
    return r


GLOBALS: dict[str, Any] = {
    "dict": dict, "namespace": Namespace, "raise_exception": raise_exception, "range": _range,
    "strftime_now": lambda fmt: datetime.now().strftime(fmt),
}

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


# -- parser: tokens -> tuple AST ---------------------------------------------------------------
_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
    "+": operator.add, "-": operator.sub, "~": lambda a, b: f"{a}{b}", "*": operator.mul,
    "/": operator.truediv, "//": operator.floordiv, "%": operator.mod, "**": operator.pow}
# binary operators by rising precedence; level 2 is `not`, level 3 comparisons (they chain)
_BINARY = ({"or"}, {"and"}, set(), {"==", "!=", "<", "<=", ">", ">=", "in", "not in"},
           {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"})
_LITERALS = {"true": True, "True": True, "false": False, "False": False, "none": None,
             "None": None}
_ENDS = {"if": ("elif", "else", "endif"), "for": ("else", "endfor"), "set": ("endset",),
         "generation": ("endgeneration",)}


class _Parser:
    """Recursive descent after jinja2's parser; statements and expressions become tuples."""

    def __init__(self, src: str, tokens: list[Token]) -> None:
        self.src, self.toks, self.i, self.loops = src, tokens, 0, 0

    def at(self, kind: str, value: Any = None, ahead: int = 0) -> bool:
        tok = self.toks[min(self.i + ahead, len(self.toks) - 1)]
        return tok[0] == kind and (value is None or tok[1] == value)

    def skip(self, kind: str, value: Any = None) -> bool:
        found = self.at(kind, value)
        self.i += found
        return found

    def next(self) -> Token:
        tok = self.toks[self.i]
        self.i += tok[0] != "eof"
        return tok

    def fail(self, expected: str, tok: Token | None = None) -> TemplateSyntaxError:
        kind, value, pos = tok or self.toks[self.i]
        got = _DESCRIBE.get(kind) or (repr(value) if kind == "op" else f"{kind} {value!r}")
        return _syntax_error(self.src, f"expected {expected}, got {got}", pos)

    def expect(self, kind: str, value: Any = None) -> Token:
        if not self.at(kind, value):
            raise self.fail(repr(value) if value else _DESCRIBE.get(kind, kind))
        return self.next()

    # statements
    def body(self, ends: tuple[str, ...] = (), opener: Token = ()) -> tuple[list[Any], str]:
        """Parse up to one of the tags `ends`; return the nodes and that tag's name."""
        nodes: list[Any] = []
        while True:
            kind, value, pos = tok = self.next()
            if kind == "data":
                nodes.append(value)
            elif kind == "var_begin":
                nodes.append(("print", pos, self.tuple_()))
                self.expect("var_end")
            elif kind == "eof":
                if ends:
                    raise self.fail(f"{' or '.join(map(repr, ends))} to close {opener[1]!r} "
                                    f"(line {_line_col(self.src, opener[2])[0]})", tok)
                return nodes, ""
            else:
                name = self.expect("name")
                if name[1] in ends:
                    return nodes, name[1]
                if not hasattr(self, "stmt_" + name[1]):
                    raise self.fail(" or ".join(map(repr, ends)) or "a known tag", name)
                nodes.append(getattr(self, "stmt_" + name[1])(name))

    def block(self, opener: Token, ends: tuple[str, ...]) -> tuple[list[Any], str]:
        self.expect("block_end")
        return self.body(ends, opener)

    def closed(self, opener: Token, ends: tuple[str, ...]) -> list[Any]:
        body = self.block(opener, ends)[0]
        self.expect("block_end")
        return body

    def stmt_if(self, tok: Token) -> Any:
        branches, end = [], "elif"
        while end == "elif":
            cond = self.tuple_(cond=False)
            body, end = self.block(tok, _ENDS["if"])
            branches.append((cond, body))
        orelse = self.closed(tok, ("endif",)) if end == "else" else self.expect("block_end") and []
        return ("if", tok[2], branches, orelse)

    def stmt_for(self, tok: Token) -> Any:
        target = self.target()
        self.expect("name", "in")
        items = self.tuple_(cond=False)
        cond = self.expr() if self.skip("name", "if") else None
        self.loops += 1
        body, end = self.block(tok, _ENDS["for"])
        self.loops -= 1
        orelse = self.closed(tok, ("endfor",)) if end == "else" else self.expect("block_end") and []
        return ("for", tok[2], target, items, cond, body, orelse)

    def stmt_set(self, tok: Token) -> Any:
        if self.at("name") and self.at("op", ".", 1):
            name = self.next()[1]
            self.next()
            attr = self.expect("name")[1]
            self.expect("op", "=")
            node = ("setattr", tok[2], name, attr, self.tuple_())
        elif (target := self.target()) and self.skip("op", "="):
            node = ("set", tok[2], target, self.tuple_())
        else:
            return ("setblock", tok[2], target, self.closed(tok, _ENDS["set"]))
        self.expect("block_end")
        return node

    def stmt_generation(self, tok: Token) -> Any:        # transformers' AssistantTracker tags
        return ("if", tok[2], [(("const", True), self.closed(tok, _ENDS["generation"]))], [])

    def stmt_break(self, tok: Token) -> Any:
        if not self.loops:
            raise self.fail(f"{tok[1]!r} inside a for loop only; a tag", tok)
        self.expect("block_end")
        return (tok[1], tok[2])

    stmt_continue = stmt_break

    def target(self) -> Any:
        paren = self.skip("op", "(")
        names = [self.expect("name")[1]]
        while self.skip("op", ","):
            names.append(self.expect("name")[1])
        if paren:
            self.expect("op", ")")
        return ("name", names[0]) if len(names) == 1 and not paren else ("names", names)

    # expressions
    def tuple_(self, cond: bool = True) -> Any:
        """An expression, or a tuple if commas follow (`cond`: allow `x if c else y`)."""
        items = [self.expr() if cond else self.binary(0)]
        if not self.at("op", ","):
            return items[0]
        while self.skip("op", ",") and not (self.at("block_end") or self.at("var_end")
                                            or self.at("op", ")")):
            items.append(self.expr() if cond else self.binary(0))
        return ("tuple", items)

    def expr(self) -> Any:
        node = self.binary(0)
        while self.skip("name", "if"):
            cond = self.binary(0)
            node = ("cond", cond, node, self.expr() if self.skip("name", "else") else None)
        return node

    def binary(self, level: int) -> Any:
        if level == 2:
            return ("not", self.binary(2)) if self.skip("name", "not") else self.binary(3)
        if level == len(_BINARY):
            return self.unary()
        node, chain = self.binary(level + 1), []
        while op := self.operator(_BINARY[level]):
            right = self.binary(level + 1)
            if level == 3:
                chain.append((op, right))
            else:
                node = (op if op in ("and", "or") else "bin", op, node, right)
        return ("compare", node, chain) if chain else node

    def operator(self, ops: set[str]) -> str | None:
        kind, value, _ = self.toks[self.i]
        if "not in" in ops and self.at("name", "not") and self.at("name", "in", 1):
            self.i += 2
            return "not in"
        if kind in ("op", "name") and value in ops:
            self.i += 1
            return value
        return None

    def unary(self, filters: bool = True) -> Any:
        if self.skip("op", "-"):
            node = ("neg", self.unary(False))
        else:
            node = self.unary(False) if self.skip("op", "+") else self.primary()
        node = self.postfix(node)
        while filters:
            if self.skip("op", "|"):
                name = self.known(FILTERS, "filter")
                node = ("filter", name, node, *(self.args() if self.skip("op", "(") else ([], [])))
            elif self.skip("name", "is"):
                negated, name = self.skip("name", "not"), self.known(TESTS, "test")
                kind, value, _ = self.toks[self.i]
                if self.skip("op", "("):
                    args = self.args()[0]
                elif (kind in ("name", "string", "int", "float") or kind == "op" and value in "[{"
                      ) and value not in ("else", "or", "and"):
                    args = [self.postfix(self.primary())]      # `x is divisibleby 3`
                else:
                    args = []
                node = ("test", name, node, args)
                node = ("not", node) if negated else node
            elif self.at("op", "("):
                node = self.postfix(node)
            else:
                break
        return node

    def known(self, table: dict[str, Any], what: str) -> str:
        _, name, pos = self.expect("name")
        if name not in table:
            raise _syntax_error(self.src, f"unknown {what} {name!r}", pos)
        return name

    def primary(self) -> Any:
        kind, value, _ = tok = self.next()
        if kind == "name":
            return ("const", _LITERALS[value]) if value in _LITERALS else ("name", value)
        while kind == "string" and self.at("string"):
            value += self.next()[1]                        # 'adjacent' 'strings' concatenate
        if kind in ("string", "int", "float"):
            return ("const", value)
        if tok[:2] == ("op", "("):
            node = ("tuple", []) if self.at("op", ")") else self.tuple_()
            self.expect("op", ")")
            return node
        if kind == "op" and value in ("[", "{"):
            items: list[Any] = []
            while not self.skip("op", _CLOSE[value]):
                if items:
                    self.expect("op", ",")
                    if self.skip("op", _CLOSE[value]):
                        break
                items.append(self.expr())
                if value == "{":
                    self.expect("op", ":")
                    items[-1] = (items[-1], self.expr())
            return ("list" if value == "[" else "dict", items)
        raise self.fail("an expression", tok)

    def postfix(self, node: Any) -> Any:
        while True:
            if self.skip("op", "."):
                kind, value, _ = tok = self.next()
                if kind not in ("name", "int"):
                    raise self.fail("an attribute name or index after '.'", tok)
                node = ("attr", node, value) if kind == "name" else ("item", node, ("const", value))
            elif self.skip("op", "["):
                parts: list[Any] = [None]               # start[:stop[:step]], each optional
                while True:
                    if not (self.at("op", ":") or self.at("op", "]")):
                        parts[-1] = self.expr()
                    if len(parts) == 3 or not self.skip("op", ":"):
                        break
                    parts.append(None)
                if parts == [None]:
                    raise self.fail("an index or slice")
                self.expect("op", "]")
                node = ("item", node, parts[0] if len(parts) == 1 else ("slice", parts))
            elif self.skip("op", "("):
                node = ("call", node, *self.args())
            else:
                return node

    def args(self) -> tuple[list[Any], list[tuple[str, Any]]]:
        """Call arguments after '(': positional ones, then (name, value) keyword ones."""
        args: list[Any] = []
        kwargs: list[tuple[str, Any]] = []
        while not self.skip("op", ")"):
            if args or kwargs:
                self.expect("op", ",")
                if self.skip("op", ")"):
                    break
            if self.at("name") and self.at("op", "=", 1):
                name = self.next()[1]
                self.next()
                kwargs.append((name, self.expr()))
            else:
                args.append(self.expr())
        return args, kwargs


# -- evaluator ---------------------------------------------------------------------------------
class _LoopControl(Exception):
    """{% break %} or {% continue %}, caught by the innermost loop."""


class _Run:
    """One rendering: runs statements into `out`, keeping the last one's offset for errors."""

    def __init__(self) -> None:
        self.pos = 0

    def exec(self, body: list[Any], scope: Scope, out: list[str]) -> list[str]:
        for node in body:
            if type(node) is str:
                out.append(node)
                continue
            kind, self.pos = node[0], node[1]
            if kind == "print":
                out.append(str(self.eval(node[2], scope)))
            elif kind == "if":
                self.exec(next((b for c, b in node[2] if self.eval(c, scope)), node[3]), scope, out)
            elif kind == "for":
                self.loop(node, scope, out)
            elif kind == "set":
                self.assign(node[2], self.eval(node[3], scope), scope)
            elif kind == "setattr":
                if not isinstance(ns := scope.get(node[2]), Namespace):
                    raise TypeError(f"cannot assign attribute {node[3]!r} on {node[2]!r}: "
                                    "not a namespace() object")
                ns.attrs[node[3]] = self.eval(node[4], scope)
            elif kind == "setblock":
                self.assign(node[2], "".join(self.exec(node[3], scope.new_child(), [])), scope)
            else:
                raise _LoopControl(kind)
        return out

    def loop(self, node: Any, scope: Scope, out: list[str]) -> None:
        _, _, target, iterable, cond, body, orelse = node
        items = list(self.eval(iterable, scope))
        if cond is not None:
            items = [x for x in items if self.eval(cond, self.assign(target, x, scope.new_child()))]
        loop = Loop(items)
        for loop.index0, item in enumerate(items):    # a fresh scope per iteration, as jinja2
            try:
                self.exec(body, self.assign(target, item, scope.new_child({"loop": loop})), out)
            except _LoopControl as control:
                if control.args[0] == "break":
                    break
        if not items:
            self.exec(orelse, scope.new_child(), out)

    @staticmethod
    def assign(target: Any, value: Any, scope: Scope) -> Scope:
        if target[0] == "name":
            scope[target[1]] = value
            return scope
        if len(values := list(value)) != len(names := target[1]):
            raise ValueError(f"cannot unpack {len(values)} values into {len(names)} names "
                             f"{', '.join(names)}")
        scope.update(zip(names, values))
        return scope

    def eval(self, node: Any, scope: Scope) -> Any:
        return _EVAL[node[0]](self, node, scope)


def _compare(run: _Run, node: Any, scope: Scope) -> bool:
    left = run.eval(node[1], scope)
    for op, right_node in node[2]:
        if not _OPS[op](left, right := run.eval(right_node, scope)):
            return False
        left = right
    return True


_EVAL: dict[str, Callable[[_Run, Any, Scope], Any]] = {
    "const": lambda r, n, s: n[1],
    "name": lambda r, n, s: s[n[1]] if n[1] in s else Undefined(n[1]),
    "attr": lambda r, n, s: _lookup(r.eval(n[1], s), n[2], True),
    "item": lambda r, n, s: _lookup(r.eval(n[1], s), r.eval(n[2], s), False),
    "slice": lambda r, n, s: slice(*(p if p is None else r.eval(p, s) for p in n[1])),
    "bin": lambda r, n, s: _OPS[n[1]](r.eval(n[2], s), r.eval(n[3], s)),
    "and": lambda r, n, s: r.eval(n[2], s) and r.eval(n[3], s),
    "or": lambda r, n, s: r.eval(n[2], s) or r.eval(n[3], s),
    "not": lambda r, n, s: not r.eval(n[1], s),
    "neg": lambda r, n, s: -r.eval(n[1], s),
    "compare": _compare,
    "cond": lambda r, n, s: r.eval(n[2], s) if r.eval(n[1], s) else r.eval(n[3], s)
    if n[3] else Undefined(hint="an inline if-expression was false and has no else"),
    "filter": lambda r, n, s: FILTERS[n[1]](r.eval(n[2], s), *[r.eval(a, s) for a in n[3]],
                                            **{k: r.eval(v, s) for k, v in n[4]}),
    "call": lambda r, n, s: r.eval(n[1], s)(*[r.eval(a, s) for a in n[2]],
                                            **{k: r.eval(v, s) for k, v in n[3]}),
    "test": lambda r, n, s: TESTS[n[1]](r.eval(n[2], s), *[r.eval(a, s) for a in n[3]]),
    "list": lambda r, n, s: [r.eval(x, s) for x in n[1]],
    "tuple": lambda r, n, s: tuple(r.eval(x, s) for x in n[1]),
    "dict": lambda r, n, s: {r.eval(k, s): r.eval(v, s) for k, v in n[1]},
}


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
