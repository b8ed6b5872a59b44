#!/usr/bin/env bash
# On the lent GPU machine (../shared/device/README.md): wgpu + the Vulkan loader from .gl/.whl,
# MiniLM's files in .big/mlm plus model.safetensors sent in parts (.big/mlmst.parta?, one per
# call, gathered in /tmp/big). Runs `python -m webrlx bench` (torch CUDA in the same run) into
# $OUT/bench.json, and with TESTS=1 the backend tests on the GPU first.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" .whl/*.whl
export PYTHONPATH="$HOME/site:$PWD" HF_HUB_OFFLINE=1
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/mlm && cp -r .big/mlm/* /tmp/mlm/ && cat /tmp/big/mlmst.part* > /tmp/mlm/model.safetensors
export WEBRLX_MINILM_DIR=/tmp/mlm
python3 -m webrlx info 2>/dev/null | head -3
if [ "${TESTS:-0}" = 1 ]; then
  python3 -m pytest tests/backend -q -x -p no:cacheprovider -k "not soak and not fuzz and not smollm2" \
    2>&1 | tail -6
fi
python3 -m webrlx bench ${BENCH_ARGS:-} > "$OUT/bench.json" 2> "$OUT/bench.err"
tail -3 "$OUT/bench.err"
python3 - "$OUT/bench.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for c in d.get("cases", []):
    print(f"{c['case'][:44]:44s} {c.get('webrlx_ms', 0):9.4f} ms  ref {c.get('ref_ms', 0):9.4f}"
          f"  ratio {c.get('ratio_vs_ref', 0):.2f}")
PY
