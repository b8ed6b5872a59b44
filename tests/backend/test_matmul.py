"""matmul: 2-D, batched with broadcast batch dims, vectors, fused bias + activation."""
from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import check, rand
from test_nn import _attn

import webrlx as wr
from webrlx.activations import ACTIVATIONS

SHAPES = [((1, 1), (1, 1)), ((3, 5), (5, 7)), ((64, 64), (64, 64)), ((65, 17), (17, 130)),
          ((2, 3, 5), (5, 4)), ((4, 3, 5), (4, 5, 2)), ((1, 3, 5), (4, 5, 2)),
          ((2, 1, 3, 5), (1, 3, 5, 2)), ((5,), (5, 3)), ((3, 5), (5,)), ((2, 3, 8), (8,)),
          # K % 4 == 0 and N % 4 == 0: the register-tiled vec4 kernel, with partial tiles
          ((3, 20, 12), (3, 12, 36)), ((130, 260), (260, 132)), ((1, 8), (8, 4)),
          ((2, 1, 40, 16), (3, 16, 8)),
          # M <= 4 and N % 4 == 0: the split-K gemv kernel
          ((1, 300), (300, 36)), ((4, 7), (7, 4)), ((3, 2, 64), (3, 64, 8)), ((65,), (65, 260))]


@pytest.mark.parametrize("a,b", SHAPES, ids=str)
def test_matmul(backend, a, b):
    check(backend, lambda x, y: x @ y, np.matmul, rand(*a), rand(*b, seed=1), rtol=1e-5,
          atol=1e-5)


@pytest.mark.parametrize("kernel", ["matmul_vec4", "matmul_vec4_64", "matmul_vec4_db",
                                    "matmul_vec4_db64", "matmul_regs_8x2", "matmul_regs_16x1",
                                    "matmul_regs_4x2"])
@pytest.mark.parametrize("a,b", [((130, 260), (260, 132)), ((8, 130, 64), (64, 516)),
                                 ((3, 20, 12), (3, 12, 36)), ((1, 70, 8), (2, 8, 4)),
                                 ((37, 384), (384, 1544))], ids=str)
def test_each_tiled_kernel(backend, kernel, a, b, monkeypatch):
    """Each kernel of a vec4 matmul call (the register-tiled ones everywhere, the
    register-only matmul_regs on software adapters, where they are offered; the
    double-buffered 128 tiles, GPUs' own, forced on here)."""
    from webrlx.compiler import lower_matmul
    from webrlx.runtime import autotune
    monkeypatch.setattr(lower_matmul, "DB_TILES", kernel.startswith("matmul_vec4_db"))
    monkeypatch.setattr(autotune, "PREFER", kernel)   # the autotuner would pick one of them
    check(backend, lambda x, y: (x @ y).relu(), lambda x, y: np.maximum(x @ y, 0), rand(*a),
          rand(*b, seed=1), rtol=1e-5, atol=1e-5)


def test_matmul_1000(backend):
    check(backend, lambda x, y: x @ y, np.matmul, rand(1000, 1000), rand(1000, 1000, seed=1),
          rtol=1e-4, atol=1e-4)


def _gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


ACTS = {"none": lambda x: x, "relu": lambda x: np.maximum(x, 0), "gelu": _gelu,
        "silu": lambda x: x / (1 + np.exp(-x)), "tanh": np.tanh,
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi)
                                                      * (x + 0.044715 * x ** 3)))}


@pytest.mark.parametrize("k", [32, 33])
@pytest.mark.parametrize("act", sorted(ACTIVATIONS))   # every row of the table, in WGSL
def test_matmul_bias_activation(backend, act, k):
    check(backend, lambda x, w, b: x.matmul(w, bias=b, activation=act),
          lambda x, w, b: ACTS[act](x @ w + b), rand(2, 7, k), rand(k, 20, seed=1),
          rand(20, seed=2), rtol=1e-5, atol=1e-5)


def test_matmul_same_operand(backend):
    check(backend, lambda x: x @ x, lambda x: x @ x, rand(9, 9), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(17, 40, 9), (130, 256, 132)], ids=str)
