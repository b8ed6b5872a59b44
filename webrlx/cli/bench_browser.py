"""`python -m webrlx bench --browser`: MiniLM (all-MiniLM-L6-v2) in headless Chromium, webrlx
beside ONNX Runtime Web, all in one browser launch, plus native webrlx on the same software
adapter (Chromium's SwiftShader Vulkan ICD through wgpu-py). Prints JSON.

    python -m webrlx bench --browser [--cases a,b,c] [--repeats 3] [--runners ...] [--out F]

Runners: main (webrlx in Pyodide on the page's main thread), worker (webrlx in Pyodide in a
Web Worker), onnx (webrlx.onnx.InferenceSession in Pyodide on the main thread, on the BertModel
exported to build/minilm.onnx), ort_webgpu / ort_wasm (onnxruntime-web's WebGPU / wasm execution
provider on that same file), native (webrlx in a subprocess with
VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json).
Cases: a 3x12 tokens, b 1x128, c 8x128; ids per case as bench/minilm.py's synthetic_feeds
([101] + rng.integers(1000, 29000, seq-2) + [102], rng = default_rng(0) per case), mask all ones.

Method: every browser runner gets its own Chromium launch with a fresh profile (cold GPU process
and shader caches, as on a first visit). load = model load from bytes already fetched (webrlx:
minilm.load from Pyodide's FS or the disk, then MiniLMEncoder.warm_up_async: one sentence's
kernels compiled at 16 and 128 tokens, reported as warm_up_s too; --no-warm-up leaves it out;
webrlx.onnx: InferenceSession from the fetched bytes, no warm-up;
ORT: InferenceSession.create from the fetched bytes);
Pyodide's boot and the fetches are reported apart (boot_s, fetch_s). first = the first run of a
case after load (compiles its plan; cases run in order a, b, c in one session, so b and c may
reuse kernels compiled for a); first_split_ms splits a webrlx first run into lower (graph ->
kernel program), pipelines (compiling them), tune (timing tile variants with no stored pick),
plan_other (buffers, bind groups) and run (the rest: uploads, the submit, the readback; on a
fresh process natively also the device's creation). warm = median of --repeats runs after one
warm-up. A run is inputs -> pooled, normalized embedding read back on the CPU (webrlx:
executable.run / run_async; webrlx.onnx: session.run_async then mean pooling + L2 norm in
numpy; ORT: session.run then mean pooling + L2 norm in JS). Cosine: per
row, against native webrlx (or the numpy reference device when the native runner is left out),
minimum over rows.

Needs: apt chromium, pip playwright (tests/browser/browser_harness.py, so a checkout), the web
assets (python -m webrlx.cli.web_assets), for ORT `npm install --prefix build/ortweb
onnxruntime-web@1.30.0` and torch + transformers + onnx for the one-time ONNX export.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CASES = {"a": (3, 12), "b": (1, 128), "c": (8, 128)}
RUNNERS = ("main", "worker", "onnx", "ort_webgpu", "ort_wasm", "native")
ORT_VERSION = "1.30.0"
ORT_DIR = ROOT / "build" / "ortweb" / "node_modules" / "onnxruntime-web"
ONNX_PATH = ROOT / "build" / "minilm.onnx"
SWIFTSHADER_ICD = "/usr/lib/chromium/vk_swiftshader_icd.json"
T0 = time.perf_counter()


def has_module(name: str) -> bool:
    """Whether `import name` would find a module (nothing is imported)."""
    return importlib.util.find_spec(name) is not None


def missing_for_export() -> list[str]:
    """What the one-time export of build/minilm.onnx needs and this machine lacks (torch,
    transformers, onnx), each with its install command; nothing once that file exists."""
    if ONNX_PATH.is_file():
        return []
    return [f"{m} (for the one-time ONNX export to {ONNX_PATH.name}): pip install {m}"
            for m in ("torch", "transformers", "onnx") if not has_module(m)]


def missing_for_ort() -> list[str]:
    """What the ORT-web runners need and this machine lacks, each with its install command:
    onnxruntime-web from npm, and what the export needs (missing_for_export)."""
    missing = []
    if not (ORT_DIR / "dist" / "ort.webgpu.min.mjs").is_file():
        missing.append(f"onnxruntime-web {ORT_VERSION} (npm): "
                       f"npm install --prefix build/ortweb onnxruntime-web@{ORT_VERSION}")
    return missing + missing_for_export()


def progress(msg: str) -> None:
    print(f"[bench-browser {time.perf_counter() - T0:7.1f} s] {msg}", file=sys.stderr, flush=True)


def case_ids(batch: int, seq: int) -> list[list[int]]:
    """The token id rows of one case (bench/minilm.py synthetic_feeds: a fresh rng per case)."""
    rng = np.random.default_rng(0)
    return [[101] + [int(v) for v in rng.integers(1000, 29000, seq - 2)] + [102]
            for _ in range(batch)]


def export_onnx(model_dir: Path, path: Path = ONNX_PATH) -> Path:
    """Export the BertModel (last_hidden_state) to ONNX once, as bench/minilm.py's onnx_side
    does (int64 input_ids, attention_mask, token_type_ids; dynamic batch and seq); cached.
    transformers' default attention (sdpa) and a model called from a closure make torch.onnx
    write the weights as Constant nodes and the attention as torch's sdpa pattern, unlike
    tests/onnx/export_minilm.py's eager export with initializers; webrlx.onnx runs both alike
    (bench/onnx_export_forms.py)."""
    if path.is_file() and path.stat().st_size > 1_000_000:
        return path
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModel
    bert = AutoModel.from_pretrained(str(model_dir)).eval().requires_grad_(False)

    class Hidden(torch.nn.Module):
        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001
            return bert(input_ids=input_ids, attention_mask=attention_mask,
                        token_type_ids=token_type_ids).last_hidden_state
    names = ("input_ids", "attention_mask", "token_type_ids")
    ex = tuple(torch.ones((1, 8), dtype=torch.int64) for _ in names)
    dyn = {k: {0: "batch", 1: "seq"} for k in (*names, "hidden")}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    torch.onnx.export(Hidden(), ex, str(tmp), input_names=list(names), output_names=["hidden"],
                      dynamic_axes=dyn, opset_version=17, dynamo=False)
    tmp.replace(path)
    return path


# ---- webrlx: the same code natively (sync) and in Pyodide (async) ----------------------------
WEBRLX_RUN = """
import json, time, numpy as np
from webrlx.models import minilm
t = time.perf_counter()
enc = minilm.load(MODEL)
load_s = time.perf_counter() - t
warm_up_s = await enc.warm_up_async() if WARM_UP else 0.0
out = {"load_s": load_s + warm_up_s, "warm_up_s": warm_up_s, "adapter": enc.device.info.name,
       "backend": enc.device.info.backend, "cases": {}}
