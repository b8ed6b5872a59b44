#!/usr/bin/env bash
# Issue 31's K-quant acceptance on the lent GPU machine (see shared/device/README.md): the
# shipped SmolLM2 Q4_1 GGUF is requantized by llama.cpp to F16, then Q4_K_M, Q6_K and Q8_0;
# bench/smollm2_kquants.py times webrlx's decode beside llama.cpp Vulkan on each file and checks
# 32 greedy tokens against transformers (CPU f32) on the fixture prompts. JSON into $OUT.
# Carry .gl and .whl (wgpu, cffi, gguf wheels), .big/llvk.so.xz (llama-cpp-cffi 0.4.42's
# _llama_cpp_vulkan_1_x .so, xz'd) and the GGUF as .big/gguf.part* (split -b 50M -d). Over the
# 64 MiB carry limit send the parts in calls back to back: parts are gathered in /tmp/big and
# the run starts once all $NPARTS are there (a call with only some parts just stores them).
set -uo pipefail
NPARTS=${NPARTS:-2}
mkdir -p /tmp/big
cp .big/gguf.part* /tmp/big/ 2>/dev/null
if [ -d .gl ]; then for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig; fi
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" .whl/*.whl
fi
[ -f .big/llvk.so.xz ] && xz -dc .big/llvk.so.xz > /tmp/big/_llama_cpp_vulkan_1_x.cpython-311-x86_64-linux-gnu.so
have=$(ls /tmp/big/gguf.part* 2>/dev/null | wc -l)
if [ "$have" -lt "$NPARTS" ]; then echo "stored $have of $NPARTS parts"; exit 0; fi
cat /tmp/big/gguf.part* > /tmp/big/SmolLM2-135M-Instruct.Q4_1.gguf
export PYTHONPATH="$HOME/site:$PWD" HF_HUB_OFFLINE=1
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
python3 -c "import wgpu, _cffi_backend, gguf" || { echo "wgpu/cffi/gguf missing from \$HOME/site"; exit 1; }
python3 -m webrlx info 2>/dev/null | head -4
python3 bench/smollm2_kquants.py --src /tmp/big/SmolLM2-135M-Instruct.Q4_1.gguf \
  --llamacpp /tmp/big/_llama_cpp_vulkan_1_x.cpython-311-x86_64-linux-gnu.so --work /tmp/kquants --types "${TYPES:-Q4_K_M,Q6_K,Q8_0}" \
  > "$OUT/smollm2_kquants.json" 2> "$OUT/smollm2_kquants.err"
grep -v "^llama_model_quantize_impl\|^\[ *[0-9]*/ *[0-9]*\]" "$OUT/smollm2_kquants.err" | tail -20
cat "$OUT/smollm2_kquants.json"
