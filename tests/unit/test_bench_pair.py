"""bench/bench_pair.py (issue 32's side-by-side `bench` JSON) without a GPU: rows of a native run
and a Dawn run matched by case and dtype, torch's time from the native run, the ratios; a Dawn
file with log lines before its JSON (written before the runner kept Dawn's log off stdout) is
read from its last top-level "{"."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_pair", ROOT / "bench" / "bench_pair.py")
assert _spec is not None and _spec.loader is not None
bench_pair = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_pair)

NATIVE = {"adapter": "NVIDIA H100", "cases": [
    {"case": "matmul 4096x4096x4096", "dtype": "float16", "webrlx_ms": 2.5, "ref_ms": 0.2,
     "reference": "torch"},
    {"case": "minilm 32x128", "dtype": "float16", "webrlx_ms": 2.6, "ref_ms": 5.2},
    {"case": "minilm 32x128", "dtype": "float32", "webrlx_ms": 3.2, "ref_ms": 6.0},
    {"case": "train mlp", "webrlx_steps_per_s": 600}]}
DAWN = {"adapter": "NVIDIA: 580", "cases": [
    {"case": "minilm 32x128", "dtype": "float16", "webrlx_ms": 1.3, "ref_ms": None},
    {"case": "matmul 4096x4096x4096", "dtype": "float16", "webrlx_ms": 1.0, "ref_ms": None},
    {"case": "attention 1x12x2048x64", "dtype": "float16", "webrlx_ms": 0.28}]}


def test_rows_match_by_case_and_dtype_with_torchs_time_and_ratios():
    rows = {(r["case"], r["dtype"]): r for r in bench_pair.pair(NATIVE, DAWN)}
    assert set(rows) == {("matmul 4096x4096x4096", "float16"), ("minilm 32x128", "float16")}
    m = rows[("minilm 32x128", "float16")]
    assert (m["native_ms"], m["dawn_ms"], m["torch_ms"]) == (2.6, 1.3, 5.2)
    assert m["dawn_over_native"] == pytest.approx(0.5)
    assert m["torch_over_dawn"] == pytest.approx(4.0)
    assert m["torch_over_native"] == pytest.approx(2.0)


def test_reads_json_after_log_lines_and_prints_one_document(tmp_path):
    native, dawn = tmp_path / "native.json", tmp_path / "dawn.json"
    native.write_text(json.dumps(NATIVE, indent=1))
    dawn.write_text("warning:\nCompilation log for [ShaderModule]:\n  {{ not json\n"
                    + json.dumps(DAWN, indent=1) + "\n")
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_pair.py"), str(native),
                          str(dawn)], capture_output=True, text=True, check=True, timeout=60)
    doc = json.loads(out.stdout)
    assert doc["native_adapter"] == "NVIDIA H100" and doc["dawn_adapter"] == "NVIDIA: 580"
    assert len(doc["rows"]) == 2


def test_needs_pairs_of_files(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_pair.py"),
                           str(tmp_path / "one.json")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and "bench_pair.py native.json dawn.json" in proc.stderr