for name, rows in IDS.items():
    feeds = enc.feeds(rows)
    built = {id(p) for p in enc.executable.engine.plans.values()}
    t = time.perf_counter(); (first,) = await enc.executable.run_async(feeds)
    first_s = time.perf_counter() - t
    split = {k: v * 1e3 for k, v in enc.executable.last_plan.timings.items()}
    if id(enc.executable.last_plan) in built:        # (its plan was built at warm-up)
        split = {k: 0.0 for k in split}
    await enc.executable.run_async(feeds)
    warm = []
    for _ in range(REPEATS):
        t = time.perf_counter(); await enc.executable.run_async(feeds)
        warm.append(time.perf_counter() - t)
    out["cases"][name] = {"first_ms": first_s * 1e3, "warm_ms": float(np.median(warm)) * 1e3,
                          "first_split_ms": {"lower": split["lower_s"],
                                             "pipelines": split["pipelines_s"],
                                             "tune": split["tune_s"],
                                             "plan_other": split["build_s"]
                                             - split["pipelines_s"] - split["tune_s"],
                                             "run": first_s * 1e3 - split["lower_s"]
                                             - split["build_s"]},
                          "warm_all_ms": [w * 1e3 for w in warm],
                          "embedding": np.asarray(first, np.float64).round(7).tolist()}
