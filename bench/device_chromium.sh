#!/usr/bin/env bash
# Issue 32 (stretch): Debian's Chromium itself on the lent GPU machine, its WebGPU (Dawn in the
# GPU process) on the NVIDIA Vulkan driver, driven by tools/cdp_pipe.py (DevTools over pipes,
# standard library only: no playwright there). Made on this box, kept out of git in .chr/:
#   ldd /usr/lib/chromium/chromium | awk '{print $3}' | grep ^/ > libs.txt
#   (for f in $(cat libs.txt); do readlink -f $f; echo $f; done) | sort -u > files.txt
#   tar cf - -C / usr/lib/chromium $(sed 's|^/||' files.txt) | xz -1 -T1 > chr.tar.xz
#   split -b 48M -d chr.tar.xz .chr/chr.part            # 142 MB: three parts
# Stages, one device-tool call each:
#   part    carry one .chr/chr.partNN: kept in /tmp/chr/parts
#   probe   unpack; the libraries the machine lacks (only those: its glibc is newer) into
#           /tmp/chr/lib; `chromium --version`; the WebGPU adapter a page gets, per flag set
set -uo pipefail
C=/tmp/chr
B=$C/root/usr/lib/chromium/chromium
# the NVIDIA ICD for WebGPU, and Chromium's SwiftShader ICD for its GL (SwANGLE): without it
# the GPU process exits ("eglInitialize SwANGLE failed")
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json:$C/root/usr/lib/chromium/vk_swiftshader_icd.json
export VK_ICD_FILENAMES=$VK_DRIVER_FILES     # older loaders read only this one
export LD_LIBRARY_PATH=$C/lib XDG_RUNTIME_DIR=$C/xdg
ADAPTER='(async () => { const a = await navigator.gpu?.requestAdapter({powerPreference: "high-performance"}); if (!a) return "no adapter"; return JSON.stringify({vendor: a.info.vendor, architecture: a.info.architecture, device: a.info.device, description: a.info.description, features: [...a.features], maxBuffer: a.limits.maxBufferSize, workgroupStorage: a.limits.maxComputeWorkgroupStorageSize}); })()'
case "$1" in
part)
  mkdir -p $C/parts && cp .chr/chr.part* $C/parts/ && ls -la $C/parts
  ;;
probe)
  # (no `pkill -f` patterns that this script's own command line could match)
  mkdir -p $C/root $C/lib $C/www $C/xdg && chmod 700 $C/xdg
  [ -x $B ] || { cat $C/parts/chr.part* | xz -dc | tar xf - -C $C/root; }
  # Debian's /lib is /usr/lib: the links ldd named sit in lib/, their targets in usr/lib/
  cp -a $C/root/lib/x86_64-linux-gnu/. $C/root/usr/lib/x86_64-linux-gnu/ 2>/dev/null
  for pass in 1 2 3 4; do              # what those need shows up as they are found
    LD_LIBRARY_PATH=$C/lib ldd $B | awk '/not found/ {print $1}' | sort -u | while read -r l; do
      f=$(find $C/root/usr/lib -name "$l" -xtype f | head -1)
      [ -n "$f" ] && cp -L "$f" $C/lib/ && echo "lib: $l"
    done
  done
  ldd $B | grep "not found" | sort -u
  timeout 10 $B --version
  echo '<!doctype html><title>probe</title>' > $C/www/index.html
  timeout 100 python3 -m http.server 8765 --directory $C/www > /dev/null 2>&1 &
  SRV=$!
  sleep 1
  # ANGLE on Vulkan needs VK_KHR_surface / xcb_surface, which the headless NVIDIA ICD lacks
  # (the GPU process exits); GL on SwiftShader, WebGPU (Dawn) on Vulkan: the adapter was
  # SwiftShader (2026-11-27). Not yet tried (the first two sets): Chrome's
  # --disable-vulkan-surface (present by copy, no VK_KHR_surface) with the headless Ozone
  # platform, so that ANGLE, and Dawn after it, may start on the NVIDIA device.
  # On the CPU box (lavapipe's ICD only) the first set starts the GPU process and Dawn tries
  # the Vulkan device (lavapipe, too old for Dawn: "shaderUniform*ArrayDynamicIndexing
  # required"), then falls back to SwiftShader; the second (--use-vulkan=native) ended the
  # browser there.
  for flags in "--enable-unsafe-webgpu --ignore-gpu-blocklist --use-angle=vulkan --enable-features=Vulkan,DefaultANGLEVulkan,VulkanFromANGLE --disable-vulkan-surface --ozone-platform=headless --disable-gpu-sandbox --use-webgpu-power-preference=default-high-performance" \
      "--enable-unsafe-webgpu --ignore-gpu-blocklist --use-angle=vulkan --enable-features=Vulkan --use-vulkan=native --disable-vulkan-surface --ozone-platform=headless --disable-gpu-sandbox" \
      "--enable-unsafe-webgpu --ignore-gpu-blocklist --use-angle=swiftshader --enable-features=Vulkan --disable-gpu-sandbox --use-webgpu-adapter=default --use-webgpu-power-preference=default-high-performance" \
      "--enable-unsafe-webgpu --ignore-gpu-blocklist --use-angle=swiftshader --enable-features=Vulkan,WebGPUDeveloperFeatures --disable-gpu-sandbox --enable-dawn-features=allow_unsafe_apis --use-webgpu-power-preference=default-high-performance"; do
    echo "== flags: $flags"
    timeout 60 python3 tools/cdp_pipe.py --chromium $B --url http://localhost:8765/ \
      --eval "$ADAPTER" --timeout 40 -- $flags 2> $OUT/probe-stderr.txt
    grep -i -v "dbus\|fontconfig" $OUT/probe-stderr.txt | tail -8
  done
  kill $SRV
  ;;
esac
