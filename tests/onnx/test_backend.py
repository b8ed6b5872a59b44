"""webrlx.onnx.backend through onnx's own harness: BackendTest on a few node tests (the whole
list runs in test_node_suite.py, faster, with one device), and run_node against numpy."""
from __future__ import annotations

import unittest

import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx.backend.test  # noqa: E402
from onnx import helper  # noqa: E402

from webrlx.onnx import backend  # noqa: E402

PICKED = r"^test_(relu|add_bcast|reshape_negative_dim|softmax_axis_1|gather_0|matmul_4d)_cpu$"


def test_backend_test_harness_runs_node_tests() -> None:
    bt = onnx.backend.test.BackendTest(backend, __name__)
    bt.include(PICKED)
    suite = unittest.TestSuite()
    for case in bt.test_cases.values():
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(verbosity=0).run(suite)
    ran = result.testsRun - len(result.skipped)
    assert ran == 6 and result.wasSuccessful(), (result.failures, result.errors)


def test_run_node_and_supports_device() -> None:
    a = np.array([1.0, 5.0, -2.0], np.float32)
    b = np.array([2.0, 2.0, 2.0], np.float32)
    (c,) = backend.run_node(helper.make_node("Sub", ["a", "b"], ["c"]), [a, b])
    np.testing.assert_array_equal(c, a - b)
    (m,) = backend.run_node(helper.make_node("Greater", ["a", "b"], ["m"]), [a, b])
    assert m.dtype == np.bool_ and m.tolist() == [False, True, False]
    assert backend.supports_device("CPU")
