"""Draw docs/performance/<family>.svg from the committed bench JSON in bench/results: the
latest GPU `python -m webrlx bench` run (elementwise, matmul, softmax, norm, attention, MiniLM:
webrlx beside torch CUDA) and the latest GPU SmolLM2 run (decode and prefill tokens/s: webrlx
beside llama.cpp and transformers). One bar chart per family found; the SVGs are byte-stable.

    python tools/perf_charts.py [--results bench/results] [--out docs/performance]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from webrlx.device_info import DeviceInfo  # noqa: E402

# result names: DATE-MACHINE-bench[-RUN].json and DATE-MACHINE-smollm2[-RUN].json
BENCH_NAME = re.compile(r"^(\d{4}-\d\d-\d\d)-([a-z0-9]+)-bench(-[a-z])?\.json$")
SMOLLM2_NAME = re.compile(r"^(\d{4}-\d\d-\d\d)-([a-z0-9]+)-smollm2(-run\d+)?\.json$")
# family -> the case-name prefixes it charts (in this order)
FAMILIES = {
    "elementwise": ("elementwise",),
    "matmul": ("matmul", "exe.run numpy in/out matmul"),
    "softmax": ("softmax",),
    "norm": ("layer_norm", "rms_norm"),
    "attention": ("attention",),
    "minilm": ("minilm",),
}
COLORS = {"webrlx": "#2f6fba", "torch": "#e08a1e", "llama.cpp": "#4a9a4a",
          "transformers f32": "#e08a1e", "transformers f16": "#c9b037"}


def is_gpu(adapter: str, backend: str = "") -> bool:
    """Whether a result came from a GPU (not lavapipe, SwiftShader or the numpy reference)."""
    return backend != "reference" and not DeviceInfo(name=adapter, backend=backend).software


def latest(results: Path, pattern: re.Pattern[str], adapter_of: Any) -> list[Path]:
    """The files of the latest date (one machine) whose name fits and that ran on a GPU."""
    found = []
    for p in sorted(results.glob("*.json")):
        m = pattern.match(p.name)
        if m and is_gpu(*adapter_of(json.loads(p.read_text()))):
            found.append((m.group(1), m.group(2), p))
    if not found:
        return []
    date, machine = max((d, mach) for d, mach, _ in found)
    return [p for d, mach, p in found if (d, mach) == (date, machine)]


def family_of(case: str) -> str | None:
    for family, prefixes in FAMILIES.items():
        if case.startswith(prefixes):
            return family
    return None


def label(case: str, dtype: str) -> str:
    """A short bar-group label: the case without its family word, f16 marked."""
    name = case.replace("exe.run numpy in/out matmul", "exe.run in/out")
    if name.startswith(("matmul ", "softmax ", "attention ", "minilm ")):
        name = name.split(" ", 1)[1]
    elif name.startswith("elementwise chain "):
        name = name[len("elementwise chain "):]
    return f"{name} f16" if dtype == "float16" else name


def bench_families(files: list[Path]) -> dict[str, dict[str, Any]]:
    """family -> {"labels", "series": {runtime: [ms]}, "title"}: the mean over the runs."""
    runs = [json.loads(p.read_text()) for p in files]
    ms: dict[tuple[str, str], dict[str, list[float]]] = {}
    for run in runs:
        for c in run["cases"]:
            if "webrlx_ms" in c and "ref_ms" in c and "torch" in c.get("reference", ""):
                got = ms.setdefault((c["case"], c.get("dtype", "float32")),
                                    {"webrlx": [], "torch": []})
                got["webrlx"].append(c["webrlx_ms"])
                got["torch"].append(c["ref_ms"])
    out: dict[str, dict[str, Any]] = {}
    for (case, dtype), times in ms.items():
        family = family_of(case)
        if family is None:
            continue
        f = out.setdefault(family, {"labels": [], "series": {"webrlx": [], "torch": []},
                                    "unit": "ms a run (log scale; lower is faster)",
                                    "faster": "lower"})
        f["labels"].append(label(case, dtype))
        for who in ("webrlx", "torch"):
            f["series"][who].append(statistics.mean(times[who]))
    names = ", ".join(p.name for p in files)
    for family, f in out.items():
        f["title"] = (f"{family}: webrlx beside torch CUDA on {runs[0]['adapter']}\n"
                      f"(bench/results/{names}"
                      f"{'; mean of the runs' if len(runs) > 1 else ''})")
    return out


def smollm2_family(files: list[Path]) -> dict[str, Any] | None:
    """Decode and prefill tokens/s of webrlx, llama.cpp and transformers (mean of the runs)."""
    runs = [json.loads(p.read_text()) for p in files]
    peers = {"webrlx": "webrlx", "llama.cpp": "llamacpp",
             "transformers f32": "transformers_float32",
             "transformers f16": "transformers_float16"}
    series = {}
    for who, key in peers.items():
        if all(key in r for r in runs):
            decode = statistics.mean(r[key]["decode_tok_s"] for r in runs)
            prefill = statistics.mean(r[key].get("prefill_tokens", 128)
                                      / r[key]["prefill_ms"] * 1e3 for r in runs)
            series[who] = [decode, prefill]
    if "webrlx" not in series:
        return None
    return {"labels": ["decode (tokens/s)", "prefill of 128 tokens (tokens/s)"],
            "series": series, "unit": "tokens/s (log scale; higher is faster)",
            "faster": "higher",
            "title": f"SmolLM2-135M Q4_1: webrlx beside llama.cpp and transformers on "
                     f"{runs[0]['webrlx']['adapter']}\n(bench/results/"
                     f"{', '.join(p.name for p in files)})"}


def draw(chart: dict[str, Any], path: Path) -> None:
    """One grouped bar chart as a byte-stable SVG; above each group webrlx's speed over the
    first peer's (2.0x: webrlx takes half the time)."""
    plt.rcParams.update({"svg.hashsalt": "webrlx", "svg.fonttype": "none",
                         "font.family": "DejaVu Sans", "font.size": 9})
    labels, series = chart["labels"], chart["series"]
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6.5, 0.9 * len(labels) + 2.0), 3.8))
    for i, (who, values) in enumerate(series.items()):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, values, width, label=who, color=COLORS.get(who))
    peer_name = list(series)[1]
    ours, peer = series["webrlx"], series[peer_name]
    for j, (a, b) in enumerate(zip(ours, peer, strict=True)):
        speed = b / a if chart["faster"] == "lower" else a / b
        ax.annotate(f"{speed:.2f}x", (j, max(a, b)), xytext=(0, 3),
                    textcoords="offset points", ha="center", fontsize=7)
    tilt = len(labels) > 4 or max(len(s) for s in labels) > 14
    ax.set_xticks(range(len(labels)), labels, rotation=30 if tilt else 0,
                  ha="right" if tilt else "center")
    ax.set_yscale("log")
    ax.margins(y=0.12)                  # room for the speed labels above the bars
    ax.set_ylabel(chart["unit"])
    ax.set_title(chart["title"], fontsize=8)
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0),
              title=f"Nx: webrlx's speed\nover {peer_name}", title_fontsize=7)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(path, format="svg", metadata={"Date": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[Path]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "performance")
    args = p.parse_args(argv)
    charts = bench_families(latest(args.results, BENCH_NAME,
                                   lambda d: (d.get("adapter", ""), d.get("backend", ""))))
    smollm2 = smollm2_family(latest(args.results, SMOLLM2_NAME,
                                    lambda d: (d.get("webrlx", {}).get("adapter", ""), "")))
    if smollm2:
        charts["smollm2"] = smollm2
    args.out.mkdir(parents=True, exist_ok=True)
    written = []
    for family, chart in charts.items():
        path = args.out / f"{family}.svg"
        draw(chart, path)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in main():
        print(path)
