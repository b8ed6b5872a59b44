"""Shape/dtype rules of the language-model ops, which ops.py registers into OPS from RULES:
quantized matmul and gather over raw GGUF blocks, rope, the KV cache write (in place),
attention over the cache and sampling. Reference and lowering rules live with the others
(backends/reference.py, compiler/lower_decoder.py, compiler/lower_quant.py)."""
from __future__ import annotations

from typing import Any

from . import dtype as dt
from .shape import Shape, ShapeError


# -- quantized (GGUF blocks dequantized inside the kernels; layouts in quant.py) -------------
def _quant_weight(op: str, shape: Shape, dtype: dt.DType, attrs: dict[str, Any]) -> None:
    from . import quant
    fmt, n, k = attrs["format"], attrs["n"], attrs["k"]
    if fmt not in quant.FORMATS:
        raise ShapeError(f"{op}: format must be one of {tuple(quant.FORMATS)}, got {fmt!r}")
    block = quant.FORMATS[fmt].block
    if not isinstance(n, int) or not isinstance(k, int) or n < 1 or k < 1 or k % block:
        raise ShapeError(f"{op}: needs n >= 1 and k a positive multiple of {block} "
                         f"(whole {fmt} blocks), got n={n}, k={k}")
    want = quant.nwords(fmt, n, k)
    if dtype != dt.uint32 or tuple(shape) != (want,):
        raise ShapeError(f"{op}: w must hold the raw {fmt} blocks of an ({n}, {k}) weight as "
                         f"uint32 words, shape ({want},), but got {tuple(shape)} {dtype}; pack "
                         f"the bytes with webrlx.quant.words")


def _qmatmul(shapes, dtypes, attrs):
    x, n, k = shapes[0], attrs["n"], attrs["k"]
    _quant_weight("qmatmul", shapes[1], dtypes[1], attrs)
    if len(x) < 1 or x[-1] != k or not dtypes[0].is_float:
        raise ShapeError(f"qmatmul: x must be float32/float16 (..., {k}), got {x} {dtypes[0]}")
    if len(shapes) == 3 and (tuple(shapes[2]) != (n,) or dtypes[2] != dt.float32):
        raise ShapeError(f"qmatmul: bias must be float32 ({n},), got {shapes[2]} {dtypes[2]}")
    return tuple(x[:-1]) + (n,), dt.float32


def _qgather(shapes, dtypes, attrs):
    _quant_weight("qgather", shapes[0], dtypes[0], attrs)
    if dtypes[1] not in (dt.int32, dt.uint32):
        raise ShapeError(f"qgather: ids must be int32/uint32, got {dtypes[1]}")
    return tuple(shapes[1]) + (attrs["k"],), dt.float32