def test_matmul_float16(backend, shape):
    m, k, n = shape
    check(backend, lambda x, y: x @ y, np.matmul, rand(m, k).astype(np.float16),
          rand(k, n, seed=1).astype(np.float16), rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("shape", [(130, 256, 260), (8, 3, 40, 64), (300, 36, 520)], ids=str)
def test_matmul_float16_wide_tiles(backend, shape, monkeypatch):
    """matmul_wide (128x256 tiles, offered with f16 math on GPUs), forced on every backend by
    pretending the adapter is not a CPU one: partial tiles, a batch, bias and relu."""
    from webrlx.device_info import DeviceInfo
    from webrlx.runtime import autotune
    *batch, m, k, n = shape
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: False))
    monkeypatch.setattr(autotune, "PREFER", "matmul_wide")
    ran: list[str] = []
    known = autotune.known
    monkeypatch.setattr(autotune, "known", lambda *a: (
        lambda v: ran.append(getattr(v, "name", None)) or v)(known(*a)))
    check(backend, lambda x, y, b: x.matmul(y, bias=b, activation="relu"),
          lambda x, y, b: np.maximum(x @ y + b, 0), rand(*batch, m, k).astype(np.float16),
          rand(k, n, seed=1).astype(np.float16), rand(n, seed=2).astype(np.float16),
          rtol=2e-2, atol=5e-2)
    f16 = getattr(backend, "info", None) is not None and "shader-f16" in backend.info.features
    assert not f16 or backend.name == "reference" or "matmul_wide" in ran


def test_matmul_float16_accumulating_in_float32(backend):
    a, b = rand(130, 256).astype(np.float16), rand(256, 132, seed=1).astype(np.float16)
    # only the final rounding to float16 remains: within 2 ulp of the float64 result
    check(backend, lambda x, y: x.matmul(y, accumulate="float32"), np.matmul, a, b,
          rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("m", [3, 40])
def test_unfused_bias_and_activation_nodes_fuse_correctly(backend, m):
    check(backend, lambda x, w, b: (x @ w + b).silu(), lambda x, w, b: ACTS["silu"](x @ w + b),
          rand(m, 16), rand(16, 12, seed=1), rand(12, seed=2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("software", [False, True])
def test_tiled_epilogue_as_overrides_and_as_uniforms(backend, software, monkeypatch):
    """Both forms of the register-tiled epilogue (matmul_vec4_io.wgsl) on every backend: bias
    and activation as pipeline overrides (GPUs) or read from the uniform (CPU adapters)."""
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: software))
    check(backend, lambda x, w, b: x.matmul(w, bias=b, activation="gelu").relu(),
          lambda x, w, b: np.maximum(_gelu(x @ w + b), 0), rand(3, 40, 32),
          rand(32, 20, seed=1), rand(20, seed=2), rtol=1e-5, atol=1e-5)
    check(backend, lambda x, w: x @ w, np.matmul, rand(70, 16), rand(16, 12, seed=1),
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m,k,n", [(128, 384, 384), (64, 1024, 260), (100, 512, 64)])
def test_split_k_on_gpus(backend, m, k, n, monkeypatch):
    """Thin f32 matmuls on GPUs cut K into pieces (lower_matmul.split_k): one tiled dispatch
    over the pieces, then a sum with bias and activation. Run here by pretending the adapter
    is not a CPU one."""
    from webrlx.compiler import lower_matmul
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: False))
    assert lower_matmul.split_k(m, n, k, 1, 1 << 27) > 1
    check(backend, lambda x, w, b: x.matmul(w, bias=b, activation="gelu"),
          lambda x, w, b: _gelu(x @ w + b), rand(m, k), rand(k, n, seed=1), rand(n, seed=2),
          rtol=1e-4, atol=1e-4)
    check(backend, lambda x, w: x @ w, np.matmul, rand(m, k), rand(k, n, seed=1), rtol=1e-4,
          atol=1e-4)


def _np_norm(v: np.ndarray, w: np.ndarray, b: np.ndarray | None, eps: float) -> np.ndarray:
    if b is None:                                            # rms_norm
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * w
    d = v - v.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + eps) * w + b


@pytest.mark.parametrize("m,k,n,op,bias", [(128, 384, 384, "layer_norm", True),
                                           (128, 1536, 384, "layer_norm", True),
                                           (64, 1024, 260, "rms_norm", False)])
