# Sourced by bench/device_decode_ab.sh and bench/device_batch_ab.sh (two webrlx trees on the
# lent GPU machine, see shared/device/README.md): stores the carried SmolLM2 GGUF parts
# (.big/gguf.part*) in /tmp/big and stops the caller with "stored K of NPARTS parts" until all
# are there (NPARTS=2), unpacks .ab/base.tar.xz and .ab/new.tar.xz into /tmp/base and /tmp/new,
# installs .gl's debs and .whl's wheels (into $SITE), and unpacks llama.cpp's Vulkan module
# (.big/llvk.so.xz) as $SO and the GGUF as /tmp/big/SmolLM2-135M-Instruct.Q4_1.gguf.
NPARTS=${NPARTS:-2}
mkdir -p /tmp/big
cp .big/gguf.part* /tmp/big/ 2>/dev/null
for t in base new; do
  [ -f ".ab/$t.tar.xz" ] && rm -rf "/tmp/$t" && mkdir -p "/tmp/$t" && tar -xJf ".ab/$t.tar.xz" -C "/tmp/$t"
done
have=$(ls /tmp/big/gguf.part* 2>/dev/null | wc -l)
if [ "$have" -lt "$NPARTS" ]; then echo "stored $have of $NPARTS parts"; exit 0; fi
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
SITE="$HOME/site"   # (fixed here: a caller may run each tree with its own HOME)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$SITE" .whl/*.whl
SO=/tmp/big/_llama_cpp_vulkan_1_x.cpython-311-x86_64-linux-gnu.so
xz -dc .big/llvk.so.xz > "$SO"
cat /tmp/big/gguf.part* > /tmp/big/SmolLM2-135M-Instruct.Q4_1.gguf
export HF_HUB_OFFLINE=1 WEBRLX_SMOLLM2_DIR=/tmp/big
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
