#!/usr/bin/env bash
# onnxruntime-gpu (CUDA EP) beside webrlx.onnx on the lent GPU machine, which has only
# onnxruntime's CPU EP: the cp312 wheel (255 MB) goes over in parts. Stages, one device-tool
# call each (back to back: the machine goes back after ~30 s idle):
#   part     carry .ortg/ortg.partNN (56 MiB parts of the wheel): copied to /tmp/ortg
#   run      carry .gl .whl .dawn/snap.tar.xz and the last part: install the wheel into
#            /tmp/ortg/site (ahead of the machine's onnxruntime), then
#            bench/device_onnx_minilm.py then bench/device_onnx_vit.py (ViT-B/16 shape,
#            batches $VIT_BATCHES, default 1,8) from the committed snapshot, into $OUT
# Making the parts here:
#   pip download onnxruntime-gpu==1.31.1 --no-deps --python-version 312 --only-binary=:all: -d W
#   split -b 56m -d W/onnxruntime_gpu-*.whl .ortg/ortg.part
# ORT 1.31.1's CUDA EP is built for CUDA 13, which the machine's torch (cu130) brings: the
# bench imports torch first, so the CUDA libraries are loaded when the EP opens them.
set -uo pipefail
O=/tmp/ortg
case "$1" in
part)
  mkdir -p $O && cp .ortg/ortg.part* $O/ && ls $O
  ;;
run)
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" .whl/*.whl
  cat $O/ortg.part* > $O/onnxruntime_gpu-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl
  python3 -m pip install -q --no-index --no-deps --no-compile --target $O/site $O/*.whl
  mkdir -p $O/snap && xz -dc .dawn/snap.tar.xz | tar x -C $O/snap
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json HF_HUB_OFFLINE=1
  export PYTHONPATH="$O/site:$HOME/site:$O/snap"
  cd $O/snap && python3 -c "import torch, onnxruntime as o; print(o.__version__, o.get_available_providers())"
  python3 bench/device_onnx_minilm.py --shapes ${SHAPES:-1x128,32x128} --out $OUT/ort-gpu-minilm.json
  python3 bench/device_onnx_vit.py --batches ${VIT_BATCHES:-1,8} --out $OUT/ort-gpu-vit.json
  ;;
esac
