"""The parser: the lexer's tokens to tuple ASTs (statements and expressions) for the evaluator;
malformed templates raise TemplateSyntaxError."""

from __future__ import annotations

import operator
from typing import Any, Callable

from .lexer import _CLOSE, _DESCRIBE, Token, _line_col, _syntax_error
from .values import FILTERS, TESTS, TemplateSyntaxError


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
