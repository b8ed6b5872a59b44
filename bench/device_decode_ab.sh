#!/usr/bin/env bash
# Decode speed of two webrlx trees on the lent GPU machine, in one run (see
# shared/device/README.md): bench/probes/decode_probe.py (SmolLM2 Q4_1: tok/s and the decode
# step's GPU profile by kernel) for BASE and NEW, then with NEW alone: SmolLM2 requantized to
# Q4_K_M beside llama.cpp Vulkan (bench/smollm2_kquants.py, greedy checks against
# transformers) and the 1B-shaped Q4_K_M model beside llama.cpp (bench/llm_1b.py), then
# decode_probe of both trees on that 1B file. JSON into $OUT.
# Carry .gl and .whl (wgpu, cffi, gguf wheels), .big/llvk.so.xz, the SmolLM2 GGUF as
# .big/gguf.part* (a call with some parts stores them in /tmp/big; NPARTS=2 in all) and the two
# trees as .ab/base.tar.xz and .ab/new.tar.xz (`git archive <rev> | xz`, or a tar of a work tree).
set -uo pipefail
source "$(dirname "$0")/device_ab_setup.sh"   # (exits until every GGUF part is stored)
for t in base new; do
  PYTHONPATH="$SITE:/tmp/$t" python3 /tmp/$t/bench/probes/decode_probe.py \
    > "$OUT/decode_probe_$t.json" 2>> "$OUT/errors.txt"
  head -c 1500 "$OUT/decode_probe_$t.json"; echo
done
cd /tmp/new
export PYTHONPATH="$SITE:/tmp/new"
[ "${SKIP_KQ:-0}" = 1 ] || python3 bench/smollm2_kquants.py --src /tmp/big/SmolLM2-135M-Instruct.Q4_1.gguf \
  --llamacpp "$SO" --work /tmp/kquants --types "${TYPES:-Q4_K_M}" \
  > "$OUT/smollm2_kquants.json" 2>> "$OUT/errors.txt"
[ "${SKIP_1B:-0}" = 1 ] || python3 bench/llm_1b.py --llamacpp "$SO" --work /tmp/llm_1b --type Q4_K_M \
  --new 256 > "$OUT/llm_1b.json" 2>> "$OUT/errors.txt"
# the 1B file bench/llm_1b.py made: decode_probe of both trees on it
if [ -f /tmp/llm_1b/llama-1b.Q4_K_M.gguf ]; then
  for t in base new; do
    PYTHONPATH="$SITE:/tmp/$t" python3 /tmp/new/bench/probes/decode_probe.py \
      /tmp/llm_1b/llama-1b.Q4_K_M.gguf > "$OUT/decode_probe_1b_$t.json" 2>> "$OUT/errors.txt"
    head -c 700 "$OUT/decode_probe_1b_$t.json"; echo
  done
fi
python3 - "$OUT" <<'EOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
for name in ("smollm2_kquants.json", "llm_1b.json"):
    f = out / name
    if not f.exists() or not f.read_text().strip():
        print(name, "missing"); continue
    d = json.loads(f.read_text())
    if "results" in d:
        for t, r in d["results"].items():
            print(t, "webrlx", round(r["webrlx"]["decode_tok_s"], 1), "llama.cpp",
                  round(r["llamacpp"]["decode_tok_s"], 1), "ratio",
                  round(r["decode_vs_llamacpp"], 3), "greedy all equal", r["greedy_all_equal"])
    else:
        w, l = d["webrlx"], d["llamacpp"]
        print("1b webrlx", round(w["decode_tok_s"], 1), "llama.cpp", round(l["decode_tok_s"], 1),
              "ratio", round(d["decode_vs_llamacpp"], 3),
              "prefill", round(w["prefill_ms"], 1), round(l["prefill_ms"], 1),
              "batched", [(r["sequences"], r["tok_per_s"], r["ratio_vs_first"])
                          for r in w.get("batched", {}).get("rows", [])])
EOF
