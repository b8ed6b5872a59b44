#!/usr/bin/env bash
# On the lent GPU machine (see the device recipe): wgpu + Vulkan loader from .gl/.whl (gguf for
# transformers unpacked in .whl/sbench), the GGUF
# sent in parts to .big/, llama.cpp's Vulkan module as .big/llvk.so.xz. Runs the SmolLM2 tests
# on the GPU and bench/smollm2.py (webrlx, transformers CUDA, llama.cpp Vulkan) into $OUT.
set -uo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
cat .big/gguf.part0* > .big/SmolLM2-135M-Instruct.Q4_1.gguf
xz -dc .big/llvk.so.xz > .big/_llama_cpp_vulkan_1_x.cpython-311-x86_64-linux-gnu.so
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" .whl/*.whl
export PYTHONPATH="$HOME/site:$PWD/.whl/sbench:$PWD" HF_HUB_OFFLINE=1
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export WEBRLX_SMOLLM2_DIR="$PWD/.big" LLAMACPP_SO="$PWD/.big/_llama_cpp_vulkan_1_x.cpython-311-x86_64-linux-gnu.so"
python3 -m webrlx info 2>/dev/null | head -4
# without wgpu webrlx would run on its numpy reference device: stop instead of timing that
python3 -c "import wgpu, _cffi_backend" || { echo "wgpu/cffi missing from \$HOME/site"; exit 1; }
[ "${SKIP_TESTS:-0}" = 1 ] || python3 -m pytest tests/backend/test_smollm2.py -q -k gpu -p no:cacheprovider 2>&1 | tail -15
python3 bench/smollm2.py --new 256 > "$OUT/smollm2_bench.json" 2> "$OUT/smollm2_bench.err"
tail -5 "$OUT/smollm2_bench.err"; cat "$OUT/smollm2_bench.json"