json.dumps(out)
"""


def run_native(ids: dict[str, list[list[int]]], repeats: int, timeout: float,
               warm_up: bool = True) -> dict:
    """webrlx through wgpu-py on Chromium's SwiftShader ICD, in a subprocess."""
    code = WEBRLX_RUN.replace("await ", "").replace("run_async", "run").replace(
        "warm_up_async", "warm_up")
    code = (f"MODEL = None\nIDS = {ids!r}\nREPEATS = {repeats}\nWARM_UP = {warm_up}\n"
            + code.replace("json.dumps(out)", "print(json.dumps(out))"))
    env = {**os.environ, "VK_DRIVER_FILES": SWIFTSHADER_ICD}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"native runner failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_pyodide(ctx: Any, url: str, mode: str, config: dict, ids: dict, repeats: int,
                warm_up: bool = True) -> dict:
    import browser_harness

    from webrlx.models.assets import MINILM_FILES
    t = time.perf_counter()
    py = browser_harness.BrowserPython(ctx, url, mode, config)
    boot_s = time.perf_counter() - t
    fetch = "\n".join(
        f"open('/tmp/m/{n}', 'wb').write(await (await pyfetch('{url}models/minilm/{n}'))"
        f".bytes())" for n in MINILM_FILES)
    code = (f"import os, time\nos.makedirs('/tmp/m', exist_ok=True)\n"
            f"from pyodide.http import pyfetch\n_t = time.perf_counter()\n{fetch}\n"
            f"FETCH_S = time.perf_counter() - _t\nMODEL = '/tmp/m'\n"
            f"IDS = {ids!r}\nREPEATS = {repeats}\nWARM_UP = {warm_up}\n"
            + WEBRLX_RUN.replace('out = {"load_s"', 'out = {"fetch_s": FETCH_S, "load_s"'))
    try:
        result = json.loads(py.run(code))
    except Exception as err:
        raise RuntimeError(f"webrlx in the browser ({mode}) failed: {err}\n"
                           f"console:\n{py.console_tail()}") from err
    finally:
        py.page.close()
    result["boot_s"] = boot_s
    return result


# ---- webrlx.onnx: the exported BertModel, pooled and normalized as ORT's page does -----------
ONNX_RUN = """
import json, time, numpy as np
import webrlx as wr
from webrlx.onnx import InferenceSession
t = time.perf_counter()
session = InferenceSession(MODEL_BYTES, device=await wr.device_async())
out = {"load_s": time.perf_counter() - t, "adapter": session.device.info.name,
       "backend": session.device.info.backend, "cases": {}}

async def embed(rows):
    ids = np.asarray(rows, np.int64)
    mask = np.ones_like(ids)
    (hidden,) = await session.run_async(None, {"input_ids": ids, "attention_mask": mask,
                                               "token_type_ids": np.zeros_like(ids)})
    pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    return pooled / np.linalg.norm(pooled, axis=-1, keepdims=True)

for name, rows in IDS.items():
    t = time.perf_counter(); first = await embed(rows)
    first_s = time.perf_counter() - t
    await embed(rows)
    warm = []
    for _ in range(REPEATS):
        t = time.perf_counter(); await embed(rows)
        warm.append(time.perf_counter() - t)
    out["cases"][name] = {"first_ms": first_s * 1e3, "warm_ms": float(np.median(warm)) * 1e3,
                          "warm_all_ms": [w * 1e3 for w in warm],
                          "embedding": np.asarray(first, np.float64).round(7).tolist()}
json.dumps(out)
"""


def run_onnx(ctx: Any, url: str, config: dict, ids: dict, repeats: int) -> dict:
    """webrlx.onnx in Pyodide on the page's main thread, on /onnx/minilm.onnx."""
    import browser_harness
    t = time.perf_counter()
    py = browser_harness.BrowserPython(ctx, url, "main", config)
    boot_s = time.perf_counter() - t
    code = (f"import time\nfrom pyodide.http import pyfetch\n_t = time.perf_counter()\n"
            f"MODEL_BYTES = await (await pyfetch('{url}onnx/{ONNX_PATH.name}')).bytes()\n"
            f"FETCH_S = time.perf_counter() - _t\nIDS = {ids!r}\nREPEATS = {repeats}\n"
            + ONNX_RUN.replace('out = {"load_s"', 'out = {"fetch_s": FETCH_S, "load_s"'))
    try:
        result = json.loads(py.run(code))
    except Exception as err:
        raise RuntimeError(f"webrlx.onnx in the browser failed: {err}\n"
                           f"console:\n{py.console_tail()}") from err
    finally:
        py.page.close()
    result["boot_s"] = boot_s
    return result


def run_ort(ctx: Any, url: str, ep: str, ids: dict, repeats: int) -> dict:
    page = ctx.new_page()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
    try:
        page.goto(url + "bench-browser/ort.html")
        page.wait_for_function("window.ortBench !== undefined", timeout=60_000)
        return page.evaluate("(a) => ortBench.run(a)",
                             {"ep": ep, "model": url + "onnx/minilm.onnx", "ids": ids,
                              "repeats": repeats})
    except Exception as err:
        raise RuntimeError(f"onnxruntime-web {ep} failed: {err}\nconsole:\n"
                           + "\n".join(console[-40:])) from err
    finally:
        page.close()


