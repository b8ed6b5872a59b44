"""The evaluator: runs the parser's tuple ASTs over a scope of template variables and produces the
rendered text, using values' attribute access, filters and tests."""

from __future__ import annotations

from collections import ChainMap
from typing import Any, Callable

from .parser import _OPS
from .values import FILTERS, TESTS, Loop, Namespace, Undefined, _lookup

Scope = ChainMap  # template variables: a child map per loop iteration and set block


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
