"""Several steps per submit: `exe.run(feeds, repeat=k, carry={input: output index})` gives what
k single runs give when each feeds its carried outputs back (a tiny graph with a state, against
numpy and the single-run path), sync and async, and bad repeat / carry arguments raise errors
naming them. The language model's decode loop over it (llm.DECODE_STEPS_PER_SUBMIT) is tested
on the llama fixture in test_llm_families.py (native only: transformers makes its reference)."""
from __future__ import annotations

import numpy as np
import pytest
from helpers import run_coroutine

import webrlx as wr
from webrlx.runtime.feeds import InputError

CAP = 16


def _counter(backend):
    """nxt = ids * 3 + pos + 1 and pos_next = pos + 1 (carried), hist[pos_next] = nxt (a state),
    y = x * 2 + nxt (x fed once, not carried)."""
    g = wr.Graph()
    ids = g.input("ids", (1, 1), "int32")
    pos = g.input("pos", (1,), "int32")
    x = g.input("x", (1, 3), "float32")
    nxt = ids * 3 + pos.reshape(1, 1) + 1
    pos_next = pos + 1
    g.state("hist", (CAP,), "int32").scatter_set(pos_next, nxt.reshape(1))
    y = x * 2.0 + nxt.astype("float32")
    return wr.compile(g, outputs=[nxt, pos_next, y], device=backend)


def _numpy_counter(ids: int, pos: int, x: np.ndarray, k: int) -> tuple[int, int, np.ndarray,
                                                                        np.ndarray]:
    hist = np.zeros(CAP, np.int32)
    for _ in range(k):
        nxt = ids * 3 + pos + 1
        pos += 1
        hist[pos] = nxt
        ids = nxt
    return ids, pos, x * 2 + ids, hist


CARRY = {"ids": 0, "pos": 1}


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_repeat_equals_single_runs_and_numpy(backend, keep, k):
    x = np.array([[0.5, -1.0, 2.0]], np.float32)
    feeds = {"ids": np.array([[2]], np.int32), "pos": np.array([1], np.int32), "x": x}
    exe = _counter(backend)
    outs = exe.run(feeds, keep_on_device=keep, repeat=k, carry=CARRY)
    got = [o.numpy() if keep else o for o in outs]
    hist = exe.read_state("hist")
    want_ids, want_pos, want_y, want_hist = _numpy_counter(2, 1, x, k)
    np.testing.assert_array_equal(got[0], [[want_ids]])
    np.testing.assert_array_equal(got[1], [want_pos])
    np.testing.assert_allclose(got[2], want_y, rtol=1e-6)
    np.testing.assert_array_equal(hist, want_hist)
    single = _counter(backend)                       # the same steps, one run each
    fed = dict(feeds)
    for _ in range(k):
        nxt, pos, y = single.run(fed, keep_on_device=True)
        fed.update(ids=nxt, pos=pos)
    np.testing.assert_array_equal(single.read_state("hist"), hist)
    np.testing.assert_array_equal(nxt.numpy(), got[0])
    np.testing.assert_allclose(y.numpy(), got[2], rtol=1e-6)


def test_repeat_then_fed_values_upload_again(backend):
    """After a repeated run the input buffers hold carried values: feeding the first run's
    arrays again starts from them, not from what the device holds."""
    exe = _counter(backend)
    feeds = {"ids": np.array([[1]], np.int32), "pos": np.array([0], np.int32),
             "x": np.zeros((1, 3), np.float32)}
    first = exe.run(feeds, repeat=3, carry=CARRY)
    again = exe.run(feeds, repeat=3, carry=CARRY)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[0], [[_numpy_counter(1, 0, feeds["x"], 3)[0]]])
    np.testing.assert_array_equal(exe.run(feeds)[0], [[_numpy_counter(1, 0, feeds["x"], 1)[0]]])


def test_repeat_runs_async(backend):
    exe = _counter(backend)
    x = np.ones((1, 3), np.float32)
    feeds = {"ids": np.array([[0]], np.int32), "pos": np.array([2], np.int32), "x": x}
    nxt, pos, y = run_coroutine(exe.run_async(feeds, repeat=4, carry=CARRY))
    want_ids, want_pos, want_y, _ = _numpy_counter(0, 2, x, 4)
    np.testing.assert_array_equal(nxt, [[want_ids]])
    np.testing.assert_array_equal(pos, [want_pos])
    np.testing.assert_allclose(y, want_y, rtol=1e-6)


@pytest.mark.parametrize("repeat, carry, words", [
    (0, CARRY, ["repeat", "int >= 1", "0"]),
    (2.0, CARRY, ["repeat", "2.0"]),
    (True, CARRY, ["repeat", "True"]),
    (2, [("ids", 0)], ["carry", "list"]),
    (2, {"nope": 0}, ["carry", "'nope'", "'ids'"]),
    (2, {"ids": 3}, ["carry['ids']", "[0, 3)", "3"]),
    (2, {"ids": "token"}, ["carry['ids']", "'token'"]),
    (2, {"pos": 0}, ["carry['pos']", "(1, 1)", "(1,)"]),
    (2, {"x": 0}, ["carry['x']", "float32", "(1, 3)"]),
    (2, {"ids": 2}, ["carry['ids']", "int32", "float32"]),
])
def test_bad_repeat_or_carry_names_the_argument(backend, repeat, carry, words):
    exe = _counter(backend)
    feeds = {"ids": np.array([[2]], np.int32), "pos": np.array([1], np.int32),
             "x": np.zeros((1, 3), np.float32)}
    with pytest.raises(InputError) as err:
        exe.run(feeds, repeat=repeat, carry=carry)
    for w in words:
        assert w in str(err.value), (w, str(err.value))
    # the executable stays usable
    np.testing.assert_array_equal(exe.run(feeds)[0], [[2 * 3 + 1 + 1]])


def test_repeat_refuses_an_input_the_graph_updates_in_place(backend):
    g = wr.Graph()
    buf = g.input("buf", (4,), "int32")
    i = g.input("i", (1,), "int32")
    out = buf.scatter_set(i, i + 10) * 1
    exe = wr.compile(g, outputs=[out, i + 1], device=backend)
    feeds = {"buf": np.zeros(4, np.int32), "i": np.array([1], np.int32)}
    with pytest.raises(InputError, match=r"repeat > 1.*'buf'.*in place"):
        exe.run(feeds, repeat=2, carry={"i": 1})
    np.testing.assert_array_equal(exe.run(feeds, repeat=2, carry={"i": 1, "buf": 0})[0],
                                  [0, 11, 12, 0])