def reference(ids: dict) -> dict[str, np.ndarray]:
    """Embeddings from the numpy reference device (when the native runner is left out)."""
    from webrlx.models import minilm
    enc = minilm.load(device="reference")
    return {c: np.asarray(enc.executable.run(enc.feeds(rows))[0]) for c, rows in ids.items()}


def min_cosine(got: Any, ref: np.ndarray) -> float:
    g = np.asarray(got, np.float64).reshape(ref.shape)
    r = ref.astype(np.float64)
    cos = (g * r).sum(-1) / np.linalg.norm(g, axis=-1) / np.linalg.norm(r, axis=-1)
    return float(cos.min())


def ratios(case: dict[str, dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    pairs = [("webrlx_main_over_ort_webgpu_warm", "main", "warm_ms", "ort_webgpu", "warm_ms"),
             ("webrlx_worker_over_ort_webgpu_warm", "worker", "warm_ms", "ort_webgpu",
              "warm_ms"),
             ("webrlx_main_first_over_ort_webgpu_first", "main", "first_ms", "ort_webgpu",
              "first_ms"),
             ("webrlx_worker_first_over_ort_webgpu_first", "worker", "first_ms", "ort_webgpu",
              "first_ms"),
             ("webrlx_main_first_over_warm", "main", "first_ms", "main", "warm_ms"),
             ("webrlx_worker_first_over_warm", "worker", "first_ms", "worker", "warm_ms"),
             ("native_first_over_warm", "native", "first_ms", "native", "warm_ms"),
             ("browser_main_over_native_warm", "main", "warm_ms", "native", "warm_ms"),
             ("browser_worker_over_native_warm", "worker", "warm_ms", "native", "warm_ms"),
             ("worker_over_main_warm", "worker", "warm_ms", "main", "warm_ms"),
             ("webrlx_main_over_ort_wasm_warm", "main", "warm_ms", "ort_wasm", "warm_ms"),
             ("webrlx_onnx_over_ort_webgpu_warm", "onnx", "warm_ms", "ort_webgpu", "warm_ms"),
             ("webrlx_onnx_first_over_ort_webgpu_first", "onnx", "first_ms", "ort_webgpu",
              "first_ms"),
             ("webrlx_onnx_over_main_warm", "onnx", "warm_ms", "main", "warm_ms"),
             ("ort_webgpu_over_ort_wasm_warm", "ort_webgpu", "warm_ms", "ort_wasm", "warm_ms")]
    for name, a, fa, b, fb in pairs:
        if a in case and b in case and case[b][fb]:
            out[name] = case[a][fa] / case[b][fb]
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m webrlx bench --browser",
                                description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="a,b,c", help="comma list of a (3x12), b (1x128), "
                   "c (8x128)")
    p.add_argument("--repeats", type=int, default=3, help="warm runs (after one warm-up)")
    p.add_argument("--runners", default=",".join(RUNNERS), help="comma list of "
                   + ",".join(RUNNERS))
    p.add_argument("--out", type=Path, help="also write the JSON here")
    p.add_argument("--no-warm-up", action="store_true", help="load without "
                   "MiniLMEncoder.warm_up (compiling one sentence's kernels at 16 and 128 "
                   "tokens, counted in load_s)")
    p.add_argument("--timeout", type=float, default=3600, help="native runner's limit (s)")
    args = p.parse_args(argv)
    cases = {c: CASES[c] for c in args.cases.split(",") if c}
    runners = [r for r in args.runners.split(",") if r]
    bad = [c for c in args.cases.split(",") if c and c not in CASES] + \
          [r for r in runners if r not in RUNNERS]
    if bad:
        p.error(f"unknown case or runner: {', '.join(bad)}")
    ids = {c: case_ids(b, s) for c, (b, s) in cases.items()}

    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    import browser_harness

    from webrlx.cli.serve import page_config
    from webrlx.cli.web_assets import build
    from webrlx.models.assets import minilm_dir

    model_dir = minilm_dir()
    result: dict[str, Any] = {
        "method": __doc__.split("Method: ")[1].split("\n\n")[0].strip(),
        "cases": {c: {"shape": f"{b}x{s}"} for c, (b, s) in cases.items()},
        "repeats": args.repeats, "runners": runners, "versions": {}, "adapters": {},
        "load": {}}
    out_runs: dict[str, dict] = {}
    ort_runners = [r for r in runners if r.startswith("ort_")]
    missing = missing_for_ort() if ort_runners else []
    if missing:
        progress(f"skipping {', '.join(ort_runners)}: this machine lacks "
                 + "; ".join(missing))
        result["skipped"] = {r: missing for r in ort_runners}
        runners = [r for r in runners if r not in ort_runners]
        result["runners"] = runners
        ort_runners = []
    routes: dict[str, Path] = {"/models/minilm/": model_dir,
                               "/bench-browser/": ROOT / "bench" / "browser"}
    missing = missing_for_export() if "onnx" in runners else []
    if missing:
        progress("skipping onnx: this machine lacks " + "; ".join(missing))
        result.setdefault("skipped", {})["onnx"] = missing
        runners = [r for r in runners if r != "onnx"]
        result["runners"] = runners
    if ort_runners or "onnx" in runners:
        progress("onnx export (cached in build/minilm.onnx)")
        routes["/onnx/"] = export_onnx(model_dir).parent
    if ort_runners:
        routes["/ort/"] = ORT_DIR / "dist"
        result["versions"]["onnxruntime_web"] = json.loads(
            (ORT_DIR / "package.json").read_text())["version"]

    browser = [r for r in runners if r != "native"]
    if browser:
        progress("web assets")
        assets = build(ROOT, tests=False)
        config = page_config(assets)
        with browser_harness.web_server(assets, routes) as url:
            for r in browser:
                progress(f"{r}: start (a fresh browser)")
                # each runner in its own launch: the GPU process's shader caches and warm
                # compiler would otherwise favour whichever runs later
                with browser_harness.chromium() as ctx:
                    result["versions"]["chromium"] = (ctx.browser.version if ctx.browser
                                                      else None)
                    if r in ("main", "worker"):
                        out_runs[r] = run_pyodide(ctx, url, r, config, ids, args.repeats,
                                                  not args.no_warm_up)
                    elif r == "onnx":
                        out_runs[r] = run_onnx(ctx, url, config, ids, args.repeats)
                    else:
                        out_runs[r] = run_ort(ctx, url, r.split("_")[1], ids, args.repeats)
                progress(f"{r}: done " + ", ".join(
                    f"{c}: first {v['first_ms']:.0f} ms warm {v['warm_ms']:.0f} ms"
                    for c, v in out_runs[r]["cases"].items()))
        if result["versions"].get("chromium") is None:
            result["versions"]["chromium"] = subprocess.run(
                [browser_harness.CHROMIUM, "--version"], capture_output=True,
                text=True).stdout.strip()
    if "native" in runners:
        progress("native: start (webrlx through wgpu-py on SwiftShader)")
        out_runs["native"] = run_native(ids, args.repeats, args.timeout, not args.no_warm_up)
        progress("native: done " + ", ".join(
            f"{c}: first {v['first_ms']:.0f} ms warm {v['warm_ms']:.0f} ms"
            for c, v in out_runs["native"]["cases"].items()))
    import webrlx
    result["versions"]["webrlx"] = webrlx.__version__
    if "native" in out_runs:
        ref = {c: np.asarray(out_runs["native"]["cases"][c]["embedding"]) for c in cases}
        result["cosine_reference"] = "native webrlx (SwiftShader)"
    else:
        progress("numpy reference for the cosines")
        ref = reference(ids)
        result["cosine_reference"] = "webrlx numpy reference device"
    for r, run in out_runs.items():
        result["adapters"][r] = run.get("adapter")
        result["load"][r] = {k: run[k] for k in ("boot_s", "fetch_s", "load_s", "warm_up_s")
                             if k in run}
        for k in ("ort_version", "backend", "threads"):
            if k in run:
                result["load"][r][k] = run[k]
        for c in cases:
            v = run["cases"][c]
            result["cases"][c][r] = {
                "first_ms": v["first_ms"], "warm_ms": v["warm_ms"],
                "warm_all_ms": v.get("warm_all_ms"), "load_s": run.get("load_s"),
                **({"first_split_ms": v["first_split_ms"]} if "first_split_ms" in v else {}),
                "cosine_vs_reference": min_cosine(v["embedding"], ref[c])}
    for c in cases:
        result["cases"][c]["ratios"] = ratios(result["cases"][c])
    progress("done")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=1))
