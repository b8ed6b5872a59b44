"""tools/perf_charts.py: one SVG per family found in the latest GPU results (software adapters
and older runs left out), webrlx's speed over the peer written above each group, byte-stable."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "perf_charts.py"


def _bench(adapter: str, cases: list[tuple[str, float, float]]) -> dict:
    return {"adapter": adapter, "backend": "wgpu (Vulkan)", "cases": [
        {"case": c, "dtype": "float32", "webrlx_ms": ours, "ref_ms": ref,
         "reference": "torch 2.11.0 cuda float32 (TF32 off)"} for c, ours, ref in cases]}


def _charts(results: Path, out: Path) -> dict[str, bytes]:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--results", str(results),
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {p.name: p.read_bytes() for p in sorted(out.glob("*.svg"))}


def test_one_chart_per_family_of_the_latest_gpu_runs(tmp_path):
    res = tmp_path / "results"
    res.mkdir()
    files = {
        "2026-11-20-h200-bench.json": _bench("NVIDIA H200", [("minilm 1x128", 1.0, 1.0)]),
        "2026-11-26-h200-bench-a.json": _bench("NVIDIA H200", [
            ("matmul 512x512x512", 1.0, 2.0), ("softmax 4096x384", 1.0, 0.5)]),
        "2026-11-26-h200-bench-b.json": _bench("NVIDIA H200", [
            ("matmul 512x512x512", 3.0, 2.0), ("softmax 4096x384", 1.0, 0.5)]),
        "2026-11-27-lavapipe-bench.json": _bench("llvmpipe (LLVM 15.0.6, 256 bits)",
                                                 [("attention 1x12x128x64", 9.0, 3.0)]),
        "2026-11-26-h200-smollm2.json": {
            "webrlx": {"adapter": "NVIDIA H200", "decode_tok_s": 500.0, "prefill_ms": 8.0},
            "llamacpp": {"decode_tok_s": 250.0, "prefill_ms": 16.0}},
    }
    for name, data in files.items():
        (res / name).write_text(json.dumps(data))
    charts = _charts(res, tmp_path / "out")
    assert sorted(charts) == ["matmul.svg", "smollm2.svg", "softmax.svg"]
    matmul = charts["matmul.svg"].decode()
    assert "512x512x512" in matmul and "1.00x" in matmul      # mean of a and b: 2 / 2
    assert "0.50x" in charts["softmax.svg"].decode()
    assert "2.00x" in charts["smollm2.svg"].decode()           # decode and prefill alike
    assert _charts(res, tmp_path / "again") == charts          # byte-stable


def test_the_committed_results_give_every_family_and_the_committed_charts(tmp_path):
    charts = _charts(ROOT / "bench" / "results", tmp_path)
    families = ("elementwise", "matmul", "softmax", "norm", "attention", "minilm", "smollm2")
    assert sorted(charts) == sorted(f"{f}.svg" for f in families)
    committed = {p.name for p in (ROOT / "docs" / "performance").glob("*.svg")}
    assert committed == set(charts)
