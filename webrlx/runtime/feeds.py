"""Feed checking: turn what a caller passes into C-contiguous arrays of the declared dtypes,
bind the symbolic dims, or raise an InputError that names the input and the fix."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from .. import dtype as dt
from ..graph import Graph
from ..shape import Shape, bind
from .device_tensor import DeviceTensor


class InputError(ValueError):
    """A feed or param does not match what the graph declared."""


def fmt(shape: Shape) -> str:
    """A shape as Python writes a tuple: (2, 3), (4,), ()."""
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def coerce(where: str, what: str, value: Any, shape: Shape, d: dt.DType) -> Any:
    """Return value as a C-contiguous array of dtype d (a DeviceTensor passes through after its
    shape and dtype are checked), or raise InputError saying why. (Runs on every run of a
    decode loop: the messages are built only when one is raised.)"""
    if isinstance(value, DeviceTensor):
        value.check()
        if (value.dtype is not d and value.dtype != d) or len(value.shape) != len(shape) or any(
                isinstance(s, int) and s != a for s, a in zip(shape, value.shape)):
            raise InputError(f"{where}: {what} must be {fmt(shape)} {d}, got a DeviceTensor "
                             f"{fmt(value.shape)} {value.dtype}")
        return value
    if isinstance(value, np.ndarray) and value.dtype == d.np_dtype and \
            value.flags.c_contiguous and value.ndim == len(shape) and \
            all(not isinstance(s, int) or s == a for s, a in zip(shape, value.shape)):
        return value                          # already what the graph declared
    want = f"{fmt(shape)} {d}"
    try:
        arr = np.asarray(value)
    except ValueError as e:                  # ragged nested lists
        raise InputError(f"{where}: {what} must be {want}; it is not a rectangular array "
                         f"({e})") from None
    if arr.dtype == object:
        raise InputError(f"{where}: {what} must be {want}, got a "
                         f"{type(value).__name__} numpy cannot turn into numbers")
    got = f"{fmt(arr.shape)} {arr.dtype}"
    if arr.dtype != d.np_dtype:
        kind_ok = (arr.dtype.kind == "f" and d.is_float) or \
                  (arr.dtype.kind in "iu" and d.is_int) or (arr.dtype == np.bool_ == d.np_dtype)
        if not kind_ok:
            raise InputError(f"{where}: {what} must be {want}, got {got}. "
                             f"Cast it with .astype(np.{d.np_dtype.name}) if that is intended")
        if arr.dtype.kind in "iu" and arr.size:
            info = np.iinfo(d.np_dtype)
            if arr.min() < info.min or arr.max() > info.max:
                raise InputError(f"{where}: {what} must be {want}; values of {got} do not fit "
                                 f"in {d}")
        wide = arr
        with np.errstate(over="ignore"):
            arr = arr.astype(d.np_dtype)
        if wide.dtype.kind == "f" and wide.dtype.itemsize > arr.dtype.itemsize and arr.size \
                and np.isinf(arr).any() and (np.isinf(arr) & np.isfinite(wide)).any():
            big = float(np.abs(wide[np.isfinite(wide)]).max())
            raise InputError(f"{where}: {what} has finite {wide.dtype} values that overflow "
                             f"{d} (largest magnitude {big:.3g}, {d}'s max is "
                             f"{float(np.finfo(d.np_dtype).max):.3g}); scale or clip it "
                             f"first, or pass inf explicitly")
    if arr.ndim != len(shape) or any(isinstance(s, int) and s != a
                                     for s, a in zip(shape, arr.shape)):
        raise InputError(f"{where}: {what} must be {want}, got {got}")
    return np.asarray(arr, order="C")


def check_feeds(graph: Graph, feeds: Mapping[str, Any], params_set: Mapping[str, Any],
                needed: set[str] | None = None) -> tuple[dict[str, Any], dict[str, int]]:
    """Return (arrays, symbol binding) for feeds, or raise InputError naming the input.
    Inputs outside `needed` (those no output reads; default: none) may be left out."""
    if not isinstance(feeds, Mapping):
        raise InputError(f"run(): feeds must be a dict of input name -> array, got "
                         f"{type(feeds).__name__}")
    for name in feeds:
        if name not in graph.inputs:
            raise InputError(f"run(): unknown input {name!r}; inputs are {sorted(graph.inputs)}")
    arrays: dict[str, Any] = {}
    env: dict[str, int] = {}
    for name, nid in graph.inputs.items():
        node = graph.nodes[nid]
        if name not in feeds:
            if needed is not None and name not in needed:
                continue
            raise InputError(f"run(): missing input {name!r} ({fmt(node.shape)} {node.dtype})")
        arr = coerce("run()", f"input {name!r}", feeds[name], node.shape, node.dtype)
        for dim, n in zip(node.shape, arr.shape):
            if isinstance(dim, str) and "*" not in dim:
                if env.setdefault(dim, n) != n:
                    raise InputError(f"run(): input {name!r} has {dim}={n}, but an earlier "
                                     f"input bound {dim}={env[dim]}")
        for dim, n in zip(node.shape, arr.shape):
            if isinstance(dim, str) and "*" in dim and bind((dim,), env)[0] != n:
                raise InputError(f"run(): input {name!r} dim {dim} must be "
                                 f"{bind((dim,), env)[0]}, got {n}")
        arrays[name] = arr
    missing = [] if params_set.keys() >= graph.params.keys() else \
        [n for n in graph.params if n not in params_set]
    if missing:
        node = graph.nodes[graph.params[missing[0]]]
        raise InputError(f"run(): param {missing[0]!r} ({fmt(node.shape)} {node.dtype}) "
                         f"was never set; call exe.set_params({{{missing[0]!r}: array}})")
    return arrays, env
