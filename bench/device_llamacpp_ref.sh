#!/usr/bin/env bash
# llama.cpp's reference outputs on the committed GGUF fixtures (tests/fixtures/llamacpp), on the
# lent GPU machine where llama-cpp-cffi's Vulkan module loads (shared/device/README.md).
# Carry .gl (the Vulkan loader), .whl (its cffi wheel) and .big/llvk.so.xz (llama-cpp-cffi 0.4.42's
# _llama_cpp_vulkan_1_x .so, xz'd). Writes reference.json and reference_logits.npz into $OUT:
# copy them into tests/fixtures/llamacpp/ and commit.
set -euo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" .whl/*.whl
mkdir -p /tmp/big
xz -dc .big/llvk.so.xz > /tmp/big/_llama_cpp_vulkan_1_x.cpython-311-x86_64-linux-gnu.so
export PYTHONPATH="$HOME/site:$PWD" VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
python3 tools/llamacpp_reference.py run --out "$OUT" \
  --llamacpp /tmp/big/_llama_cpp_vulkan_1_x.cpython-311-x86_64-linux-gnu.so
ls -la "$OUT"
