"""MiniLM in headless Chromium (SwiftShader WebGPU): webrlx in Pyodide on the main thread and
in a Web Worker, cases a (3x12 tokens), b (1x128), c (8x128) on the same synthetic ids as
bench/minilm.py; first run (compile included) and warm median per case, and the same natively
on Chromium's SwiftShader ICD. Prints JSON. No peer runtime here (ORT-web is the browser
issue's missing bench).   python bench/browser_minilm_probe.py [--cases a,b] [--repeats 3]"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
CASES = {"a": (3, 12), "b": (1, 128), "c": (8, 128)}

RUN = """
import json, time, numpy as np
from webrlx.models import minilm
rng = np.random.default_rng(0)
t = time.perf_counter()
enc = minilm.load(MODEL)
load_s = time.perf_counter() - t
out = {"load_s": load_s}
for name, (b, s) in CASES.items():
    rows = [[101] + [int(v) for v in rng.integers(1000, 29000, s - 2)] + [102] for _ in range(b)]
    feeds = enc.feeds(rows)
    t = time.perf_counter(); (first,) = await enc.executable.run_async(feeds)
    first_s = time.perf_counter() - t
    warm = []
    for _ in range(REPEATS):
        t = time.perf_counter(); await enc.executable.run_async(feeds)
        warm.append(time.perf_counter() - t)
    out[name] = {"first_ms": first_s * 1e3, "warm_ms": float(np.median(warm)) * 1e3,
                 "checksum": float(np.abs(first).sum())}
json.dumps(out)
"""


def native(cases: dict, repeats: int) -> dict:
    code = RUN.replace("await ", "").replace("run_async", "run").replace("MODEL", "None")
    code = f"CASES = {cases!r}\nREPEATS = {repeats}\n" + code.replace("json.dumps(out)",
                                                                     "print(json.dumps(out))")
    env = {**os.environ, "VK_DRIVER_FILES": "/usr/lib/chromium/vk_swiftshader_icd.json"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="a,b,c")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    cases = {c: CASES[c] for c in args.cases.split(",")}
    import browser_harness
    from webrlx.cli.serve import page_config
    from webrlx.cli.web_assets import build
    from webrlx.models.assets import MINILM_FILES, minilm_dir
    assets = build(ROOT)
    result: dict = {"cases": {c: f"{b}x{s}" for c, (b, s) in cases.items()}}
    with browser_harness.web_server(assets, {"/models/minilm/": minilm_dir()}) as url, \
            browser_harness.chromium() as ctx:
        fetch = "\n".join(
            f"open('/tmp/m/{n}', 'wb').write(await (await pyfetch('{url}models/minilm/{n}'))"
            f".bytes())"
            for n in MINILM_FILES)
        for mode in ("main", "worker"):
            print(f"[browser {mode}]", file=sys.stderr)
            py = browser_harness.BrowserPython(ctx, url, mode, page_config(assets))
            code = (f"import os\nos.makedirs('/tmp/m', exist_ok=True)\n"
                    f"from pyodide.http import pyfetch\n{fetch}\nMODEL = '/tmp/m'\n"
                    f"CASES = {cases!r}\nREPEATS = {args.repeats}\n{RUN}")
            result[mode] = json.loads(py.run(code))
            py.page.close()
    print("[native swiftshader]", file=sys.stderr)
    result["native_swiftshader"] = native(cases, args.repeats)
    for c in cases:
        m, w, n = (result[k][c] for k in ("main", "worker", "native_swiftshader"))
        result.setdefault("ratios", {})[c] = {
            "main_first_over_warm": m["first_ms"] / m["warm_ms"],
            "browser_main_over_native_warm": m["warm_ms"] / n["warm_ms"],
            "worker_over_main_warm": w["warm_ms"] / m["warm_ms"]}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
