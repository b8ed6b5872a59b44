"""Reductions, argmax, softmax, cumsum and topk over any axis, against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check, force_regs_rows, rand

import webrlx as wr

AXES = [None, 0, -1, (0, 2), 1]
REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("op", sorted(REDUCE))
def test_reduce(backend, op, axis, keepdims):
    x = rand(3, 5, 7, low=0.5 if op == "prod" else -1, high=1.5 if op == "prod" else 1)
    check(backend, lambda t: getattr(t, op)(axis=axis, keepdims=keepdims),
          lambda a: REDUCE[op](a, axis=axis, keepdims=keepdims), x, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [1, 3, 257, 1000, 100_000])
def test_sum_lengths(backend, n):
    check(backend, lambda t: t.sum(), np.sum, rand(n), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("short", [True, False], ids=["thread_per_row", "workgroup_per_row"])
@pytest.mark.parametrize("op", sorted(REDUCE) + ["argmax"])
def test_reduce_kernels_on_many_short_rows(backend, op, short, monkeypatch):
    """Rows of up to lower_rows.SHORT_ROW_N elements reduce a thread each (reduce/
    reduce_short), longer ones a workgroup each: both kernels on the same 1152 rows of 12
    (MiniLM's pooling), with NaNs, infinities and ties, as numpy."""
    from webrlx.compiler import lower_rows
    monkeypatch.setattr(lower_rows, "SHORT_ROW_N", 64 if short else 0)
    x = rand(3, 12, 384, low=0.5 if op == "prod" else -1, high=1.5 if op == "prod" else 1)
    x[0, 3, 5] = x[0, 7, 5] = 2.0                       # a tie for argmax: the first wins
    x[1, 4, 9] = np.nan
    x[2, :, 11] = -np.inf
    if op == "argmax":
        check(backend, lambda t: t.argmax(axis=1), lambda a: np.argmax(a, axis=1), x)
        return
    check(backend, lambda t: getattr(t, op)(axis=1), lambda a: REDUCE[op](a, axis=1), x,
          rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [65, 300, 1024, 1025])
@pytest.mark.parametrize("op", sorted(REDUCE) + ["argmax"])
def test_reduce_rows_shared_by_a_workgroup(backend, op, n):
    """13 rows (not a multiple of the 8 a workgroup takes up to 1024 elements; one a
    workgroup past that), each op as numpy, with a NaN and a tie."""
    x = rand(13, n, low=0.5 if op == "prod" else -1, high=1.5 if op == "prod" else 1)
    x[12, n - 1] = x[12, 0] = 3.0
    x[5, n // 2] = np.nan
    if op == "argmax":
        check(backend, lambda t: t.argmax(axis=1), lambda a: np.argmax(a, axis=1), x)
        return
    check(backend, lambda t: getattr(t, op)(axis=1), lambda a: REDUCE[op](a, axis=1), x,
          rtol=1e-4, atol=1e-5)


def test_int_sum_and_max(backend):
    x = np.arange(-30, 30, dtype=np.int32).reshape(6, 10)
    check(backend, lambda t: t.sum(axis=1), lambda a: a.sum(axis=1).astype(np.int32), x)
    check(backend, lambda t: t.max(axis=0), lambda a: a.max(axis=0), x)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax(backend, axis, keepdims):
    x = np.round(rand(4, 300, 3) * 4)   # many ties: the first index must win, as numpy
    check(backend, lambda t: t.argmax(axis=axis, keepdims=keepdims),
          lambda a: np.argmax(a, axis=axis, keepdims=keepdims).astype(np.int32), x,
          exact_dtype=False)


def test_argmax_flat(backend):
    check(backend, lambda t: t.argmax(), lambda a: np.int32(np.argmax(a)), rand(7, 9),
          exact_dtype=False)


def _softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 257), -1), ((4, 6, 3), 1),
                                        ((2, 1000), 0), ((17, 33), 1), ((3, 2000), -1)],
                         ids=str)
