"""Which int8 paths a compile opted into: `compile(graph, ..., int8=...)`,
`llm.load(path, int8=...)`. The engines lower every plan of that executable inside `scope`, and
the rules (compiler/int8_decode.py, compiler/int8_prefill.py, and lower_quant.mmq_ok for the
tensor-core form under Dawn) ask `asked(kind)`. So two models in one process can differ: one
on int8, one on f32. The module flags (int8_decode.INT8_DECODE, int8_prefill.INT8_PREFILL,
smat.INT8) stay as the process-wide default that probes and tests flip.

The kinds, each off by default because int8 rounds x (and, for the prefill, the weight) where
the f32 path keeps 1e-3 x max|logit| of transformers:
- "decode": a batched decode step's GEMVs (2-15 rows) on x rounded to int8 per 32 values
  (llama.cpp's q8_1 path): ~5e-3 x max|y| off a product.
- "prefill": a long prompt's products on int8 x int8 (dp4a natively, i8 subgroup matrices
  under Dawn): ~4e-2 x max|logit| off on a 1B model.
This module is a leaf: it imports nothing of webrlx."""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

KINDS = ("decode", "prefill")
_ASKED: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar(
    "webrlx_int8", default=frozenset())


def parse(value: Any, where: str = "compile()") -> frozenset[str]:
    """The kinds named by an `int8=` argument: None or False (none), True or "all" (all of
    KINDS), one kind, or an iterable of kinds. Anything else raises ValueError naming `int8`."""
    if value is None or value is False:
        return frozenset()
    if value is True or value == "all":
        return frozenset(KINDS)
    kinds = [value] if isinstance(value, str) else value
    try:
        out = frozenset(kinds)
    except TypeError:
        out = None
    if out is None or not all(isinstance(k, str) and k in KINDS for k in out):
        raise ValueError(f"{where}: int8 must be None, a bool, 'all', or one or more of "
                         f"{', '.join(map(repr, KINDS))}, got {value!r}")
    return out


@contextlib.contextmanager
def scope(kinds: frozenset[str]) -> Iterator[None]:
    """Lower inside this: the rules see `kinds` as asked (on top of the module flags)."""
    token = _ASKED.set(kinds)
    try:
        yield
    finally:
        _ASKED.reset(token)


def asked(kind: str) -> bool:
    """Whether the compile being lowered asked for the int8 path `kind`."""
    return kind in _ASKED.get()