def test_split_k_sum_in_the_residual_norm(backend, m, k, n, op, bias, monkeypatch):
    """norm(r + x @ w + b) on GPUs whose matmul splits K (MiniLM's attention output and FFN
    down): the norm's register-row kernel sums the partial products, the bias and the residual
    itself, so no sum kernel runs (lower_rows._summed_parts). Where the product is also read
    elsewhere (an output here) its sum kernel stays. Run here by pretending the adapter is not
    a CPU one."""
    from webrlx.compiler import lower_matmul
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: False))
    assert lower_matmul.split_k(m, n, k, 1, 1 << 27) > 1 or \
        lower_matmul.split_k_big(m, n, k, 1, 1 << 27) > 1
    norm = getattr(wr.nn, op)
    eps = 1e-5

    def fn(x, w, r, *gb):
        y = x.matmul(w, bias=gb[2]) if len(gb) == 3 else x @ w
        return norm(r + y, *gb[:2], eps=eps) if op == "layer_norm" else norm(r + y, gb[0], eps)

    def np_fn(x, w, r, *gb):
        y = x @ w + (gb[2] if len(gb) == 3 else 0)
        return _np_norm(r + y, gb[0], gb[1] if op == "layer_norm" else None, eps)

    extra = [rand(n, seed=3) + 1, rand(n, seed=4)] if op == "layer_norm" else [rand(n, seed=3)]
    if bias:
        extra.append(rand(n, seed=5))
    arrays = [rand(m, k), rand(k, n, seed=1), rand(m, n, seed=2), *extra]
    check(backend, fn, np_fn, *arrays, rtol=1e-4, atol=1e-4)
    if backend.name == "reference":
        return
    g = wr.Graph()
    ins = [g.input(f"a{i}", a.shape) for i, a in enumerate(arrays)]
    y = fn(*ins)
    names = [c.name for c in wr.compile(g, outputs=[y], device=backend).plan({}).program.calls]
    assert len(names) == 2 and "split-k" in names[0], names
    assert names[1] == f"split-K sum+add+{op}", names
    prod = ins[0].matmul(ins[1], bias=ins[5]) if bias else ins[0] @ ins[1]
    both = wr.compile(g, outputs=[norm(ins[2] + prod, *ins[3:5 if op == "layer_norm" else 4],
                                       eps=eps), prod], device=backend).plan({}).program.calls
    assert [c.name for c in both][1:] == ["elementwise[matmul split-K sum]", f"add+{op}"]


@pytest.mark.parametrize("act", ["gelu", "none"])
def test_split_k_read_by_a_matmul_keeps_its_sum(backend, act, monkeypatch):
    """act(x @ w1 + b1) @ w2 + b2 on GPUs where both products split K (MiniLM's FFN at one
    sentence): only a residual norm sums a product's pieces itself, so each product here runs
    its own sum kernel (the bias and the activation in it). Pretends the adapter is not a CPU
    one."""
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: False))
    arrays = [rand(2, 64, 384), rand(384, 1536, seed=1), rand(1536, seed=2),
              rand(1536, 384, seed=3) / 8, rand(384, seed=4)]

    def fn(x, w1, b1, w2, b2):
        return x.matmul(w1, bias=b1, activation=act).matmul(w2, bias=b2)

    check(backend, fn, lambda x, w1, b1, w2, b2: ACTIVATIONS[act].numpy(x @ w1 + b1) @ w2 + b2,
          *arrays, rtol=1e-4, atol=1e-4)
    if backend.name == "reference":
        return
    g = wr.Graph()
    ins = [g.input(f"a{i}", a.shape) for i, a in enumerate(arrays)]
    names = [c.name for c in wr.compile(g, outputs=[fn(*ins)], device=backend).plan({})
             .program.calls]
    assert names == ["matmul_vec4_64[split-k 4]", "elementwise[matmul split-K sum]",
                     "matmul_vec4_64[split-k 8]", "elementwise[matmul split-K sum]"], names


@pytest.mark.parametrize("unroll", [True, False])
@pytest.mark.parametrize("m,k,n", [(1, 4096, 1024), (1, 300, 36), (3, 259, 260), (4, 64, 8),
                                   (2, 7, 4)])
def test_gemv_k_loop_unrolled_and_not(backend, m, k, n, unroll, monkeypatch):
    """matmul/gemv with its K loop four steps at a time (GPUs' default) and one at a time
    (software adapters'), forced on every backend: K not a multiple of 4 x 64 slices leaves a
    remainder, K under one unrolled step (7) none; 1-4 rows, bias and activation."""
    from webrlx.compiler import lower_matmul
    monkeypatch.setattr(lower_matmul, "GEMV_UNROLL", unroll)
    check(backend, lambda x, w, b: x.matmul(w, bias=b, activation="gelu"),
          lambda x, w, b: _gelu(x @ w + b), rand(m, k), rand(k, n, seed=1), rand(n, seed=2),
          rtol=1e-4, atol=1e-4)
    check(backend, lambda x, w: x @ w, np.matmul, rand(m, k), rand(k, n, seed=1), rtol=1e-4,
          atol=1e-4)


