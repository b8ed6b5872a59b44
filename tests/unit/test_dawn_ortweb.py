"""bench/dawn_ortweb.py (webrlx beside ONNX Runtime Web on one Dawn, issue 32) without a GPU:
its token ids equal tools/ortweb_dawn.mjs's (node runs the JS formula), and combine() turns
both sides' JSON into ORT-web over webrlx ratios, cosines against ORT-web and Dawn over native
ratios, refusing sides that ran different shapes or ids."""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("dawn_ortweb", ROOT / "bench" / "dawn_ortweb.py")
assert _spec is not None and _spec.loader is not None
dawn_ortweb = importlib.util.module_from_spec(_spec)
sys.modules["dawn_ortweb"] = dawn_ortweb
_spec.loader.exec_module(dawn_ortweb)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_token_ids_equal_the_node_runners() -> None:
    out = subprocess.run(["node", str(ROOT / "tools" / "ortweb_dawn.mjs"), "--print-ids", "3x130"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert json.loads(out) == dawn_ortweb.token_ids(3, 130)


def test_token_ids_are_bert_rows() -> None:
    rows = np.asarray(dawn_ortweb.token_ids(4, 128))
    assert rows.shape == (4, 128)
    assert (rows[:, 0] == 101).all() and (rows[:, -1] == 102).all()
    words = rows[:, 1:-1]
    assert words.min() >= 1000 and words.max() < 29000
    assert len({tuple(r) for r in rows}) == 4            # rows differ from one another


def _side(times: dict[str, tuple[float, float]], emb: dict[str, np.ndarray],
          sides: tuple[str, ...] | None) -> dict[str, Any]:
    """A runner's JSON: per shape first/warm ms and the embedding (one level, or per side)."""
    cases: dict[str, Any] = {}
    for shape, (first, warm) in times.items():
        b, s = (int(v) for v in shape.split("x"))
        ids_sum = int(np.asarray(dawn_ortweb.token_ids(b, s)).sum())
        one = {"first_ms": first, "warm_ms": warm, "warm_all_ms": [warm],
               "embedding": emb[shape].tolist()}
        cases[shape] = ({"ids_sum": ids_sum, **one} if sides is None else
                        {"ids_sum": ids_sum, **{k: dict(one) for k in sides}})
    return {"runner": "x", "cases": cases}


def test_combine_ratios_cosines_and_target() -> None:
    rng = np.random.default_rng(0)
    ref = {"1x128": rng.standard_normal((1, 16)), "2x8": rng.standard_normal((2, 16))}
    ort = {**_side({"1x128": (900.0, 30.0), "2x8": (100.0, 8.0)}, ref, None), "ep": "webgpu"}
    near = {k: v + 1e-3 * rng.standard_normal(v.shape) for k, v in ref.items()}
    webrlx = _side({"1x128": (300.0, 6.0), "2x8": (50.0, 4.0)}, near, ("hand", "onnx"))
    webrlx["cases"]["2x8"]["onnx"]["embedding"] = (-ref["2x8"]).tolist()   # opposite rows
    native = _side({"1x128": (100.0, 3.0), "2x8": (20.0, 2.0)}, ref, ("hand", "onnx"))
    out = dawn_ortweb.combine(ort, webrlx, native)
    one, two = out["cases"]["1x128"], out["cases"]["2x8"]
    assert one["ratios"]["ort_webgpu_over_webrlx_hand_warm"] == pytest.approx(5.0)
    assert one["ratios"]["ort_webgpu_over_webrlx_onnx_first"] == pytest.approx(3.0)
    assert one["ratios"]["dawn_over_native_hand_warm"] == pytest.approx(2.0)
    assert two["ratios"]["ort_webgpu_over_webrlx_hand_warm"] == pytest.approx(2.0)
    assert one["ort_webgpu"]["warm_ms"] == 30.0 and one["native_onnx"]["warm_ms"] == 3.0
    cos = one["cosine"]["webrlx_hand_vs_ort_webgpu"]
    assert 0.999 < cos < 1.0
    assert two["cosine"]["webrlx_onnx_vs_ort_webgpu"] == pytest.approx(-1.0)
    assert one["cosine"]["webrlx_onnx_dawn_vs_native"] == pytest.approx(cos)
    assert one["meets_target"] and not two["meets_target"]       # 5x and 5x; 2x and 2x
    assert all("embedding" not in v for c in out["cases"].values() for v in c.values()
               if isinstance(v, dict))                       # times and ratios only
    assert out["ort"]["ep"] == "webgpu" and "cases" not in out["ort"]


def test_combine_refuses_other_shapes_or_ids() -> None:
    emb = {"1x8": np.ones((1, 4)), "1x16": np.ones((1, 4))}
    ort = _side({"1x8": (1.0, 1.0)}, emb, None)
    with pytest.raises(ValueError, match="shapes differ"):
        dawn_ortweb.combine(ort, _side({"1x16": (1.0, 1.0)}, emb, ("hand", "onnx")))
    webrlx = _side({"1x8": (1.0, 1.0)}, emb, ("hand", "onnx"))
    webrlx["cases"]["1x8"]["ids_sum"] += 1
    with pytest.raises(ValueError, match="token ids differ"):
        dawn_ortweb.combine(ort, webrlx)


def test_last_json_skips_the_runners_other_lines(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text('loading...\n{"a": 1}\n{not json\n[1, 2]\nwarning: x\n')
    assert dawn_ortweb.last_json(str(path)) == {"a": 1}
    path.write_text("nothing\n")
    with pytest.raises(ValueError, match="no JSON object"):
        dawn_ortweb.last_json(str(path))


def test_parse_shapes() -> None:
    assert dawn_ortweb.parse_shapes("1x128,32x128,") == [(1, 128), (32, 128)]
