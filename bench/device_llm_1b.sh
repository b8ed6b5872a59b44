#!/usr/bin/env bash
# Issue 31's 1B-class point on the lent GPU machine (see shared/device/README.md):
# bench/llm_1b.py makes a Llama-3.2-1B-shaped random model (our converter, GGUF F16), has
# llama.cpp quantize it to Q4_K_M, and times webrlx (decode, 512-token prefill, batched 1/8)
# beside llama.cpp Vulkan on that file, with GPU weight bytes and peak load RSS. JSON into $OUT.
# Carry .gl and .whl (wgpu, cffi, gguf wheels) and .big/llvk.so.xz (llama-cpp-cffi 0.4.42's
# _llama_cpp_vulkan_1_x .so, xz'd). TYPE (Q4_K_M) and NEW (256) pass through.
set -uo pipefail
mkdir -p /tmp/big
if [ -d .gl ]; then for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" .whl/*.whl
fi
SO=/tmp/big/_llama_cpp_vulkan_1_x.cpython-311-x86_64-linux-gnu.so
[ -f .big/llvk.so.xz ] && xz -dc .big/llvk.so.xz > "$SO"
export PYTHONPATH="$HOME/site:$PWD" HF_HUB_OFFLINE=1
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
python3 -c "import wgpu, _cffi_backend, gguf" || { echo "wgpu/cffi/gguf missing from \$HOME/site"; exit 1; }
python3 -m webrlx info 2>/dev/null | head -4
python3 bench/llm_1b.py --llamacpp "$SO" --work /tmp/llm_1b --type "${TYPE:-Q4_K_M}" \
  --new "${NEW:-256}" > "$OUT/llm_1b.json" 2> "$OUT/llm_1b.err"
grep -v "^llama_model_quantize_impl\|^\[ *[0-9]*/ *[0-9]*\]" "$OUT/llm_1b.err" | tail -20
cat "$OUT/llm_1b.json"
