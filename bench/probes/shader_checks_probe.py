"""Shader runtime checks on and off: `python -m webrlx bench --only ...` once per setting of
WEBRLX_SHADER_CHECKS (wgpu_native.SHADER_CHECKS: "all" wgpu's default module, every check,
else the WGPUShaderRuntimeChecks flags of a trusted module: 1 bounds checks, 2 loop bounding,
0 none), each in its own process with torch in the same run. Prints JSON: per setting, the
bench's cases (webrlx ms, torch ms, ratio).
    python bench/probes/shader_checks_probe.py [--settings all,1,0]
        [--only matmul,f16,rows,attention]"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--settings", default="all,0")
    p.add_argument("--only", default="matmul,f16,rows,attention")
    a = p.parse_args()
    out: dict = {"only": a.only, "runs": {}}
    for i, setting in enumerate(a.settings.split(",")):
        env = {**os.environ, "WEBRLX_SHADER_CHECKS": setting}
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "webrlx", "bench", "--only", a.only],
                              env=env, capture_output=True, text=True, timeout=560)
        key = setting if setting not in out["runs"] else f"{setting} (run {i + 1})"
        if proc.returncode:
            out["runs"][key] = {"error": proc.stderr[-3000:]}
            continue
        d = json.loads(proc.stdout)
        out["adapter"] = d.get("adapter")
        out["runs"][key] = {"seconds": round(time.perf_counter() - t0, 1),
                            "cases": {c["case"] + " " + c.get("dtype", ""):
                                      {k: c.get(k) for k in ("webrlx_ms", "ref_ms",
                                                             "ratio_vs_ref")}
                                      for c in d["cases"]}}
        for name, c in out["runs"][key]["cases"].items():
            print(f"{key:8s} {name[:50]:50s} {c['webrlx_ms'] or 0:9.4f} ref "
                  f"{c['ref_ms'] or 0:9.4f} ratio {c['ratio_vs_ref'] or 0:.2f}", file=sys.stderr)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
