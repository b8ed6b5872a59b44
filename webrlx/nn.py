"""Functional layers built from ops: linear, norms, attention, convolution, pooling."""
from __future__ import annotations

import math

from .tensor import Tensor


def _pair(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str = "none"
           ) -> Tensor:
    """x @ weight (+ bias) with an optional fused activation; weight is [in, out]."""
    return x.matmul(weight, bias=bias, activation=activation)


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalize over the last axis, then scale and shift."""
    if bias is not None and weight is None:
        raise ValueError("layer_norm: a bias needs a weight")
    extra = [t for t in (weight, bias) if t is not None]
    return x._op("layer_norm", *extra, eps=float(eps))


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """x / rms(x) over the last axis, then scale (Llama's RMSNorm)."""
    extra = [weight] if weight is not None else []
    return x._op("rms_norm", *extra, eps=float(eps))


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
              scale: float | None = None, causal: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v in one fused kernel.

    q: (batch, heads, q_len, head_dim); k, v: (batch, heads, kv_len, head_dim);
    mask: (batch, kv_len) int32, 0 = ignore that key (padding); causal: query i sees keys
    up to i + kv_len - q_len.
    """
    if scale is None:
        d = q.shape[-1]
        if not isinstance(d, int):
            raise ValueError("attention: head_dim must be static")
        scale = 1.0 / math.sqrt(d)
    extra = []
    if mask is not None:
        extra.append(mask.cast("int32"))
    return q._op("attention", k, v, *extra, scale=float(scale), causal=bool(causal))


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None,
           stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0,
           dilation: int | tuple[int, int] = 1, groups: int = 1) -> Tensor:
    """2-D convolution, NCHW input, weight (out, in/groups, kh, kw), zero padding."""
    extra = [bias] if bias is not None else []
    return x._op("conv2d", weight, *extra, stride=_pair(stride), padding=_pair(padding),
                 dilation=_pair(dilation), groups=int(groups))


def max_pool2d(x: Tensor, kernel: int | tuple[int, int], stride: int | tuple[int, int] | None
               = None, padding: int | tuple[int, int] = 0) -> Tensor:
    """Max pooling over NCHW windows (stride defaults to the kernel size)."""
    return x._op("max_pool2d", kernel=_pair(kernel), stride=_pair(stride or kernel),
                 padding=_pair(padding))


def avg_pool2d(x: Tensor, kernel: int | tuple[int, int], stride: int | tuple[int, int] | None
               = None, padding: int | tuple[int, int] = 0) -> Tensor:
    """Average pooling over NCHW windows; padded zeros count (torch's default)."""
    return x._op("avg_pool2d", kernel=_pair(kernel), stride=_pair(stride or kernel),
                 padding=_pair(padding))


def embedding(table: Tensor, ids: Tensor) -> Tensor:
    """Rows of table [vocab, dim] picked by int ids [...] -> [..., dim]."""
    return table.gather(ids, axis=0)


# -- quantized
def qlinear(x: Tensor, w: Tensor, format: str, n: int, k: int, bias: Tensor | None = None
            ) -> Tensor:
    """x @ W.T (+ bias) -> (..., n) float32, W an (n, k) weight kept as GGUF blocks.

    Args:
        x: float32 (or float16) (..., k) activations.
        w: uint32 param holding the raw blocks, row-major (n rows of k // block blocks),
            packed with webrlx.quant.words; dequantized inside the kernel, math in float32.
        format: a webrlx.quant.FORMATS name: "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k",
            "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs", or "f16" / "bf16" (GGUF
            float weights kept as stored, in blocks of 32).
        n: the weight's rows (GGUF dims are [k, n]).
        k: the weight's columns; a multiple of the format's block (32; 256 for K-quants).
        bias: optional float32 (n,).
    """
    extra = [bias] if bias is not None else []
    return x._op("qmatmul", w, *extra, format=str(format), n=int(n), k=int(k))


def qembedding(ids: Tensor, w: Tensor, format: str, n: int, k: int) -> Tensor:
    """Rows of a quantized (n, k) table picked by int32 ids [...] -> [..., k] float32.

    Args:
        ids: int32 ids in [0, n).
        w: uint32 param holding the table's raw GGUF blocks (webrlx.quant.words).
        format: a webrlx.quant.FORMATS name, as for qlinear.
        n: the table's rows (the vocabulary).
        k: the table's columns (the dim); a multiple of the format's block.
    """
    return w._op("qgather", ids, format=str(format), n=int(n), k=int(k))


# -- sampling
def sample(logits: Tensor, seen: Tensor, fparams: Tensor, iparams: Tensor) -> Tensor:
    """Draw one token per row on the device -> int32 (r,); sampling settings are run-time
    inputs (changing them never recompiles).

    Args:
        logits: float (V,) (r = 1) or (r, V), r possibly symbolic; finite or -inf (NaN / +inf
            give an unspecified token).
        seen: int32 (V,), > 0 for tokens already in the context (the repetition penalty);
            one array for every row.
        fparams: float32 (r, 4), a row [temperature, top_p, repetition_penalty, 0] per logits
            row; (4,) also for one row.
        iparams: int32 (r, 4), a row [top_k, seed, step, 0] per logits row; (4,) for one row.

    Each row is drawn exactly as a single row with its own params row (its seed and step).

    Semantics (webrlx/sampling.py is the numpy rule, the same math on every device):
    1. repetition penalty (HF's), in float32: for seen tokens l = x / rp if x > 0 else
       x * rp; other tokens l = x (rp = 1 disables it).
    2. temperature <= 0: greedy, the first index of max(l).
    3. else values compare by the order of their float32 values (-0.0 = +0.0). top_k (<= 0
       or >= V: off) keeps l >= t_k, the top_k-th largest l (ties at t_k all kept). With
       w = exp((l - max l) / temperature) and mass(t) = the sum of w over kept tokens with
       l >= t, top_p (>= 1: off) keeps l >= t_p, the largest t <= max(l) with
       mass(t) >= top_p * (sum of kept w): the smallest prefix by descending l whose
       softmax mass reaches top_p, ties at the boundary all kept (top_p <= 0: the max only).
    4. u = (pcg(seed + pcg(step)) >> 8) / 2**24 in [0, 1) (a counter-based integer hash,
       uint32 wraparound, sampling.uniform), and the token is the first kept index, in index
       order, whose running sum of w exceeds u * (sum of kept w); if rounding leaves none,
       the last kept token with w > 0. The GPU sums in float32, numpy in float64: their
       tokens differ only when u * total is within rounding of a running-sum boundary.

    IN PLACE: on a GPU, with one row, the kernel then sets seen[token] = 1 when `seen` is a
    graph state (g.state, or an in-place op's result on one), so a decode loop keeps `seen`
    on the device. Other `seen` tensors, and any `seen` of a run with r > 1 rows (rows drawn
    at once would race on it), are only read. The reference device cannot mutate: the
    numpy helper webrlx.sampling.mark_seen does it by hand, or add
    `seen.scatter_set(token, one)` (one = int32 [1]) to the graph, which updates the state on
    every device alike (a repeat of the same write on GPUs).

    One dispatch of one workgroup (256 threads) a row over the whole vocabulary, rows in
    parallel (V = 49152: about 25-75 us a row on an H100, a few ms on lavapipe).
    """
    return logits._op("sample", seen, fparams, iparams)


# -- decoder
def rope(x: Tensor, pos: Tensor, base: float, interleaved: bool = True,
         factors: tuple[float, ...] = ()) -> Tensor:
    """Rotary position embedding: row s of x is at position pos[0] + s.

    Pair i of each head (i < head_dim / 2) is rotated by the angle (pos + s) * base^(-2i/D):
    (x1, x2) -> (x1 cos - x2 sin, x1 sin + x2 cos). The angle is reduced exactly on the
    device, so positions in the thousands keep f32 accuracy.

    Args:
        x: float32 (batch, seq, heads, head_dim), head_dim even.
        pos: int32 (1,): the absolute position of row 0, read at run time (a decode step's
            graph is the same at every position); or (2, batch): per batch row
            [positions; slots] (the slots unused here).
        base: the frequency base (Llama 10000, SmolLM2 100000).
        interleaved: True rotates pairs (2i, 2i+1) (GPT-J, llama.cpp: GGUF q/k weights are
            permuted for this); False rotates (i, i + D/2) (NeoX, HF rotate_half).
        factors: head_dim / 2 divisors of the frequencies (llama.cpp's rope_freqs: Llama 3
            scaling; all equal: linear scaling); empty for none.
    """
    return x._op("rope", pos, base=float(base), interleaved=bool(interleaved),
                 factors=tuple(float(f) for f in factors))


def cache_write(cache: Tensor, new: Tensor, pos: Tensor) -> Tensor:
    """Write new rows into a KV cache: cache[b, h, pos + s, :] = new[b, s, h, :].

    IN PLACE on GPUs: the result IS the cache buffer, updated; nothing else may read the old
    cache value (read the result instead). Use it on a state (`Graph.state`), whose update
    persists to the next run (the reference device stores the result back). Rows pos + s
    outside [0, capacity) are not written.

    Args:
        cache: float32 (batch, kv_heads, capacity, head_dim).
        new: float32 (batch, seq, kv_heads, head_dim), the layout of a k/v projection
            reshaped by heads.
        pos: int32 (1,): the position of row 0 of new, read at run time.
            Or (2, batch): per batch row [positions; KV slots] (cache rows are slots,
            batched decoding).
    Returns: the updated cache, same shape.
    """
    return cache._op("cache_write", new, pos)


def cached_attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, pos: Tensor,
                     scale: float | None = None, window: int = 0, softcap: float = 0.0
                     ) -> Tensor:
    """Causal attention of new query rows over a KV cache (grouped-query heads).

    Query row s (at position pos + s) of head h attends to the keys 0 .. pos + s of kv head
    h // (heads // kv_heads): softmax(q k^T * scale) v. Only the first pos + seq cache rows
    are read (the valid length comes from the pos buffer at run time; the capacity is only
    an upper bound), so run nn.cache_write for the same rows first.

    Args:
        q: float32 (batch, seq, heads, head_dim) (rope's layout), head_dim % 4 == 0, <= 128.
        k_cache: float32 (batch, kv_heads, capacity, head_dim); heads % kv_heads == 0.
        v_cache: float32, the same shape as k_cache.
        pos: int32 (1,): the position of query row 0.
            Or (2, batch): per batch row [positions; KV slots] (cache rows are slots,
            batched decoding).
        scale: defaults to 1 / sqrt(head_dim).
        window: > 0: sliding-window attention, row at position r sees keys r - window < k
            <= r (Mistral, Gemma's local layers); 0: every earlier key.
        softcap: > 0: scores become tanh(score / softcap) * softcap before the softmax
            (Gemma 2); 0: off.
    Returns: float32 (batch, seq, heads, head_dim): reshape to (batch, seq, heads * head_dim)
        for the output projection without a copy.
    """
    if scale is None:
        d = q.shape[-1]
        if not isinstance(d, int):
            raise ValueError("cached_attention: head_dim must be static")
        scale = 1.0 / math.sqrt(d)
    return q._op("cached_attention", k_cache, v_cache, pos, scale=float(scale),
                 window=int(window), softcap=float(softcap))
