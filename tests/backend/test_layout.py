"""Layout ops: reshape, permute/transpose, expand, slice/narrow/getitem, concat, gather."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import check, rand

import webrlx as wr


def test_reshape(backend):
    check(backend, lambda t: t.reshape(6, -1) * 2, lambda a: a.reshape(6, -1) * 2, rand(2, 3, 4))


@pytest.mark.parametrize("axes", [(1, 0, 2), (2, 0, 1), (0, 2, 1)], ids=str)
def test_permute(backend, axes):
    check(backend, lambda t: t.permute(axes), lambda a: np.transpose(a, axes), rand(3, 4, 257))


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_head_split_permutes_copy_as_vec4(backend, dtype):
    """(B, L, H, D) -> (B, H, L, D) with D % 4 == 0, and a sliced view of it: bare copies of
    4-byte elements the compiler moves as vec4 (codegen.copy_vec4); and one whose last dim
    moves (a transpose) or whose slice starts off a multiple of 4, which stay per element."""
    x = (rand(2, 6, 3, 8) * 100).astype(dtype)
    g = wr.Graph()
    t = g.input("x", x.shape, dtype)
    outs = [t.permute(0, 2, 1, 3), t[:, 1:5, :, 4:8].permute(0, 2, 1, 3), t.permute(0, 3, 2, 1),
            t[..., 1:5].permute(0, 2, 1, 3)]
    exe = wr.compile(g, outputs=outs, device=backend)
    got = exe.run({"x": x})
    for a, b in zip(got, [x.transpose(0, 2, 1, 3), x[:, 1:5, :, 4:8].transpose(0, 2, 1, 3),
                          x.transpose(0, 3, 2, 1), x[..., 1:5].transpose(0, 2, 1, 3)]):
        np.testing.assert_array_equal(a, b)
    if backend.name != "reference":
        names = [c.name for c in exe.plan({}).program.calls]
        assert names.count("copy_vec4[permute]") == 2, names


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_transposing_permutes_move_tiles(backend, dtype):
    """Permutes that swap the last two dims (attention's K transposed, .T) of plain and
    sliced views, with up to two batch dims left: index/transpose_tiles; three unmergeable
    batch dims or a moved innermost dim elsewhere: the per-element kernel. All as numpy."""
    x = (rand(2, 3, 40, 70) * 100).astype(dtype)
    cases = [lambda a: a.transpose(0, 1, 3, 2),
             lambda a: a[:, 1:, 5:37, 3:67].transpose(0, 1, 3, 2),
             lambda a: a.transpose(1, 0, 3, 2), lambda a: a[0, 0].T,
             lambda a: a.transpose(0, 3, 2, 1)]
    g = wr.Graph()
    t = g.input("x", x.shape, dtype)
    outs = [t.permute(0, 1, 3, 2), t[:, 1:, 5:37, 3:67].permute(0, 1, 3, 2), t.permute(1, 0, 3, 2),
            t[0, 0].T, t.permute(0, 3, 2, 1)]
    exe = wr.compile(g, outputs=outs, device=backend)
    for got, want in zip(exe.run({"x": x}), cases):
        np.testing.assert_array_equal(got, want(x))
    if backend.name != "reference":
        names = [c.name for c in exe.plan({}).program.calls]
        assert names.count("transpose[permute]") == 4, names


def test_transpose_2d(backend):
    check(backend, lambda t: t.T, lambda a: a.T, rand(3, 5))


def test_expand(backend):
    check(backend, lambda t: t.expand(2, 3, 4), lambda a: np.broadcast_to(a, (2, 3, 4)),
          rand(3, 1))


@pytest.mark.parametrize("key", [(slice(1, 3),), (slice(None), 2), (0, slice(2, None), None),
                                 (Ellipsis, slice(0, 1)), (-1,)], ids=str)
def test_getitem(backend, key):
    check(backend, lambda t: t[key], lambda a: a[key], rand(4, 5, 6))


def test_narrow(backend):
    check(backend, lambda t: t.narrow(1, 2, 3), lambda a: a[:, 2:5], rand(4, 7))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(backend, axis):
    check(backend, lambda a, b, c: wr.concat([a, b, c], axis=axis),
          lambda a, b, c: np.concatenate([a, b, c], axis=axis),
          rand(2, 3, 4), rand(2, 3, 4, seed=1), rand(2, 3, 4, seed=2))


def test_gather_embedding(backend):
    ids = np.array([[0, 5, 9], [3, 3, 1]], np.int32)
    check(backend, lambda t, i: wr.nn.embedding(t, i), lambda t, i: t[i], rand(10, 16), ids)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gather_axis(backend, axis):
    ids = np.array([2, 0, 1, 2], np.int32)
    check(backend, lambda t, i: t.gather(i, axis=axis), lambda t, i: np.take(t, i, axis=axis),
          rand(3, 3, 3), ids)


def test_take_along_axis(backend):
    ids = np.array([[0, 2], [1, 1], [2, 0]], np.int32)
    check(backend, lambda t, i: t.take_along_axis(i, 1),
          lambda t, i: np.take_along_axis(t, i, 1), rand(3, 3), ids)


def test_view_chain(backend):
    check(backend, lambda t: (t.reshape(4, 6).T[1:5] + 1).sum(axis=0),
          lambda a: (a.reshape(4, 6).T[1:5] + 1).sum(axis=0), rand(2, 12), rtol=1e-5)
