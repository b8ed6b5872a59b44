"""Training end to end: the digits CNN (webrlx/models/digits.py: two conv + ReLU + max-pool
layers and a dense layer) trained with wr.train_step and AdamW reaches >= 97% test accuracy on
the fixed split, natively on the GPU adapter and on the reference device, with the same loss
curve on both (~15 s on lavapipe, ~4 s on the reference device)."""
from __future__ import annotations

import numpy as np
import pytest

import webrlx as wr
from webrlx.models import digits


@pytest.fixture(scope="module")
def reference_run():
    return digits.train("cnn", device=wr.device("reference"))


def test_digits_cnn_reaches_97_percent_on_the_gpu(reference_run):
    gpu = wr.device("gpu")
    params, history = digits.train("cnn", device=gpu)
    _, _, x_test, y_test = digits.split()
    assert digits.accuracy(params, x_test, y_test, device=gpu) >= 0.97
    assert history[-1] < 0.05 * history[0]
    # the device and the numpy interpreter train the same model
    np.testing.assert_allclose(history, reference_run[1], rtol=2e-2, atol=2e-3)
    assert digits.accuracy(reference_run[0], x_test, y_test) >= 0.97
