"""save_safetensors writes what the `safetensors` package reads, and what it writes reads
back (names, dtypes, shapes, bytes)."""
from __future__ import annotations

import numpy as np
from safetensors.numpy import load as st_load
from safetensors.numpy import save as st_save

from webrlx.models.safetensors import load_safetensors, save_safetensors


def test_the_safetensors_package_reads_what_we_write():
    rng = np.random.default_rng(0)
    arrays = {"w": rng.standard_normal((3, 5)).astype(np.float32),
              "h": rng.standard_normal(7).astype(np.float16),
              "i": np.arange(6, dtype=np.int32).reshape(2, 3),
              "scalar": np.array(2.5, np.float32)}
    got = st_load(save_safetensors(arrays))
    assert sorted(got) == sorted(arrays)
    for k, a in arrays.items():
        assert got[k].dtype == a.dtype and got[k].shape == a.shape
        np.testing.assert_array_equal(got[k], a)
    back = load_safetensors(st_save(arrays))
    for k, a in arrays.items():
        np.testing.assert_array_equal(back[k], a)
    assert {k: v.tolist() for k, v in load_safetensors(save_safetensors(arrays)).items()} == \
        {k: v.tolist() for k, v in arrays.items()}