@pytest.mark.parametrize("pieces", [2, 4])
def test_split_k_of_batched_products_on_gpus(backend, pieces, monkeypatch):
    """Batched f32 matmuls with K cut into pieces (lower_matmul.split_k_batched, forced): one
    dispatch over batch x pieces (the kernels' ZS), then a sum over each batch's pieces; both
    operands batched, A broadcast over B's batch, and attention's two products."""
    from webrlx.compiler import lower_attention, lower_matmul
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: False))
    monkeypatch.setattr(lower_matmul, "SPLIT_K_BATCHED", pieces)
    check(backend, lambda x, w: x @ w, np.matmul, rand(3, 40, 256), rand(3, 256, 12, seed=1),
          rtol=1e-4, atol=1e-4)
    check(backend, lambda x, w: x @ w, np.matmul, rand(40, 128), rand(3, 128, 20, seed=1),
          rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(lower_attention, "FORCE_PATH", "matmul")
    check(backend, lambda q, k, v: wr.nn.attention(q, k, v), _attn, rand(2, 3, 70, 64),
          rand(2, 3, 128, 64, seed=1), rand(2, 3, 128, 64, seed=2), rtol=1e-4, atol=1e-5)
    if backend.name != "reference":
        g = wr.Graph()
        x, w = g.input("x", (3, 40, 256)), g.input("w", (3, 256, 12))
        exe = wr.compile(g, outputs=[x @ w], device=backend)
        names = [c.name for c in exe.plan({}).program.calls]
        assert names[0].endswith(f"[split-k {pieces}]") and len(names) == 2, names


def test_split_k_of_batched_products_picks():
    """split_k_batched: batched products with K >= 1024 whose 64x64 tiles give under 512
    workgroups (attention's P V at 2048 keys: 384) double their pieces until they reach it."""
    from webrlx.compiler.lower_matmul import split_k_batched
    assert split_k_batched(2048, 64, 2048, 12, 1 << 30) == 2
    assert split_k_batched(512, 64, 4096, 4, 1 << 30) == 8        # (SPLIT_K_MAX)
    assert split_k_batched(2048, 64, 512, 12, 1 << 30) == 1        # K too short
    assert split_k_batched(2048, 64, 2048, 1, 1 << 30) == 1        # not batched
    assert split_k_batched(2048, 2048, 2048, 12, 1 << 30) == 1     # workgroups enough
    assert split_k_batched(2048, 64, 2048, 12, 1 << 22) == 1       # parts over a binding


def test_split_k_with_big_tiles_picks():
    """split_k_big: where 128x128 tiles give under 128 workgroups and K is at least 512, pieces
    up to 256 workgroups (1024^3: 64 tiles x 4); shapes split_k or big tiles already fill are
    left alone."""
    from webrlx.compiler.lower_matmul import split_k_big
    assert split_k_big(1024, 1024, 1024, 1, 1 << 27) == 4
    assert split_k_big(4096, 384, 1536, 1, 1 << 27) == 4       # m, n, k
    assert split_k_big(4096, 384, 384, 1, 1 << 27) == 1        # K too short
    assert split_k_big(2048, 2048, 2048, 1, 1 << 27) == 1      # 256 tiles
    assert split_k_big(1024, 1024, 1024, 2, 1 << 27) == 1      # batched


@pytest.mark.parametrize("m,k,n,pieces", [(200, 1024, 260, 4), (130, 512, 132, 2),
                                          (64, 768, 40, 8)])
def test_split_k_with_big_tiles_on_gpus(backend, m, k, n, pieces, monkeypatch):
    """Mid-size f32 matmuls on GPUs whose 128x128 tiles are too few cut K into pieces with those
    tiles (lower_matmul.split_k_big), forced here on every backend by pretending the adapter is
    not a CPU one: partial tiles at the edges, bias and activation in the sum."""
    from webrlx.compiler import lower_matmul
    from webrlx.device_info import DeviceInfo
    monkeypatch.setattr(DeviceInfo, "software", property(lambda self: False))
    monkeypatch.setattr(lower_matmul, "SPLIT_K_BIG", pieces)
    monkeypatch.setattr(lower_matmul, "split_k", lambda *a: 1)      # not the 64x64 split
    check(backend, lambda x, w, b: x.matmul(w, bias=b, activation="gelu"),
          lambda x, w, b: _gelu(x @ w + b), rand(m, k), rand(k, n, seed=1), rand(n, seed=2),
          rtol=1e-4, atol=1e-4)
