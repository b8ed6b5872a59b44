#!/usr/bin/env bash
# Batched decoding of two webrlx trees on the lent GPU machine, in one run (see
# shared/device/README.md): bench/llm_batch.py (1 and 8 live sequences, and the 8-sequence
# step's GPU time by kernel) for BASE and NEW on SmolLM2 Q4_1 and on the 1B-shaped Q4_K_M
# model (made here by bench/llm_1b.py --make-only through llama.cpp's quantizer), then
# bench/probes/qgemv_variants_probe.py (every fused-GEMV variant at M = 1 and 8) with NEW.
# JSON into $OUT. Setup: bench/device_ab_setup.sh. Carries as bench/device_decode_ab.sh: .gl .whl .big/llvk.so.xz, the
# SmolLM2 GGUF as .big/gguf.part* (NPARTS=2; a call with some parts stores them in /tmp/big)
# and .ab/base.tar.xz, .ab/new.tar.xz.
set -uo pipefail
source "$(dirname "$0")/device_ab_setup.sh"   # (exits until every GGUF part is stored)
# both trees run NEW's bench script (an older one may lack --profile)
[ -d /tmp/base/bench ] && cp /tmp/new/bench/llm_batch.py /tmp/base/bench/
B1=/tmp/llm_1b/llama-1b.Q4_K_M.gguf
PYTHONPATH="$SITE:/tmp/new" python3 /tmp/new/bench/llm_1b.py --llamacpp "$SO" \
  --work /tmp/llm_1b --type Q4_K_M --make-only > "$OUT/make_1b.json" 2>> "$OUT/errors.txt"
for model in smollm2 1b; do
  for t in ${TREES:-base new}; do
    arg=(); [ "$model" = 1b ] && arg=(--model "$B1")
    # (a fresh autotune cache a run: a tree must time its own variants, not reuse the other's picks)
    rm -rf "/tmp/home_${model}_$t"; mkdir -p "/tmp/home_${model}_$t"
    HOME="/tmp/home_${model}_$t" PYTHONPATH="$SITE:/tmp/$t" python3 /tmp/$t/bench/llm_batch.py "${arg[@]}" \
      --sizes 1,8 --new "${NEW:-64}" --profile > "$OUT/batch_${model}_$t.json" 2>> "$OUT/errors.txt"
    python3 - "$OUT/batch_${model}_$t.json" "$model $t" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[2], "failed", e); sys.exit()
rows = [(r["sequences"], r["tok_per_s"], r["ratio_vs_1"]) for r in d["rows"]]
prof = d.get("profile", {})
top = sorted(prof.get("kernels", {}).items(), key=lambda kv: -kv[1])[:6]
print(sys.argv[2], rows, "step gpu ms", prof.get("gpu_ms"), top)
PY
  done
done
rm -rf /tmp/home_probe; mkdir -p /tmp/home_probe
[ "${PROBE:-1}" = 1 ] && HOME=/tmp/home_probe PYTHONPATH="$SITE:/tmp/new" python3 /tmp/new/bench/probes/qgemv_variants_probe.py \
  > "$OUT/qgemv_variants.json" 2>> "$OUT/errors.txt"
python3 - "$OUT/qgemv_variants.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("variants probe failed", e); sys.exit()
for m in ("m1", "m8"):
    for call, v in d[m]["calls"].items():
        print(m, call, sorted(v["us"].items(), key=lambda kv: kv[1])[:8])
PY
tail -c 1500 "$OUT/errors.txt" 2>/dev/null
