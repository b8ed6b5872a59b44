"""`python -m webrlx bench --browser` end to end on case a (3x12 tokens), one warm run: every
runner (webrlx main thread and Worker, onnxruntime-web WebGPU and wasm, native webrlx on
SwiftShader) gives its figures and an embedding within cosine 0.999 of native webrlx's.

Opt-in (a few minutes of SwiftShader): WEBRLX_BENCH_BROWSER=1 (tests/browser/conftest.py leaves
this file out otherwise). Needs build/ortweb (npm install --prefix build/ortweb
onnxruntime-web@1.30.0) and torch + transformers + onnx for the cached ONNX export."""
from __future__ import annotations

import json

from webrlx.cli.bench import main_bench
from webrlx.cli.bench_browser import RUNNERS


def test_bench_browser_case_a(tmp_path) -> None:
    out = tmp_path / "bench.json"
    result = main_bench(["--browser", "--cases", "a", "--repeats", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert result["versions"]["chromium"] and result["versions"]["onnxruntime_web"] == "1.30.0"
    assert result["cosine_reference"].startswith("native")
    case = result["cases"]["a"]
    assert case["shape"] == "3x12"
    for runner in RUNNERS:
        figures = case[runner]
        assert figures["first_ms"] > 0 and figures["warm_ms"] > 0, (runner, figures)
        assert len(figures["warm_all_ms"]) == 1
        assert figures["load_s"] > 0
        assert figures["cosine_vs_reference"] >= 0.999, (runner, figures)
        assert result["adapters"][runner], runner
    for name in ("webrlx_main_over_ort_webgpu_warm", "webrlx_worker_over_ort_webgpu_warm",
                 "webrlx_main_first_over_ort_webgpu_first", "webrlx_main_first_over_warm",
                 "browser_main_over_native_warm", "worker_over_main_warm"):
        assert case["ratios"][name] > 0, name