# -- decoder (rope, KV cache, attention over the cache) --------------------------------------
def rope_inv_freq(d: int, base: float, factors: tuple[float, ...] = ()) -> list[float]:
    """theta_i = base^(-2i/d) / factors[i] for i < d/2 (float64): rope's angle per position.
    factors (empty: all 1) are llama.cpp's rope_freqs (Llama 3 scaling) or a linear scale."""
    inv = [float(base) ** (-2.0 * i / d) for i in range(d // 2)]
    if factors:
        if len(factors) != d // 2:
            raise ShapeError(f"rope: factors must hold head_dim / 2 = {d // 2} values, got "
                             f"{len(factors)}")
        inv = [t / float(f) for t, f in zip(inv, factors, strict=True)]
    return inv


def _pos_arg(op: str, shape: Shape, dtype: dt.DType, batch: Any = None) -> bool:
    """Check pos: int32 (1,) (the position of row 0, every batch row alike) or (2, batch)
    (per batch row: [positions; KV slots]); True for the per-row form."""
    if dtype == dt.int32 and tuple(shape) == (1,):
        return False
    if dtype == dt.int32 and len(shape) == 2 and shape[0] == 2 and shape[1] == batch:
        return True
    raise ShapeError(f"{op}: pos must be int32 (1,) (the position of row 0) or (2, {batch}) "
                     f"(per batch row: [positions; KV slots]), got {shape} {dtype}")


def _rope(shapes, dtypes, attrs):
    x = shapes[0]
    if len(x) != 4 or not isinstance(x[3], int) or x[3] % 2 or dtypes[0] != dt.float32:
        raise ShapeError(f"rope: x must be float32 (batch, seq, heads, head_dim) with an even "
                         f"static head_dim, got {x} {dtypes[0]}")
    _pos_arg("rope", shapes[1], dtypes[1], x[0])
    if not attrs["base"] > 0:
        raise ShapeError(f"rope: base must be > 0, got {attrs['base']}")
    factors = attrs.get("factors", ())
    if factors and (len(factors) != x[3] // 2 or not all(f > 0 for f in factors)):
        raise ShapeError(f"rope: factors must be head_dim / 2 = {x[3] // 2} values > 0, got "
                         f"{len(factors)}")
    return x, dtypes[0]


def _cache_write(shapes, dtypes, attrs):
    cache, new = shapes[0], shapes[1]
    rows = len(new) == 4 and _pos_arg("cache_write", shapes[2], dtypes[2], new[0])
    if len(cache) != 4 or len(new) != 4 or (new[2], new[3]) != (cache[1], cache[3]) or \
            not rows and new[0] != cache[0]:
        raise ShapeError(f"cache_write: cache must be (batch or slots, kv_heads, capacity, "
                         f"head_dim) and new (batch, seq, kv_heads, head_dim), got {cache} and "
                         f"{new}")
    if dtypes[0] != dt.float32 or dtypes[1] != dt.float32:
        raise ShapeError(f"cache_write: cache and new must be float32, got {dtypes[:2]}")
    return cache, dtypes[0]


def _cached_attention(shapes, dtypes, attrs):
    q, k, v = shapes[:3]
    rows = len(q) == 4 and _pos_arg("cached_attention", shapes[3], dtypes[3], q[0])
    if len(q) != 4 or len(k) != 4 or tuple(k) != tuple(v) or q[3] != k[3] or \
            not rows and q[0] != k[0]:
        raise ShapeError(f"cached_attention: q must be (batch, seq, heads, head_dim) and the "
                         f"caches (batch or slots, kv_heads, capacity, head_dim), got {q}, {k}, "
                         f"{v}")
    if not isinstance(q[2], int) or not isinstance(k[1], int) or q[2] % k[1]:
        raise ShapeError(f"cached_attention: heads {q[2]} must be a multiple of kv_heads "
                         f"{k[1]}")
    if any(d != dt.float32 for d in dtypes[:3]):
        raise ShapeError(f"cached_attention: q and caches must be float32, got {dtypes[:3]}")
    window, softcap = attrs.get("window", 0), attrs.get("softcap", 0.0)
    if not isinstance(window, int) or window < 0 or not softcap >= 0:
        raise ShapeError(f"cached_attention: window must be an int >= 0 and softcap >= 0 (0: "
                         f"off), got {window!r}, {softcap!r}")
    return q, dtypes[0]


# -- sampling ---------------------------------------------------------------------------------
def _sample(shapes, dtypes, attrs):
    logits, seen, fparams, iparams = shapes
    v = logits[-1] if logits else None
    if len(logits) not in (1, 2) or not dtypes[0].is_float:
        raise ShapeError(f"sample: logits must be float (V,) or (r, V), got {logits} "
                         f"{dtypes[0]}")
    r = logits[0] if len(logits) == 2 else 1
    if tuple(seen) != (v,) or dtypes[1] != dt.int32:
        raise ShapeError(f"sample: seen must be int32 ({v},), got {seen} {dtypes[1]}")
    one = len(logits) == 1 or r == 1         # one row: params may also be (4,)
    for name, sh, d, want, what in (
            ("fparams", fparams, dtypes[2], dt.float32,
             "[temperature, top_p, repetition_penalty, 0]"),
            ("iparams", iparams, dtypes[3], dt.int32, "[top_k, seed, step, 0]")):
        if not (tuple(sh) == (r, 4) or one and tuple(sh) == (4,)) or d != want:
            raise ShapeError(f"sample: {name} must be {want.name} ({r}, 4), a row {what} "
                             f"per logits row ((4,) for one row), got {sh} {d}")
    return (r,), dt.int32


# (name, kind, shape rule) of each op here; ops that write an input in place: its index
RULES = [("qmatmul", "other", _qmatmul), ("qgather", "other", _qgather),
         ("rope", "other", _rope), ("cache_write", "other", _cache_write),
         ("cached_attention", "other", _cached_attention), ("sample", "other", _sample)]
UPDATES = {"cache_write": 0}
