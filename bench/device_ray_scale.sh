#!/usr/bin/env bash
# Issue 33's scale numbers on the lent 2-GPU machine (nvidia-h100-x2; recipe in
# ../shared/device/README.md): MiniLM over 200,000 synthetic sentences on 1 and 2 Ray actors,
# sentence-transformers with one torch process per GPU on the same sentences and batch size,
# and Ray Serve with 1 and 2 replicas of the OpenAI server (SmolLM2) at 32 clients.
# Stages (one device call each; the machine must stay warm between them):
#   pack          here: .ray/part.NN (<= 60 MB each) = Ray's cp312 wheel and the deps the GPU
#                 machine may lack, MiniLM's files and the SmolLM2 GGUF
#   part          there, one call per part, carrying only that part: copy it to /tmp/rayparts
#   setup         there, carrying .gl and .whl: wgpu, the parts unpacked, missing wheels
#                 installed with pip --target $HOME/site
#   embed | st | serve | tokenize   there: the measurements, JSON lines into $OUT/<stage>.json
# SENTENCES (200000), CLIENTS (32), REQUESTS (16 a client), LOAD_PROCS (4) override the sizes,
# ACTORS ("1 2") the embed runs and PROCS ("1 2") the st runs;
# SERVE_ENGINES ("standin engine") picks the serve runs, RUN_LIMIT_S (110) caps each.
set -uo pipefail
stage=${1:?usage: device_ray_scale.sh pack|part|setup|embed|st|serve|tokenize}
PART_BYTES=60000000
N=${SENTENCES:-200000}

env_gpu() {
  export PYTHONPATH="$HOME/site:$PWD" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export WEBRLX_MINILM_DIR=/tmp/rayload/mlm CUDA_DEVICE_ORDER=PCI_BUS_ID
  export RAY_USAGE_STATS_ENABLED=0
}

case "$stage" in
pack)
  mkdir -p .ray/wh
  python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d .ray/wh "ray[data,serve]==2.60.0"
  rm -rf .ray/mlm && mkdir -p .ray/mlm
  mlm=$(python3 -c "from webrlx.models.assets import minilm_dir; print(minilm_dir())")
  cp -r "$mlm"/* .ray/mlm/
  cp "$(python3 -c "from webrlx.models.assets import smollm2_gguf; print(smollm2_gguf(None))")" \
    .ray/smollm2.gguf
  rm -f .ray/part.*
  tar cf - -C .ray wh mlm smollm2.gguf | split -b $PART_BYTES -d - .ray/part.
  ls -l .ray/part.*
  ;;
part)
  mkdir -p /tmp/rayparts && cp .ray/part.* /tmp/rayparts/ && ls -l /tmp/rayparts
  ;;
setup)
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" \
    .whl/*.whl
  rm -rf /tmp/rayload && mkdir -p /tmp/rayload
  cat /tmp/rayparts/part.* | tar xf - -C /tmp/rayload || exit 1
  env_gpu
  # install only what this python lacks (pip's dry run against what is importable here)
  python3 -m pip install -q --no-index --find-links /tmp/rayload/wh --dry-run \
    --report /tmp/rayload/report.json "ray[data,serve]==2.60.0" || exit 1
  python3 - > /tmp/rayload/need.txt <<'PY'
import json
for item in json.load(open("/tmp/rayload/report.json"))["install"]:
    print(item["download_info"]["url"].removeprefix("file://"))
PY
  echo "installing $(wc -l < /tmp/rayload/need.txt) wheels"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$HOME/site" \
    $(cat /tmp/rayload/need.txt) || exit 1
  python3 -c "import ray, ray.data, ray.serve, wgpu; print('ray', ray.__version__)"
  python3 -m webrlx info 2>/dev/null | head -2
  nvidia-smi -L
  ;;
embed)
  env_gpu
  nvidia-smi --query-gpu=index,utilization.gpu,memory.used --format=csv -l 1 \
    > "$OUT/embed-nvidia-smi.csv" 2>&1 &
  smi=$!
  for a in ${ACTORS:-1 2}; do
    python3 bench/ray_scale.py embed --actors $a --gpus 1 --sentences "$N" \
      --cpus-per-actor 4 2> "$OUT/embed$a.err" | tee -a "$OUT/embed.json"
    tail -3 "$OUT/embed$a.err"
  done
  kill $smi
  ;;
tokenize)
  # the host's tokenization rate (webrlx's WordPieceTokenizer vs tokenizers, same run): what
  # an actor's CPU side costs a sentence, beside the embed rows (one core each: CPU time)
  env_gpu
  RAYON_NUM_THREADS=1 python3 bench/tokenize_bench.py --sentences 20000 | tee -a "$OUT/tokenize.json"
  ;;
st)
  env_gpu
  for p in ${PROCS:-1 2}; do
    python3 bench/ray_scale.py st --procs $p --sentences "$N" 2> "$OUT/st$p.err" \
      | tee -a "$OUT/st.json"
    tail -3 "$OUT/st$p.err"
  done
  ;;
serve)
  # first the front end alone (bench/engine_standin.py's GPU-free engine: a 4 ms step, 1 ms
  # of it Python), then SmolLM2's engine; 1 and 2 replicas each. Every row tells each
  # replica's engine (device, busy share of the wall time, ms a step, rows a step) and each
  # Serve process's CPU share and CPU ms a request (bench/ray_scale.py), so the row itself
  # says whether the engine or what is in front of it sets the rate.
  env_gpu
  [ -f /tmp/rayload/smollm2.gguf ] || { echo "no /tmp/rayload: run part and setup first"; exit 1; }
  nvidia-smi --query-gpu=timestamp,index,utilization.gpu,memory.used --format=csv -l 1 \
    > "$OUT/serve-nvidia-smi.csv" 2>&1 &
  smi=$!
  for eng in ${SERVE_ENGINES:-standin engine}; do
    for r in 1 2; do
      extra=()
      [ "$eng" = standin ] && extra=(--standin "${STANDIN:-4,1}")
      timeout "${RUN_LIMIT_S:-110}" python3 bench/ray_scale.py serve --replicas $r --gpus 1 \
        --model /tmp/rayload/smollm2.gguf \
        --clients "${CLIENTS:-32}" --requests "${REQUESTS:-16}" --load-procs "${LOAD_PROCS:-4}" \
        --max-sequences 16 --max-queue 32 "${extra[@]}" 2> "$OUT/serve-$eng$r.err" \
        | grep '^{' | tee -a "$OUT/serve.json"
      tail -2 "$OUT/serve-$eng$r.err"
    done
  done
  kill $smi
  ;;
*)
  echo "unknown stage $stage" >&2; exit 2
  ;;
esac
