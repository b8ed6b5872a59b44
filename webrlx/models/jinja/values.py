"""The values templates work with: the error classes, Undefined, namespace() and loop objects,
attribute access, and the filters, tests and globals (FILTERS, TESTS, GLOBALS) the evaluator calls.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Mapping
from datetime import datetime
from numbers import Number
from typing import Any, Callable


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
