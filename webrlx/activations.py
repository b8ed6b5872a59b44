"""Activations in one table: name -> the graph op it fuses, its WGSL (f32 math on `x`), its numpy
rule and the code the matmul epilogue's ACT override selects. The op table, the fuser, the
reference device, the elementwise code generator and the WGSL `activate` helper all read it."""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise erf in float64."""
    return np.asarray(_erf(np.asarray(x, np.float64)), np.float64)   # rank 0 gives a scalar


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """GELU in float64: exact (erf) or torch's tanh approximation."""
    x = np.asarray(x, np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-np.asarray(x, np.float64)))


@dataclass(frozen=True)
class Activation:
    """One activation: how the graph spells it, how WGSL and numpy compute it."""
    name: str
    code: int                                  # the ACT override of fused matmul epilogues
    op: str | None                             # the unary graph op it fuses from (None: none)
    attrs: tuple[tuple[str, Any], ...]         # attrs that op must carry
    wgsl: str                                  # an f32 expression of `x` (helpers: common/math)
    numpy: Callable[[np.ndarray], np.ndarray]


ACTIVATIONS: dict[str, Activation] = {a.name: a for a in (
    Activation("none", 0, None, (), "x", lambda x: x),
    Activation("relu", 1, "relu", (), "fmax_(x, 0.0)", lambda x: np.maximum(x, 0)),
    Activation("gelu", 2, "gelu", (("approximate", "none"),), "gelu_erf(x)", gelu),
    Activation("gelu_tanh", 3, "gelu", (("approximate", "tanh"),), "gelu_tanh(x)",
               lambda x: gelu(x, "tanh")),
    Activation("silu", 4, "silu", (), "x * sigmoid_(x)", lambda x: np.asarray(x) * _sigmoid(x)),
    Activation("sigmoid", 5, "sigmoid", (), "sigmoid_(x)", _sigmoid),
    Activation("tanh", 6, "tanh", (), "tanh_(x)", lambda x: np.tanh(np.asarray(x, np.float64))),
)}


def activation_of(op: str, attrs: dict[str, Any]) -> str | None:
    """Return the name of the activation a unary node computes, or None."""
    for a in ACTIVATIONS.values():
        if a.op == op and all(attrs.get(k, "none") == v for k, v in a.attrs):
            return a.name
    return None


def unary_wgsl(op: str, attrs: dict[str, Any], arg: str) -> str | None:
    """The f32 WGSL of unary op applied to `arg` when it is an activation, else None."""
    name = activation_of(op, attrs)
    if name is None:
        return None
    return "(" + re.sub(r"\bx\b", f"({arg})", ACTIVATIONS[name].wgsl) + ")"


def wgsl_activate() -> str:
    """The WGSL `activate(x, act)` helper: a switch over every activation's code."""
    cases = "\n".join(f"        case {a.code}u: {{ return {a.wgsl}; }}"
                      for a in ACTIVATIONS.values() if a.name != "none")
    return ("// Epilogue activations by code (generated from webrlx/activations.py).\n"
            "fn activate(x: f32, act: u32) -> f32 {\n    switch act {\n" + cases +
            "\n        default: { return x; }\n    }\n}\n")
