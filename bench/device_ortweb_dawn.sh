#!/usr/bin/env bash
# On the lent GPU machine (docs/dawn.md, issue 32): MiniLM through ONNX Runtime Web 1.30's WebGPU
# provider and through webrlx (hand-built and webrlx.onnx), on the same dawn.node in the same
# node, plus webrlx natively; one JSON with the ratios. After bench/device_dawn.sh's `setup` and
# `part` calls (node, dawn.node, Pyodide, the snapshot, the wheels, the model parts in /tmp/dawn):
#   ortweb  carry .dawn/ortweb.tar.xz (onnxruntime-web's ort.webgpu.min.mjs and its asyncify
#           .mjs/.wasm, 3.8 MB xz'd); unpacks it and the models, exports MiniLM to ONNX (torch)
#   bench   tools/ortweb_dawn.mjs, bench/dawn_ortweb.py under Dawn and natively, combined into
#           $OUT/ortweb-dawn.json ($SHAPES, default 1x128,32x128; $REPEATS, default 20)
# Options before the stage: --node PATH (default /tmp/dawn/node), --dawn PATH (/tmp/dawn/dawn.node).
set -uo pipefail
export D=${D:-/tmp/dawn}
export S=${S:-$D/snap}                  # the snapshot that device_dawn.sh's setup unpacked
NODE=$D/node
DAWN=$D/dawn.node
while [ $# -gt 1 ]; do
  case "$1" in
    --node) NODE=$2; shift 2 ;;
    --dawn) DAWN=$2; shift 2 ;;
    *) break ;;
  esac
done
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-$ICD} PYTHONPATH="$HOME/site:$S" HF_HUB_OFFLINE=1
export WEBRLX_MINILM_DIR=$D/models/minilm
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then
  export XDG_RUNTIME_DIR=$D/xdg && mkdir -p $XDG_RUNTIME_DIR && chmod 700 $XDG_RUNTIME_DIR
fi
MODEL=$D/minilm.onnx
SHAPES=${SHAPES:-1x128,32x128}
REPEATS=${REPEATS:-20}
OUT=${OUT:-$D/out}
mkdir -p "$OUT"
case "${1:-}" in
ortweb)
  mkdir -p $D/ortweb && tar xJf .dawn/ortweb.tar.xz -C $D/ortweb && ls -la $D/ortweb
  if [ ! -f $WEBRLX_MINILM_DIR/model.safetensors ]; then
    mkdir -p $D/models && cat $D/big/m.part* | tar xf - -C $D/models
  fi
  [ -f $MODEL ] || (cd $S && python3 tests/onnx/export_minilm.py $MODEL)
  ls -la $MODEL
  ;;
bench)
  $NODE $S/tools/ortweb_dawn.mjs --dawn $DAWN --ort $D/ortweb --model $MODEL --shapes $SHAPES \
    --repeats $REPEATS > $OUT/ortweb-dawn-ort.json 2> $OUT/ortweb-dawn-ort.err
  tail -3 $OUT/ortweb-dawn-ort.err
  (cd $S && python3 -m webrlx dawn --node $NODE --dawn $DAWN --pyodide $D/pyodide \
    --wheels $D/wheels -- python bench/dawn_ortweb.py webrlx --model $MODEL --shapes $SHAPES \
    --repeats $REPEATS) > $OUT/ortweb-dawn-webrlx.json 2> $OUT/ortweb-dawn-webrlx.err
  tail -3 $OUT/ortweb-dawn-webrlx.err
  (cd $S && python3 bench/dawn_ortweb.py webrlx --model $MODEL --shapes $SHAPES \
    --repeats $REPEATS) > $OUT/ortweb-dawn-native.json 2> $OUT/ortweb-dawn-native.err
  tail -3 $OUT/ortweb-dawn-native.err
  python3 $S/bench/dawn_ortweb.py combine --ort $OUT/ortweb-dawn-ort.json \
    --webrlx $OUT/ortweb-dawn-webrlx.json --native $OUT/ortweb-dawn-native.json \
    --out $OUT/ortweb-dawn.json | grep -A12 '"ratios"'
  ;;
*)
  echo "usage: bash bench/device_ortweb_dawn.sh [--node PATH] [--dawn PATH] ortweb|bench" >&2
  exit 2
  ;;
esac