def test_softmax(backend, shape, axis):
    x = rand(*shape, low=-8, high=8)
    check(backend, lambda t: t.softmax(axis), lambda a: _softmax(a, axis), x, rtol=1e-5,
          atol=1e-7)
    check(backend, lambda t: t.log_softmax(axis), lambda a: np.log(_softmax(a, axis)), x,
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,axis", [((3, 9000), -1), ((9000, 2), 0), ((1, 2049), -1),
                                        ((2, 5000), 1)], ids=str)
def test_softmax_of_long_rows_split_over_workgroups(backend, shape, axis, monkeypatch):
    """Few long rows: reduce/softmax_parts + softmax_finish, chunks of a row per workgroup
    (chunks of 1024 here, so 2049 ends in a 1-element chunk); GPUs' wide-row form is off."""
    from webrlx.compiler import lower_rows
    monkeypatch.setattr(lower_rows, "WIDE_ROWS", False)
    monkeypatch.setattr(lower_rows, "SPLIT_ROW_MIN_N", 2000)
    monkeypatch.setattr(lower_rows, "SPLIT_ROW_CHUNK", 1024)
    x = rand(*shape, low=-30, high=30)
    check(backend, lambda t: t.softmax(axis), lambda a: _softmax(a, axis), x, rtol=1e-5,
          atol=1e-7)
    check(backend, lambda t: t.log_softmax(axis), lambda a: np.log(_softmax(a, axis)), x,
          rtol=1e-5, atol=1e-5)


def test_softmax_of_long_rows_split_over_workgroups_keeps_nan_and_inf(backend, monkeypatch):
    """The split form's chunk results combine as numpy: +inf in one chunk (inf - inf: the
    row is NaN), a NaN, an all -inf row (NaN), a -inf among finite values."""
    from webrlx.compiler import lower_rows
    monkeypatch.setattr(lower_rows, "WIDE_ROWS", False)
    monkeypatch.setattr(lower_rows, "SPLIT_ROW_MIN_N", 2000)
    monkeypatch.setattr(lower_rows, "SPLIT_ROW_CHUNK", 1024)
    x = rand(5, 5000, low=-5, high=5)
    x[0, 3000] = np.inf
    x[1, 10] = np.nan
    x[2, :] = -np.inf
    x[3, 4999] = -np.inf
    x[4, 1500] = 60.0
    with np.errstate(invalid="ignore"):
        check(backend, lambda t: t.softmax(-1), lambda a: _softmax(a, -1), x, rtol=1e-5,
              atol=1e-7)


def test_split_chunks_grow_with_rows_times_chunks():
    from webrlx.compiler.lower_rows import split_chunk
    assert split_chunk(1, 49152) == 2048 and split_chunk(8, 32768) == 2048
    assert split_chunk(32, 49152) == 4096 and split_chunk(127, 49152) == 16384
    assert split_chunk(1, 20_000_000) == 16384          # (then no further: 1221 chunks)


def test_long_softmax_rows_take_the_split_form_only_when_few():
    from webrlx.compiler.lower_rows import split_long_rows
    assert split_long_rows(32, 49152) and not split_long_rows(4096, 49152)
    assert not split_long_rows(32, 4096)


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 300), 1), ((4, 5, 6), 0)], ids=str)
def test_cumsum(backend, shape, axis):
    check(backend, lambda t: t.cumsum(axis), lambda a: np.cumsum(a, axis=axis), rand(*shape),
          rtol=1e-5, atol=1e-5)


def test_cumsum_int(backend):
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    check(backend, lambda t: t.cumsum(1), lambda a: np.cumsum(a, axis=1).astype(np.int32), x)


@pytest.mark.parametrize("shape,k,axis", [((10,), 3, 0), ((4, 1000), 5, 1), ((6, 3), 2, 0),
                                          ((2, 49152), 8, -1)], ids=str)
def test_topk(backend, shape, k, axis):
    x = np.round(rand(*shape) * 50)   # ties: lower index first (a stable descending sort)

    def np_topk(a):
        idx = np.take(np.argsort(-a, axis=axis, kind="stable"), np.arange(k), axis=axis)
        return np.take_along_axis(a, idx, axis=axis), idx.astype(np.int32)
    check(backend, lambda t: t.topk(k, axis=axis), np_topk, x, exact_dtype=False)


def test_zero_size_dims_follow_numpy(backend):
    """Empty tensors: elementwise results are empty, a sum over nothing is 0 and a mean NaN."""
    x = np.zeros((0, 4), np.float32)
    check(backend, lambda a: a * 2.0 + 1.0, lambda a: a * 2 + 1, x)
    check(backend, lambda a: a.sum(0), lambda a: a.sum(0), x)
    check(backend, lambda a: a.sum(), lambda a: a.sum(), x)
    check(backend, lambda a: a.mean(0), lambda a: np.full(4, np.nan), x)
    check(backend, lambda a: a.softmax(-1), lambda a: a, x)


def test_max_over_an_empty_axis_is_an_error_as_in_numpy():
    g = wr.Graph()
    with pytest.raises(wr.ShapeError, match="zero-size"):
        g.input("x", (0, 4)).max(0)



@pytest.mark.parametrize("shape,axis,min_n", [((3, 2048), -1, None), ((2, 8188), -1, None),
                                              ((5, 4100), -1, None), ((2052, 3), 0, None),
                                              ((9, 1000), -1, 4), ((17, 64), 1, 4)], ids=str)
def test_softmax_rows_in_registers(backend, shape, axis, min_n, monkeypatch):
    """reduce/softmax_regs (the GPUs' default for rows of 128..8192, n % 4 == 0), forced on
    every backend: 1, 2 or 8 rows a workgroup, vec4 a thread from 1 to 8, a partly filled last
    vec4 slot (4100), rows past the end in a workgroup (9 rows of 2, 17 of 8 a workgroup)."""
    used = force_regs_rows(monkeypatch, min_n)
    x = rand(*shape, low=-30, high=30)
    check(backend, lambda t: t.softmax(axis), lambda a: _softmax(a, axis), x, rtol=1e-5,
          atol=1e-7)
    check(backend, lambda t: t.log_softmax(axis), lambda a: np.log(_softmax(a, axis)), x,
          rtol=1e-5, atol=1e-5)
    assert backend.name == "reference" or used == ["reduce/softmax_regs"] * 2


@pytest.mark.parametrize("shape,axis", [((2, 8196), -1), ((3, 49152), -1), ((1, 20000), -1),
                                        ((12004, 2), 0)], ids=str)
def test_softmax_wide_rows_in_registers(backend, shape, axis, monkeypatch):
    """Rows of 8193..49152 in one workgroup of up to 1024 threads (lower_rows.wide_row_shape),
    forced on every backend (and for few rows): VPT 3 to 12, a partly filled last vec4 slot,
    a moved axis."""
    from webrlx.compiler import lower_rows
    monkeypatch.setattr(lower_rows, "WIDE_ROW_MIN_ROWS", 1)
    used = force_regs_rows(monkeypatch)
    x = rand(*shape, low=-30, high=30)
    x.flat[5] = 80.0                              # one dominant entry per tensor
    check(backend, lambda t: t.softmax(axis), lambda a: _softmax(a, axis), x, rtol=1e-5,
          atol=1e-7)
    check(backend, lambda t: t.log_softmax(axis), lambda a: np.log(_softmax(a, axis)), x,
          rtol=1e-5, atol=1e-4)
    if backend.name != "reference":
        wide = backend.info.max_workgroup_invocations >= 512
        assert used.count("reduce/softmax_regs") == (2 if wide else 0), used


def test_softmax_rows_in_registers_keep_nan_and_inf(backend, monkeypatch):
    """NaN, +inf and all -inf rows give numpy's results (NaN where numpy has NaN)."""
    used = force_regs_rows(monkeypatch)
    x = rand(4, 2048, low=-5, high=5)
    x[0, 7] = np.nan
    x[1, 100] = np.inf
    x[2, :] = -np.inf
    x[3, 5] = -np.inf
    with np.errstate(invalid="ignore"):
        check(backend, lambda t: t.softmax(-1), lambda a: _softmax(a, -1), x, rtol=1e-5,
              atol=1e-7)
    assert backend.name == "reference" or used == ["reduce/softmax_regs"]
