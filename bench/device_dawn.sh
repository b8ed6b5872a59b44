#!/usr/bin/env bash
# On the lent GPU machine (docs/dawn.md): webrlx through Dawn in Pyodide in Node, beside
# wgpu-native, from one committed snapshot. Stages, each one device-tool call:
#   setup   carry .gl .whl .dawn/{node.xz,dawn.node.xz,pyodide.tar.xz,wheels} (and
#           .dawn/snap.tar.xz, a `git archive`, where the tree is not the code to run)
#   part    carry .dawn/parts/m.partNN (model files in 27 MiB parts), gathered in /tmp/dawn/big
#   tests   unpack the models; the backend suite natively and under Dawn, into $OUT
#   bench   bench/engines.py natively and under Dawn, then `python -m webrlx bench --only X`
#           both ways for each X of $BENCH_ONLY
#   smat    the subgroup-matrix (tensor core) matmul: raw probe, torch f16 beside it, and its
#           backend tests with test_matmul under Dawn
#   store   carry any of .dawn/ml/ml.pN (MiniLM's folder as a tar, in parts) and
#           .big/gguf.partNN (SmolLM2): kept in /tmp/dawn/ml and /tmp/dawn/g
#   steps   bench/probes/decode_steps_probe.py natively and under Dawn (SmolLM2 from `store`)
#   host    bench/probes/decode_host_probe.py natively and under Dawn: the host's time per
#           SmolLM2 decode step (SmolLM2 from `store`)
#   gpuprof bench/probes/decode_probe.py natively, under Dawn, and under Dawn with Tint's
#           robustness off (a diagnosis only: Chrome keeps it on): SmolLM2's decode and
#           prefill GPU time kernel by kernel (timestamp queries), from `store`
#   tune    the nvidia family's shipped autotune table: tools/make_tune_tables.py --here under
#           Dawn (timestamps unquantized), into $OUT/tune-nvidia-dawn.json; then
#           bench/probes/decode_read_probe.py natively, and under Dawn with and without that
#           table (read-ahead on and off both ways), SmolLM2 from `store`
#   read    decode_read_probe natively and under Dawn (k 1, 2, 4 steps a submit with
#           read-ahead), bench/llm_batch.py (Engine, 1 and 8 sequences) and bench/smollm2.py
#           against llama.cpp Vulkan (setup carrying .big/llvk.so.xz), SmolLM2 from `store`
#   qsmat   the quantized prefill on subgroup matrices (quant/qmatmul_smat.wgsl): test_smat.py
#           under Dawn; the Llama-3.2-1B-shaped Q4_K_M file (bench/llm_1b.py, llama.cpp's
#           quantizer: setup carrying .big/llvk.so.xz): its 512-token prefill natively, under
#           Dawn with and without the tensor-core kernels
#           (bench/probes/llm_1b_profile_probe.py), and llama.cpp Vulkan's on the same file
#   mmq     the opt-in int8 prefill (quant/qmatmul_mmq.wgsl): its tests under Dawn, the
#           1B-shaped Q4_K_M prefill with int8 (groups $MMQ_GROUPS) against the f16 tensor-core
#           kernels and llama.cpp Vulkan, the last logits' distance from native f32's
#   i8pre   the opt-in int8 prefill without tensor cores (natively) against f32 and llama.cpp
#   llm1b   issue 31's 1B JSON (bench/llm_1b.py beside llama.cpp; LLM_FLAGS=--int8)
#   families issue 31's fixture table natively on the GPU: tests/backend/test_llm_families.py
#           on the fixtures and transformers' kept answers made here (carry build/llm_fixtures,
#           or parts of it as build/fx1, fx2, ... over several calls: FX=keep, then FX=run);
#           $LLM_TYPES: WEBRLX_LLM_TYPES there (default: the CI set)
#   dawndec SmolLM2-shaped decode natively and under Dawn (issue 32's >= 0.8x native)
#   i8web   the int8 prefill under Dawn without subgroup matrices (Chrome's default), 1B prefill
#   i8dawn  the int8 decode and prefill tests under Dawn
#   i8var   every int8 decode GEMV variant timed at 8 rows on the 1B shapes (natively)
#   i8batch the opt-in int8 decode GEMVs on the 1B-shaped Q4_K_M file, natively: Engine steps
#           by kernel, bench/llm_batch.py off / on ($ROUNDS; SMOL=1: the SmolLM2-shaped Q4_1
#           file too), tests (setup carrying .big/llvk.so.xz)
#   i8probe int8 x staged for the 8-row Q4_K GEMVs (qgemv_i8_staged_probe.py) beside the
#           production variants at 8 rows (qgemv_variants_probe.py q4_k q4_k q4_k), natively
#   qprobe  bench/probes/qsmat_probe.py natively and under Dawn (wall time a call): each
#           qmatmul_smat tile shape against the tiled kernels on 1B and SmolLM2 prefill shapes
#   readonly the A/B of read-only storage bindings (kernels.read_only_storage): the 1B-shaped
#           Q4_K_M file's prefill, decode and Engine steps at 1 and 8 sequences natively
#           (each run a fresh autotune cache) and under Dawn (prefill and decode), then the
#           SmolLM2-shaped Q4_1 file natively; bench/probes/llm_1b_profile_probe.py
#           --read-only on|off (setup carrying .big/llvk.so.xz)
#   attn    the A/B of two-level workgroup arrays in the flash attention kernels (new wheel)
#           against flat ones (.ab/old): tests, 1B prefill, attention probe; $OUT/attn.tgz
#   panels  the A/B of the subgroup-matrix kernels' 16-row panel tiles (new wheel) against
#           the flat tiles (.ab/old): test_smat, 1B prefill, f16 matmul probe; $OUT/panels.tgz
#   wallab  the Dawn prefill wall A/B (read-only on/off, device first or none) and Dawn
#           decode with read-only on/off, outputs in $OUT/wallab.tgz
#   flashdiag where attention_flash's time goes under Dawn (5.9x native at 1x12x2048x64):
#           attention_paths_probe's flash path on shapes that vary the workgroups and the key
#           tiles apart, under Dawn with Tint's robustness on and off (diagnosis only), with
#           the row reductions over subgroups and over workgroup memory, and natively; then
#           the 1B-shaped file's Engine steps at 1 and 8 sequences natively, kernel by kernel;
#           outputs in $OUT/flashdiag.tgz
#   flashvar kernel forms of attention_flash (attention_paths_probe --flash-variant) under
#           Dawn and natively, and Dawn with the Vulkan memory model off (a diagnosis);
#           outputs in $OUT/flashvar.tgz
#   unrollab an A/B of kernel changes, new wheel from setup against the old in .ab/old (made
#           for `// @unroll` in the subgroup-matrix kernels' tile loads and the quantized GEMVs,
#           2026-11-27: no change, not kept): the smat and GEMV-variant tests under
#           Dawn (new), the 1B-shaped Q4_K_M file's 512-token prefill and 128-token decode
#           under Dawn old / new alternating, the SmolLM2-shaped Q4_1 file's decode the same
#           way, and natively (new, old) the 1B prefill, decode and Engine steps at 1 and 8
#           sequences (setup carrying .big/llvk.so.xz); outputs in $OUT/unrollab.tgz
#   flashpath attention_paths_probe's flash and two-matmul paths side by side under Dawn and
#           natively (which path each engine should take), outputs in $OUT/flashpath.tgz
#   ml16    MiniLM in float16 (tensor cores under Dawn) against torch f32 and f16: random
#           weights made there (bench/minilm_random_weights.py; carry .dawn/ml_small.tar.xz,
#           the small files), native bench/minilm.py, Dawn tuned for its shapes, Dawn f32
#   pair2   MiniLM's f16 shapes tuned under Dawn (the picks to ship), then `bench` natively
#           (torch beside) and under Dawn (--no-ref, with those picks) for the f16, attention
#           and minilm families, set side by side by bench/bench_pair.py (random MiniLM weights
#           as ml16); the f16 attention tests under Dawn; all in $OUT/pair2.tgz
#   asmat   attention_smat (f16 flash attention on subgroup matrices): its tests and the f16
#           attention tests under Dawn, then bench's f16 attention and MiniLM f16 cases there
#           (random MiniLM weights as ml16), native f16 beside with torch
#   fsmat   the fused prefill projections on tensor cores (quant/qmatmul_smat_fused.wgsl): Tint's
#           verdict, its tests under Dawn, the SmolLM2-shaped Q4_1 prefill by default / smat
#           off / each fused shape ($SHAPES) under Dawn and natively; $OUT/fsmat.tgz
#   ortconf ONNX Runtime Web on the same dawn.node against webrlx (random MiniLM weights; carry
#           .dawn/ortweb.tar.xz .dawn/ml_small.tar.xz), then the SmolLM2-shaped Q4_1 prefill under
#           Dawn (default, smat off) and natively; $OUT/ortconf.tgz
#   prefab  the A/B of a prefill change under Dawn: SmolLM2-shaped Q4_1 128-token prefill, new
#           wheel against .dawn/wheels/old/, alternating ($ROUNDS, default 3)
#   benchall every `bench` family but llm natively (torch beside) and under Dawn (--no-ref; not
#           train there),
#           set side by side (bench/bench_pair.py); random MiniLM weights as ml16
#   benchpair `bench` natively (torch beside) and under Dawn (--no-ref), family by family
#   splitab the quantized smat matmul over K pieces (rule / none / 2) in the 1B prefill beside
#           llama.cpp, after the smat tests under Dawn
#   batch8  the 1B-shaped model's 8-sequence step: a tune run with the fused tensor-core
#           projections as candidates, then shipped table against its picks, native beside
#   pattn   a SmolLM2 prefill's cached_attention alone under each key-chunk target, both ways
#   rptab   natively, the 8-row GEMVs with 2 weight rows a thread (GEMV_RPT_RQ) off / on
#   forms   the smat tests under Dawn with the loads/stores in Tint's current forms
#   mlpair  MiniLM f32 warm times natively and under Dawn, rounds interleaved (Dawn / native)
#   mltune  MiniLM's f32 (and f16) shapes, 32x128 included, tuned under Dawn (the picks to ship:
#           the table had none for f32 below 8x128), then $ROUNDS rounds of native / Dawn with
#           the shipped table / Dawn with those picks (--tune); $OUT/mltune.tgz
#   mlhost  bench/probes/minilm_submit_probe.py (MiniLM 1x128 back to back: wall, host time in
#           submit, GPU kernel sum a run) natively and under Dawn, $ROUNDS alternating
#   attnq   attention reading k / v through q's binding (K_IN_Q, V_IN): the attention and smat
#           tests under Dawn (f16 and subgroup matrices on), then `mlhost` and `mlpair`
#   smatpf  matmul_smat with loads two steps ahead (the default since) against one (_pf1), with
#           the diagnostics
#   smatdiag  matmul_smat's best shape at 4096^3 without its tile copies / its products
#   smatab  an A/B of an attention_smat change (new wheel against .ab/old, alternating), its
#           probe cases and tests under Dawn with the new one
#   sumread split-K products summed by the residual norm after them: the split-K tests
#           natively and under Dawn, then `mlhost` with and without alternating in one process
#           (--sum-in-norm on,off; run 2026-11-28 as --sum-in-reader with the next matmul's A
#           as a third form, since taken out) and `mlpair`
#   pieces  bench/probes/pieced_submit_probe.py under Dawn: a run submitted in pieces
#           (js_webgpu.SUBMIT_FIRST, $FIRSTS) against one command buffer, alternating: MiniLM
#           1x128 read back run by run and back to back, the SmolLM2-shaped Q4_1 file's
#           128-token prompt to its first token (setup carrying .big/llvk.so.xz); NATIVE=1:
#           the same natively (wgpu_native.SUBMIT_FIRST) after it
#   batchratio  natively, bench/llm_batch.py on the 1B-shaped Q4_K_M (1 and 8 sequences)
#   dqab    natively and alone (no `setup`: carry .gl .whl .big/llvk.so.xz): tall prefills'
#           quantized matmuls decoded once into f32 and run on the f32 matmul
#           (lower_quant.DEQUANT_FIRST) against the tiled kernels, $ROUNDS rounds alternating,
#           on the 1B-shaped Q4_K_M's 512-token prefill (llm_1b_profile_probe); then
#           bench/llm_1b.py (llama.cpp Vulkan beside; Engine sizes $LLM_SIZES, default 1)
#   dqrows  natively, after `dqab` in the same machine session: shorter prompts ($PREFILLS) of
#           the 1B-shaped Q4_K_M ($MODELS: also the SmolLM2-shaped Q4_1 file) with big weights
#           decoded first (the default, lower_quant.dequant_first) against the fused GEMVs
#           and tiles (--dequant-first off), alternating
#   tune1b  the autotuner's picks for the 1B-shaped Q4_K_M under Dawn (the shipped table)
#   picksab the 1B under Dawn without and with those picks (PICKS=file), natively beside
#   confirm the 1B prefill under Dawn beside llama.cpp (one call), the f16 smat matmul's
#           robustness headroom and SPIR-V, the SmolLM2-shaped prefill and decode both ways
#   putab   the smat kernels' tile stores, one clamp (new wheel) against eight (.ab/old)
#   llmwarm2 the SmolLM2-shaped Q4_1 prefill and decode both ways, the 1B's prefill attention,
#           Tint's SPIR-V of the quantized smat matmul with robustness on and off
#   llmwarm the 1B and SmolLM2-shaped files: native bench/llm_1b.py beside llama.cpp, Dawn
#           prefill and decode, each timing after WARM_S of its own work
#   warmed  the clock's ramp from idle natively and under Dawn, then flash, the f16 smat matmul
#           against torch and bench's f16 cases, each after WARM_S of its own work
#   flashclock the SM clock logged beside the flash kernel under Dawn, with and without the
#           probe's numpy reference (the GPU idle while Pyodide computes it)
#   flashalloc bench/probes/flash_alloc_probe.py under Dawn and natively: the same flash kernel
#           in fresh executables after spacer buffers of several sizes (placement, not code)
#   engines bench/engines.py natively, under Dawn, and under Dawn with one FFI call per pass
#           method (js_webgpu.ONE_CALL_ENCODE = False: the A/B of the one-call encoder), then
#           the comparisons; MiniLM and SmolLM2 from the stored parts
#   narrowab, qkvshapes, stateab, shipcheck, poolcheck (2026-11-29): the fused prefill's new
#           tile shapes tuned, q/k/v's prefill kernel per shape, the KV-cache calls timed on
#           stand-ins against not, the shipped table checked, the stand-ins' pool checked; each
#           described at its stage
set -uo pipefail
export D=/tmp/dawn
export S=$D/snap                    # the snapshot: `git archive HEAD`, the wheel built from it
export LL=$D/_llama_cpp_vulkan_1_x.cpython-311-x86_64-linux-gnu.so
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_DRIVER_FILES=$ICD PYTHONPATH="$HOME/site:$S" HF_HUB_OFFLINE=1
export WEBRLX_MINILM_DIR=$D/models/minilm WEBRLX_SMOLLM2_DIR=$D/models/smollm2
dawn() { (cd $S && python3 -m webrlx dawn --node $D/node --dawn $D/dawn.node \
  --pyodide $D/pyodide --wheels $D/wheels "$@"); }
# the A/B stages (attn, panels): the old wheel (.ab/old) beside the new one from setup, and
# `old`, the Dawn runner with it
old_wheel() {
  mkdir -p $D/wheels_old && cp .ab/old/webrlx-*.whl $D/wheels_old/ && \
    cp $D/wheels/pytest-* $D/wheels/pluggy-* $D/wheels/iniconfig-* $D/wheels_old/
}
old() { (cd $S && python3 -m webrlx dawn --node $D/node --dawn $D/dawn.node \
  --pyodide $D/pyodide --wheels $D/wheels_old "$@"); }
# the flash stages (flashdiag, flashvar, flashpath, flashalloc): Dawn with f16 and subgroup
# matrices and timestamps unquantized (`--dawn-flag` replaces the defaults, so both are given);
# `dawnt MORE -- ...` appends MORE to the enabled features (e.g. ,disable_robustness)
DF=enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
dawnt() { local more=$1; shift; dawn --dawn-flag "$DF$more" \
  --dawn-flag disable-dawn-features=timestamp_quantization "$@"; }
warm() { dawnt "" -- python -c "import webrlx" > /dev/null 2>&1; }   # (first run: slow)
# one line per attention_paths_probe JSON in folder $1: {shape: [GPU ms or error per path of $2]}
paths_summary() { for f in $1/*.json; do python3 -c "import json, sys; \
d = json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1], {s: [c[p].get('gpu_ms', \
c[p].get('error')) for p in sys.argv[2].split(',')] for s, c in d['cases'].items()})" $f $2; done; }
# an ES module at $1 exporting dawn.node's create and globals, as npm webgpu's index.js does
# (tools/tint_spirv.mjs --dawn takes it)
dawn_module() { mkdir -p "$(dirname "$1")"; printf "%s\n" "import { createRequire } from 'module';" \
  "const { create, globals } = createRequire(import.meta.url)('$D/dawn.node');" \
  "export { create, globals };" > "$1"; }
# `dawnt '' -- ARGS` (Dawn, f16 and subgroup matrices, timestamps unquantized) ended after
# SECONDS: dawn_limit SECONDS ARGS... (timeout needs a program: a bash with the functions)
dawn_limit() {
  local t=$1; shift
  timeout "$t" bash -c "$(declare -f dawn dawnt); DF=$DF; dawnt '' -- \"\$@\"" dawn_limit "$@"
}
# MiniLM's small files (.dawn/ml_small.tar.xz, carried) and random weights of its shapes made
# here (bench/minilm_random_weights.py): the timing stages' model, errors to $1
minilm_random() {
  mkdir -p $D/models/minilm && tar xJf .dawn/ml_small.tar.xz -C $D/models/minilm
  [ -f $D/models/minilm/model.safetensors ] || \
    (cd $S && python3 bench/minilm_random_weights.py $D/models/minilm 2>> "$1")
}
# the SmolLM2-shaped Q4_1 file (bench/llm_1b.py, llama.cpp's quantizer: setup carrying
# .big/llvk.so.xz), errors to $1; and its 128-token prefill (and $DECODE decode steps) through
# bench/probes/llm_1b_profile_probe.py: `prefill_dawn OUTFILE [ARGS]` under Dawn (f16 and
# subgroup matrices, timestamps unquantized), `prefill_native OUTFILE [ARGS]` natively, each
# appending one JSON line; `prefill_summary FILES...` one line a run
SMOLLM2_Q41=/tmp/llm_1b/llama-smollm2.Q4_1.gguf
PREFILL_PROBE="bench/probes/llm_1b_profile_probe.py --top 10 --sizes= --model $SMOLLM2_Q41 --prefill 128"
smollm2_q41() {
  (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
    --shape smollm2 --type Q4_1 > /dev/null 2>> "$1")
}
prefill_dawn() {                    # (WHEELS=DIR: the wheels of another tree, an A/B)
  local f=$1; shift
  timeout ${PREFILL_LIMIT:-150} bash -c "$(declare -f dawn); dawn --wheels ${WHEELS:-$D/wheels} \
--dawn-flag $DF --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b \
-- python \
$PREFILL_PROBE --decode ${DECODE:-64} $*" >> "$f" 2>> "${f%.json}.err"
}
# the autotuner's picks for that file's prefills of $2 tokens (and decode, 8 sequences) under
# Dawn: the run into $1/tune-smollm2-nvidia.json, its table into /tmp/llm_1b/picks.json (what
# `prefill_dawn ... --picks` reads), errors in $1/tune.err
tune_smollm2() {
  timeout ${TUNE_LIMIT:-200} bash -c "$(declare -f dawn); dawn --dawn-flag $DF \
--dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b -- python \
tools/make_tune_tables.py --here --models gguf --gguf $SMOLLM2_Q41 --prompts $2" \
    > $1/tune-smollm2-nvidia.json 2> $1/tune.err
  tail -c 300 $1/tune.err; tail -1 $1/tune-smollm2-nvidia.json > /tmp/llm_1b/picks.json
}
prefill_native() {
  local f=$1; shift
  (cd $S && timeout 120 python3 $PREFILL_PROBE --decode ${DECODE:-64} "$@" >> "$f" \
    2>> "${f%.json}.err")
}
prefill_summary() { for f in "$@"; do python3 -c "import json, sys; \
[print(sys.argv[1].split('/')[-1], d['prefill']['wall_ms'], d['prefill']['gpu_ms'], \
d['prefill'].get('dispatches'), d['prefill'].get('greedy_tokens'), \
d.get('decode', {}).get('tok_s'), list(d['prefill']['kernels'].items())[:6]) \
for d in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith('{')))]" "$f" \
  || tail -c 400 "$f"; done; }
# the 1B-shaped Q4_K_M file (bench/llm_1b.py, llama.cpp's quantizer), errors to $1
LLAMA_1B=/tmp/llm_1b/llama-1b.Q4_K_M.gguf
llama_1b() {
  (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
    > /dev/null 2>> "$1")
}
# one line per llm_1b_profile_probe JSON line of file $2: label $1, then each Engine step's
# (sequences, wall ms, GPU ms, its ${3:-5} costliest kernels)
engine_summary() { python3 -c "import json, sys; [print(sys.argv[1], [(e['sequences'], \
e['step_wall_ms'], e['gpu_ms'], list(e['kernels'].items())[:int(sys.argv[3])]) \
for e in d.get('engine', [])]) \
for d in map(json.loads, (l for l in open(sys.argv[2]) if l.startswith('{')))]" "$1" "$2" \
  "${3:-5}"; }
case "$1" in
setup)
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" .whl/*.whl
  mkdir -p $D/pyodide $S $D/big $D/wheels
  xz -dc .dawn/node.xz > $D/node && chmod +x $D/node
  xz -dc .dawn/dawn.node.xz > $D/dawn.node
  tar xJf .dawn/pyodide.tar.xz -C $D/pyodide
  # the code both engines run: .dawn/snap.tar.xz where carried, else this working tree (which
  # travels with every call anyway: carrying both can pass the 64 MiB a call)
  if [ -f .dawn/snap.tar.xz ]; then tar xJf .dawn/snap.tar.xz -C $S
  else tar cf - --exclude=./.dawn --exclude=./.gl --exclude=./.whl --exclude=./.big \
    --exclude=./.ab --exclude=./.chr . | tar xf - -C $S; fi
  cp .dawn/wheels/*.whl $D/wheels/
  # llama.cpp Vulkan (`read`, `qsmat`): the module loads only under its own file name
  [ -f .big/llvk.so.xz ] && xz -dc .big/llvk.so.xz > $LL
  $D/node --version && (cd $S && python3 -m webrlx info | head -3)
  dawn -- python -c "import webrlx as wr; i = wr.device().info; print(i.name, sorted(i.features))"
  ;;
part)
  cp .dawn/parts/m.part* $D/big/ && ls $D/big
  ;;
tests)
  mkdir -p $D/models && cat $D/big/m.part* | tar xf - -C $D/models && ls -R $D/models | head
  # three Dawn sessions side by side (one Pyodide each), and the native suite
  G1="tests/backend/test_matmul.py tests/backend/test_elementwise.py tests/backend/test_reduce.py"
  G2="tests/backend/test_smollm2.py tests/backend/test_minilm.py tests/backend/test_models.py tests/backend/test_decoder_ops.py tests/backend/test_quant.py"
  G3=$(cd $S && ls tests/backend/test_*.py | grep -v -x $(printf -- "-e %s " $G1 $G2))
  # (TEST_GROUPS="3": only those Dawn sessions; NATIVE=0: not the native suite)
  i=0; for g in "$G1" "$G2" "$G3"; do i=$((i+1))
    case " ${TEST_GROUPS:-1 2 3} " in *" $i "*) ;; *) continue;; esac
    dawn --json $OUT/dawn-tests-$i.json -- pytest $g > $OUT/dawn-tests-$i.txt 2>&1 &
  done
  [ "${NATIVE:-1}" = 1 ] && (cd $S && python3 -m pytest tests/backend -o addopts= -q -rfE \
    -p no:cacheprovider > $OUT/native-tests.txt 2>&1)
  wait; tail -3 $OUT/native-tests.txt 2> /dev/null
  for f in $OUT/dawn-tests-*.txt; do grep -E "^dawn: |passed|failed" $f | tail -2; done
  ;;
bench)
  (cd $S && python3 bench/engines.py --new 256 > $OUT/engines-native.json)
  dawn -- python bench/engines.py --new 256 > $OUT/engines-dawn.json
  (cd $S && python3 bench/engines.py --compare $OUT/engines-native.json $OUT/engines-dawn.json \
    > $OUT/engines.json)
  # one file per case family: what finishes within its time limit comes back
  for only in ${BENCH_ONLY:-minilm matmul attention f16}; do
    (cd $S && timeout 120 python3 -m webrlx bench --only $only > $OUT/bench-native-$only.json)
    timeout ${BENCH_LIMIT:-120} bash -c "$(declare -f dawn); dawn -- bench --only $only" \
      > $OUT/bench-dawn-$only.json
  done
  ;;
store)
  mkdir -p $D/ml $D/g
  cp .dawn/ml/ml.p* $D/ml/ 2>/dev/null; cp .big/gguf.part* $D/g/ 2>/dev/null; ls $D/ml $D/g
  ;;
steps)
  # decode with k steps a submit (llm.DECODE_STEPS_PER_SUBMIT; bench/probes/decode_steps_probe.py)
  # natively and under Dawn, SmolLM2 from the stored parts
  mkdir -p $D/models/smollm2
  cat $D/g/gguf.part* > $D/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  (cd $S && python3 bench/probes/decode_steps_probe.py --new 256 > $OUT/steps-native.json)
  dawn -- python bench/probes/decode_steps_probe.py --new 256 > $OUT/steps-dawn.json
  tail -c 600 $OUT/steps-native.json; echo; tail -c 600 $OUT/steps-dawn.json
  ;;
host)
  # the host's time per decode step: dry (nothing submitted: Python, FFI, Dawn's encoding) and
  # wet (GPU idle before each step; queue.submit apart), per js_webgpu mode under Dawn
  mkdir -p $D/models/smollm2
  cat $D/g/gguf.part* > $D/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  (cd $S && python3 bench/probes/decode_host_probe.py --wet 32 > $OUT/host-native.json)
  dawn -- python bench/probes/decode_host_probe.py --dry 1000 --wet 32 > $OUT/host-dawn.json
  cat $OUT/host-native.json; echo; cat $OUT/host-dawn.json
  ;;
gpuprof)
  mkdir -p $D/models/smollm2
  cat $D/g/gguf.part* > $D/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  (cd $S && python3 bench/probes/decode_probe.py > $OUT/gpuprof-native.json)
  dawn -- python bench/probes/decode_probe.py > $OUT/gpuprof-dawn.json
  dawn --dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia,disable_robustness \
    -- python bench/probes/decode_probe.py > $OUT/gpuprof-dawn-no-robustness.json
  for f in native dawn dawn-no-robustness; do python3 -c "import json, sys; \
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); \
print(sys.argv[1], {k: d[k] for k in ('decode_tok_s', 'prefill_ms', 'decode_gpu_ms', 'prefill_gpu_ms')})" \
    $OUT/gpuprof-$f.json; done
  ;;
tune)
  mkdir -p $D/models/smollm2
  cat $D/g/gguf.part* > $D/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  dawn --dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia \
    --dawn-flag disable-dawn-features=timestamp_quantization \
    -- python tools/make_tune_tables.py --here --models smollm2 > $OUT/tune-nvidia-dawn.json
  cp $OUT/tune-nvidia-dawn.json $D/models/smollm2/     # the folder Dawn's Python sees
  (cd $S && python3 bench/probes/decode_read_probe.py > $OUT/read-native.json)
  dawn -- python bench/probes/decode_read_probe.py \
    --tune /home/pyodide/models/smollm2/tune-nvidia-dawn.json > $OUT/read-dawn.json
  for f in native dawn; do python3 -c "import json, sys; \
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); \
print(sys.argv[1], d['tokens_equal'], d['tok_s'], {m: g['ms'] for m, g in d['decode_gpu'].items()})" \
    $OUT/read-$f.json; done
  ;;
read)
  mkdir -p $D/models/smollm2
  cat $D/g/gguf.part* > $D/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  (cd $S && python3 bench/probes/decode_read_probe.py > $OUT/read-native.json)
  dawn -- python bench/probes/decode_read_probe.py --ks 1,2,4 > $OUT/read-dawn.json
  (cd $S && python3 bench/llm_batch.py --sizes 1,8 --new 64 > $OUT/batch-smollm2.json)
  (cd $S && LLAMACPP_SO=$LL python3 bench/smollm2.py --new 256 --peers llamacpp \
    > $OUT/smollm2-llamacpp.json 2> $OUT/smollm2-llamacpp.err)
  for f in read-native read-dawn; do python3 -c "import json, sys; \
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); \
print(sys.argv[1], d['tokens_equal'], d['tok_s'])" $OUT/$f.json; done
  tail -c 400 $OUT/batch-smollm2.json; echo; tail -c 600 $OUT/smollm2-llamacpp.json
  ;;
qsmat)
  dawn --json $OUT/dawn-smat-tests.json -- pytest tests/backend/test_smat.py \
    > $OUT/dawn-smat-tests.txt 2>&1; tail -4 $OUT/dawn-smat-tests.txt
  # LLM_SHAPE / LLM_TYPE / PREFILL: bench/llm_1b.py's random model (1b, Q4_K_M, 512 by default;
  # smollm2 Q4_1 128 is SmolLM2-135M's layout)
  (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
    --shape ${LLM_SHAPE:-1b} --type ${LLM_TYPE:-Q4_K_M} 2>/dev/null | tail -4)
  M=/tmp/llm_1b/llama-${LLM_SHAPE:-1b}.${LLM_TYPE:-Q4_K_M}.gguf
  P="bench/probes/llm_1b_profile_probe.py --model $M --sizes=${SIZES:-} --top 8 --prefill ${PREFILL:-512}"
  (cd $S && python3 $P > $OUT/prefill-1b-native.json 2> $OUT/prefill-1b-native.err)
  # (timestamps unrounded: the per-kernel profile from timestamp queries, as natively)
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  dawn $T -- python $P > $OUT/prefill-1b-dawn.json 2> $OUT/prefill-1b-dawn.err
  dawn $T -- python $P --smat off > $OUT/prefill-1b-dawn-nosmat.json \
    2> $OUT/prefill-1b-dawn-nosmat.err
  for sh in ${SHAPES:-}; do    # each tile shape forced on every matmul: the prefill's wall ms
    dawn $T -- python $P --smat $sh > $OUT/prefill-1b-dawn-$sh.json 2>> $OUT/prefill-1b-shapes.err
    python3 -c "import json, sys; d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); \
print(sys.argv[2], d['prefill']['wall_ms'])" $OUT/prefill-1b-dawn-$sh.json $sh
  done
  (cd $S && python3 bench/peer_llamacpp.py --so $LL --model $M --prefill ${PREFILL:-512} \
    > $OUT/prefill-1b-llamacpp.json \
    2> $OUT/prefill-1b-llamacpp.err)
  for f in native dawn dawn-nosmat llamacpp; do echo "== $f"; python3 -c "import json, sys; \
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d.get('prefill', d))" \
      $OUT/prefill-1b-$f.json || tail -5 $OUT/prefill-1b-$f.err; done
  ;;
attn)
  # the A/B of two-level workgroup arrays in the flash attention kernels (decoder/attn_flash,
  # attention/attention_flash: row clamps that leave the unrolled loops under Tint's
  # robustness) against the flat ones: new wheel from setup, old in .ab/old; the attention
  # tests under Dawn (new), the 1B-shaped prefill (Dawn new / old alternating, native new) and
  # attention_paths_probe's flash path (Dawn new / old, native); outputs in $OUT/attn.tgz
  old_wheel; mkdir -p $OUT/a
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  dawn -- pytest tests/backend/test_decoder_ops.py tests/backend/test_attention_window.py \
    tests/backend/test_nn.py -q -k "attention or flash or cached" > $OUT/a/tests.txt 2>&1
  tail -2 $OUT/a/tests.txt
  (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
    --shape 1b --type Q4_K_M 2>/dev/null | tail -1)
  P="bench/probes/llm_1b_profile_probe.py --model /tmp/llm_1b/llama-1b.Q4_K_M.gguf --top 4 --sizes="
  dawn $T -- python $P > /dev/null 2>&1      # (the first Dawn run of a machine is slow)
  old $T -- python $P > /dev/null 2>&1
  for r in 1 2; do
    dawn $T -- python $P >> $OUT/a/prefill-new.json 2>> $OUT/a/err.txt
    old $T -- python $P >> $OUT/a/prefill-old.json 2>> $OUT/a/err.txt
  done
  (cd $S && python3 $P >> $OUT/a/prefill-native.json 2>> $OUT/a/err.txt)
  A="bench/probes/attention_paths_probe.py --shapes 32x12x128x64,1x12x512x64,1x12x2048x64 --paths flash"
  dawn $T -- python $A > $OUT/a/flash-new.json 2>> $OUT/a/err.txt
  old $T -- python $A > $OUT/a/flash-old.json 2>> $OUT/a/err.txt
  (cd $S && python3 $A > $OUT/a/flash-native.json 2>> $OUT/a/err.txt)
  (cd $OUT && tar czf attn.tgz a)
  ;;
panels)
  # the A/B of the 16-row panel tiles of the subgroup-matrix kernels (compiler/smat.slots:
  # subgroup-matrix loads at constant offsets, which Tint's robustness leaves unchecked)
  # against the flat tiles before them: the new wheel from setup (.dawn/wheels), the old one
  # carried in .ab/old; test_smat under Dawn with the new wheel, then the 1B-shaped Q4_K_M
  # file's 512-token prefill and the f16 matmul probe at 4096^3, old and new alternating;
  # every output in $OUT/panels.tgz
  old_wheel; mkdir -p $OUT/p
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  dawn -- pytest tests/backend/test_smat.py -q > $OUT/p/smat-tests.txt 2>&1
  tail -3 $OUT/p/smat-tests.txt
  (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
    --shape 1b --type Q4_K_M 2>/dev/null | tail -1)
  P="bench/probes/llm_1b_profile_probe.py --model /tmp/llm_1b/llama-1b.Q4_K_M.gguf --top 4 --sizes="
  for r in 1 2; do
    dawn $T -- python $P >> $OUT/p/prefill-new.json 2>> $OUT/p/err.txt
    old $T -- python $P >> $OUT/p/prefill-old.json 2>> $OUT/p/err.txt
  done
  dawn $T -- python bench/probes/smat_probe.py --n 4096 --sgid builtin > $OUT/p/smat-new.json \
    2>> $OUT/p/err.txt
  old $T -- python bench/probes/smat_probe.py --n 4096 --sgid builtin > $OUT/p/smat-old.json \
    2>> $OUT/p/err.txt
  (cd $OUT && tar czf panels.tgz p)
  ;;
wallab)
  # the Dawn prefill wall A/B (qsmat printed 52.8 ms wall with 32.8 GPU ms, against 34.7 wall
  # at 29e5009): read-only bindings on/off, the device first or none; then Dawn decode with
  # read-only on/off; every output in one tar ($OUT returns few files)
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
    --shape 1b --type Q4_K_M 2>/dev/null | tail -1)
  M=/tmp/llm_1b/llama-1b.Q4_K_M.gguf
  P="bench/probes/llm_1b_profile_probe.py --model $M --top 6 --prefill 512 --sizes="
  mkdir -p $OUT/w
  for c in "on first" "off first" "on none" "on first"; do
    set -- $c
    dawn $T -- python $P --read-only $1 --device $2 >> $OUT/w/dawn-prefill.json 2>> $OUT/w/dawn.err
  done
  for ro in on off; do
    dawn $T -- python $P --read-only $ro --decode 128 >> $OUT/w/dawn-decode.json \
      2>> $OUT/w/dawn.err
  done
  (cd $S && python3 $P --read-only on >> $OUT/w/native-prefill.json 2>> $OUT/w/native.err)
  # Tint's robustness off (diagnosis only: Chrome keeps it on): how much of flash attention's
  # 6.2 ms under Dawn (2.4 natively) is index clamping
  dawn --dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia,disable_robustness \
    --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b \
    -- python $P >> $OUT/w/dawn-prefill-no-robustness.json 2>> $OUT/w/dawn.err
  (cd $OUT && tar czf wallab.tgz w && rm -rf w)
  ;;
readonly)
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia --mount /tmp/llm_1b"
  for shape in 1b:Q4_K_M:512 smollm2:Q4_1:128; do
    IFS=: read sh ty pf <<< "$shape"
    (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
      --shape $sh --type $ty 2>/dev/null | tail -1)
    M=/tmp/llm_1b/llama-$sh.$ty.gguf
    P="bench/probes/llm_1b_profile_probe.py --model $M --top 6 --prefill $pf --decode 128"
    for ro in ${ROS:-on off}; do
      (cd $S && HOME=/tmp/h-$sh-$ro-$RANDOM python3 $P --sizes=1,8 --read-only $ro \
        >> $OUT/ro-$sh-native-$ro.json 2>> $OUT/ro-$sh-native.err)
      [ $sh = 1b ] && dawn $T -- python $P --sizes= --read-only $ro >> $OUT/ro-$sh-dawn-$ro.json \
        2>> $OUT/ro-$sh-dawn.err
    done
  done
  for f in $OUT/ro-*.json; do echo "== $f"; python3 -c "import json, sys; \
[print(d['prefill']['wall_ms'], d['prefill']['gpu_ms'], d.get('decode', {}).get('tok_s'), \
 [(e['sequences'], e['step_wall_ms'], e['gpu_ms']) for e in d['engine']]) \
 for d in map(json.loads, open(sys.argv[1]).read().split(chr(10))[:-1])]" $f; done
  tail -3 $OUT/ro-*.err
  ;;
flashdiag)
  mkdir -p $OUT/f
  A="bench/probes/attention_paths_probe.py --paths flash --shapes ${SHAPES:-1x12x2048x64,4x12x512x64,1x12x1024x64,2x12x1024x64,1x12x2048x32,1x12x512x64}"
  warm
  dawnt "" -- python $A > $OUT/f/dawn.json 2>> $OUT/f/err.txt
  dawnt ,disable_robustness -- python $A > $OUT/f/dawn-norobust.json 2>> $OUT/f/err.txt
  dawnt "" -- python $A --flash-subgroups off > $OUT/f/dawn-nosg.json 2>> $OUT/f/err.txt
  dawnt "" -- python $A --no-mask > $OUT/f/dawn-nomask.json 2>> $OUT/f/err.txt
  (cd $S && python3 $A > $OUT/f/native.json 2>> $OUT/f/err.txt)
  (cd $S && python3 $A --flash-subgroups off > $OUT/f/native-nosg.json 2>> $OUT/f/err.txt)
  paths_summary $OUT/f flash
  if [ -n "${ENGINE:-}" ]; then
    (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
      --shape 1b --type Q4_K_M 2>/dev/null | tail -1)
    (cd $S && python3 bench/probes/llm_1b_profile_probe.py --model /tmp/llm_1b/llama-1b.Q4_K_M.gguf \
      --top 12 --prefill 64 --sizes=1,8 > $OUT/f/engine-native.json 2>> $OUT/f/err.txt)
  fi
  tail -3 $OUT/f/err.txt
  (cd $OUT && tar czf flashdiag.tgz f && rm -rf f)
  ;;

flashvar)
  mkdir -p $OUT/v
  A="bench/probes/attention_paths_probe.py --paths flash --shapes ${SHAPES:-1x12x2048x64,4x12x512x64,1x12x512x64,32x12x128x64}"
  warm
  for v in base noprefetch roll_d roll_pv roll_d,roll_pv noprefetch,roll_d,roll_pv; do
    V=$([ $v = base ] || echo "--flash-variant $v")
    dawnt "" -- python $A $V > $OUT/v/dawn-$v.json 2>> $OUT/v/err.txt
  done
  dawn --dawn-flag $DF --dawn-flag disable-dawn-features=timestamp_quantization,use_vulkan_memory_model \
    -- python $A > $OUT/v/dawn-no-vkmm.json 2>> $OUT/v/err.txt
  for v in base noprefetch roll_d,roll_pv; do
    V=$([ $v = base ] || echo "--flash-variant $v")
    (cd $S && python3 $A $V > $OUT/v/native-$v.json 2>> $OUT/v/err.txt)
  done
  paths_summary $OUT/v flash
  grep -v "^[0-9]" $OUT/v/err.txt | tail -3
  (cd $OUT && tar czf flashvar.tgz v && rm -rf v)
  ;;

unrollab)
  old_wheel; mkdir -p $OUT/u
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  for shape in 1b:Q4_K_M smollm2:Q4_1; do
    IFS=: read sh ty <<< "$shape"
    (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
      --shape $sh --type $ty 2>/dev/null | tail -1)
  done
  dawn -- pytest tests/backend/test_smat.py tests/backend/test_quant.py -q \
    -k "smat or unroll or wide or WIDE or each_gemv or rope_and_cache" > $OUT/u/tests.txt 2>&1
  tail -2 $OUT/u/tests.txt
  P="bench/probes/llm_1b_profile_probe.py --top 8 --sizes="
  B=/tmp/llm_1b/llama-1b.Q4_K_M.gguf
  M=/tmp/llm_1b/llama-smollm2.Q4_1.gguf
  dawn $T -- python $P --model $B > /dev/null 2>&1      # (the first Dawn run of a machine is slow)
  for r in 1 2; do
    dawn $T -- python $P --model $B --decode 128 >> $OUT/u/dawn-1b-new.json 2>> $OUT/u/err.txt
    old $T -- python $P --model $B --decode 128 >> $OUT/u/dawn-1b-old.json 2>> $OUT/u/err.txt
    dawn $T -- python $P --model $M --prefill 128 --decode 256 >> $OUT/u/dawn-smollm2-new.json \
      2>> $OUT/u/err.txt
    old $T -- python $P --model $M --prefill 128 --decode 256 >> $OUT/u/dawn-smollm2-old.json \
      2>> $OUT/u/err.txt
  done
  # natively: the old wheel's package beside a copy of the probe (which imports the webrlx
  # two folders above it)
  mkdir -p /tmp/oldsnap/bench/probes && python3 -c "import glob, sys, zipfile; \
zipfile.ZipFile(glob.glob(sys.argv[1])[0]).extractall('/tmp/oldsnap')" "$D/wheels_old/webrlx-*.whl"
  cp $S/bench/probes/llm_1b_profile_probe.py /tmp/oldsnap/bench/probes/
  for v in new old new old; do
    R=$S; [ $v = old ] && R=/tmp/oldsnap
    (cd $R && PYTHONPATH="$HOME/site:$R" HOME=/tmp/h-$v-$RANDOM python3 $P --model $B \
      --decode 128 --sizes=1,8 >> $OUT/u/native-1b-$v.json 2>> $OUT/u/err.txt)
  done
  for f in $OUT/u/*.json; do echo "== $f"; python3 -c "import json, sys; \
[print(d['prefill']['wall_ms'], d['prefill']['gpu_ms'], d.get('decode', {}).get('tok_s'), \
 [(e['sequences'], e['step_wall_ms'], e['gpu_ms']) for e in d.get('engine', [])]) \
 for d in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith('{')))]" $f; done
  grep -v "^[0-9]" $OUT/u/err.txt | tail -3
  (cd $OUT && tar czf unrollab.tgz u && rm -rf u)
  ;;
flashpath)
  mkdir -p $OUT/fp
  A="bench/probes/attention_paths_probe.py --paths matmul,flash --shapes ${SHAPES:-32x12x128x64,8x12x256x64,1x12x512x64,4x12x512x64,8x12x512x64,1x12x1024x64,1x12x2048x64,2x12x128x32}"
  warm
  dawnt "" -- python $A > $OUT/fp/dawn.json 2>> $OUT/fp/err.txt
  (cd $S && python3 $A > $OUT/fp/native.json 2>> $OUT/fp/err.txt)
  paths_summary $OUT/fp matmul,flash
  grep -v "^[0-9]" $OUT/fp/err.txt | tail -3
  (cd $OUT && tar czf flashpath.tgz fp && rm -rf fp)
  ;;

flashalloc)
  # two Dawn processes of the same shape (process to process), one of another shape, native
  warm
  F=bench/probes/flash_alloc_probe.py
  for r in 1 2; do dawnt "" -- python $F > $OUT/alloc-dawn-$r.json 2>> $OUT/alloc-err.txt; done
  dawnt "" -- python $F --shape 8x12x512x64 > $OUT/alloc-dawn-8x12x512.json 2>> $OUT/alloc-err.txt
  (cd $S && python3 $F > $OUT/alloc-native.json 2>> $OUT/alloc-err.txt)
  # Tint's zero-fill of workgroup memory (48 KiB a workgroup here) off
  dawnt ",disable_workgroup_init" -- python bench/probes/attention_paths_probe.py --paths flash \
    --shapes 1x12x2048x64,8x12x512x64 > $OUT/alloc-dawn-noinit.json 2>> $OUT/alloc-err.txt
  for f in $OUT/alloc-*.json; do echo "== $f"; cat $f; done
  grep -v "^{" $OUT/alloc-err.txt | tail -3
  ;;

flashclock)
  # the SM clock (nvidia-smi every 20 ms) beside attention_paths_probe under Dawn with and
  # without its numpy reference (seconds of Pyodide CPU with the GPU idle), then flashalloc's
  # probe (no reference): is the slow attention_flash the GPU's clock after idle time?
  warm
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,pstate,utilization.gpu \
    --format=csv,noheader -lms 20 > $OUT/clocks.csv &
  NS=$!
  A="bench/probes/attention_paths_probe.py --paths flash --shapes 1x12x2048x64,8x12x512x64"
  for v in ref noref; do
    X=$([ $v = noref ] && echo --no-ref)
    echo "dawn $v start t=$(date +%s.%N)" >> $OUT/clock-err.txt
    dawnt "" -- python $A $X > $OUT/clock-dawn-$v.json 2>> $OUT/clock-err.txt
  done
  echo "native ref start t=$(date +%s.%N)" >> $OUT/clock-err.txt
  (cd $S && python3 $A > $OUT/clock-native-ref.json 2>> $OUT/clock-err.txt)
  echo "alloc start t=$(date +%s.%N)" >> $OUT/clock-err.txt
  dawnt "" -- python bench/probes/flash_alloc_probe.py --spacers 0,0 > $OUT/clock-alloc.json \
    2>> $OUT/clock-err.txt
  kill $NS
  paths_summary $OUT flash 2>/dev/null | grep clock-
  grep -v "^{" $OUT/clock-err.txt | grep -v "^ " | tail -12
  ;;
warmed)
  # GPU clocks: the ramp from idle natively and under Dawn (clock_ramp_probe), then the flash
  # kernel, the f16 subgroup-matrix matmul against torch f16, and bench's f16 cases, each timed
  # after WARM_S of its own work (webrlx.cli.clocks.hold_clocks), with nvidia-smi's clock beside
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu \
    --format=csv,noheader -lms 100 > $OUT/clocks.csv &
  NS=$!
  warm
  R=bench/probes/clock_ramp_probe.py
  (cd $S && python3 $R > $OUT/ramp-native.json 2>> $OUT/err.txt)
  dawnt "" -- python $R > $OUT/ramp-dawn.json 2>> $OUT/err.txt
  A="bench/probes/attention_paths_probe.py --paths flash --shapes 1x12x2048x64,8x12x512x64"
  dawnt "" -- python $A > $OUT/attn-dawn.json 2>> $OUT/err.txt
  (cd $S && python3 $A > $OUT/attn-native.json 2>> $OUT/err.txt)
  (cd $S && python3 bench/probes/torch_f16_matmul.py > $OUT/torch-f16-matmul.json)
  dawnt "" -- python bench/probes/smat_probe.py --n 4096 --sgid builtin > $OUT/smat-probe.json \
    2>> $OUT/err.txt
  for only in ${BENCH_ONLY:-f16}; do
    (cd $S && timeout 150 python3 -m webrlx bench --only $only > $OUT/bench-native-$only.json)
    dawn_limit 200 bench --only $only \
      > $OUT/bench-dawn-$only.json
  done
  kill $NS
  for f in $OUT/ramp-*.json; do python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
print(sys.argv[1].split('/')[-1], d['first_ms'], d['final_ms'], d['within_1.2x_from_s'])" $f; done
  paths_summary $OUT flash 2>/dev/null | grep attn-
  cat $OUT/torch-f16-matmul.json; echo
  python3 -c "import json, sys; d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); \
[print(v['shape'], v.get('ms_4096'), v.get('ms_2048'), v.get('error', '')[:200]) for v in d['variants']]" \
    $OUT/smat-probe.json
  for f in $OUT/bench-*.json; do python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
[print(sys.argv[1].split('/')[-1], c.get('case'), c.get('webrlx_ms'), c.get('ref_ms'), c.get('ratio_vs_ref')) \
 for c in d['cases']]" $f; done
  grep -v "^{" $OUT/err.txt | grep -iv "^ \|warn" | tail -4
  ;;
llmwarm)
  # issue 31/32's LLM figures with every timing after WARM_S of its own work: natively
  # bench/llm_1b.py (decode and 512-token prefill beside llama.cpp, batched 1/8) on the
  # 1B-shaped Q4_K_M; under Dawn its prefill (subgroup matrices) and decode; the SmolLM2-shaped
  # Q4_1 128-token prefill and decode under Dawn and natively (carry .big/llvk.so.xz)
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,utilization.gpu \
    --format=csv,noheader -lms 100 > $OUT/clocks.csv &
  NS=$!
  for shape in 1b:Q4_K_M smollm2:Q4_1; do
    IFS=: read sh ty <<< "$shape"
    (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
      --shape $sh --type $ty > /dev/null 2>> $OUT/err.txt)
  done
  ls -la /tmp/llm_1b
  (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b > $OUT/llm1b-native.json \
    2> $OUT/llm1b-native.err)
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  P="bench/probes/llm_1b_profile_probe.py --top 8 --sizes="
  B=/tmp/llm_1b/llama-1b.Q4_K_M.gguf
  M=/tmp/llm_1b/llama-smollm2.Q4_1.gguf
  dawn $T -- python $P --model $B --decode 128 > $OUT/prefill-1b-dawn.json 2>> $OUT/err.txt
  dawn $T -- python $P --model $M --prefill 128 --decode 256 > $OUT/smollm2-dawn.json \
    2>> $OUT/err.txt
  (cd $S && python3 $P --model $M --prefill 128 --decode 256 > $OUT/smollm2-native.json \
    2>> $OUT/err.txt)
  kill $NS
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); w = d['webrlx']; \
l = d.get('llamacpp', {}); print('native 1b: decode', w['decode_tok_s'], 'llama.cpp', \
l.get('decode_tok_s'), 'prefill', w['prefill_ms'], 'llama.cpp', l.get('prefill_ms'), \
'batched', [(r['sequences'], r['tok_per_s']) for r in w['batched']['rows']])" $OUT/llm1b-native.json \
    || tail -5 $OUT/llm1b-native.err
  for f in prefill-1b-dawn smollm2-dawn smollm2-native; do python3 -c "import json, sys; \
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); p = d['prefill']; \
print(sys.argv[2], p['wall_ms'], p['gpu_ms'], p['kernels'], d.get('decode'))" $OUT/$f.json $f; done
  grep -v "^{" $OUT/err.txt | grep -iv "^ \|warn" | tail -4
  ;;
llmwarm2)
  # the SmolLM2-shaped Q4_1 file (prefill 128, decode 256) under Dawn and natively; the 1B's
  # heads' prefill attention alone (32 / 8 heads, S 512) both ways; Tint's SPIR-V of the 1B
  # prefill's quantized smat matmul (Q4_K, 128x128 s2x4) with robustness on and off
  (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
    --shape smollm2 --type Q4_1 > /dev/null 2>> $OUT/err.txt)
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  P="bench/probes/llm_1b_profile_probe.py --top 8 --sizes="
  M=/tmp/llm_1b/llama-smollm2.Q4_1.gguf
  for r in 1 2; do
    dawn $T -- python $P --model $M --prefill 128 --decode 256 >> $OUT/smollm2-dawn.json \
      2>> $OUT/err.txt
    (cd $S && python3 $P --model $M --prefill 128 --decode 256 >> $OUT/smollm2-native.json \
      2>> $OUT/err.txt)
  done
  A="bench/probes/prefill_attention_probe.py --d 64 --heads 32 --kv-heads 8 --s 512"
  (cd $S && python3 $A > $OUT/attn1b-native.json 2>> $OUT/err.txt)
  dawnt "" -- python $A > $OUT/attn1b-dawn.json 2>> $OUT/err.txt
  mkdir -p $OUT/tint
  dawn_module /tmp/dawnpkg/index.mjs
  (cd $S && python3 -c "from webrlx.kernels import kernel; from webrlx.compiler import smat; \
sh = next(s for s in smat.SHAPES if s.name == 'matmul_smat_128x128_s2x4_k32'); \
print(kernel('quant/qmatmul_smat', T='f32', **smat.slots(sh, True, b_by_n=True)).source)" \
    > $OUT/tint/qsmat.wgsl)
  for tg in "" ",disable_robustness"; do
    $D/node $S/tools/tint_spirv.mjs $OUT/tint/qsmat.wgsl --dawn /tmp/dawnpkg/index.mjs \
      --features shader-f16,subgroups,chromium-experimental-subgroup-matrix \
      --toggles "vulkan_enable_f16_on_nvidia$tg" \
      --constants '{"FMT": 12, "QK": 256, "QBYTES": 144, "OWN": 0}' \
      > $OUT/tint/qsmat${tg#,}.spvasm 2>> $OUT/tint/err.txt
  done
  wc -l $OUT/tint/*; tail -3 $OUT/tint/err.txt
  (cd $OUT && tar czf tint.tgz tint && rm -rf tint)
  for f in smollm2-dawn smollm2-native; do python3 -c "import json, sys; \
[print(sys.argv[2], d['prefill']['wall_ms'], d['prefill']['gpu_ms'], d.get('decode', {}).get('tok_s')) \
 for d in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith('{')))]" $OUT/$f.json $f; done
  for f in attn1b-native attn1b-dawn; do python3 -c "import json, sys; \
[print(sys.argv[2], r['kernel'], r['gpu_us'], r['kernels']) for r in json.load(open(sys.argv[1]))['cases']]" \
    $OUT/$f.json $f 2>/dev/null || tail -c 600 $OUT/$f.json; done
  grep -v "^{" $OUT/err.txt | grep -iv "^ \|warn" | tail -4
  ;;
putab)
  # the smat kernels' tile stores with one clamp a 16-byte store (new wheel) against eight
  # (old, .ab/old): the smat tests under Dawn, smat_probe's f16 4096^3 and the 1B-shaped
  # Q4_K_M prefill, old and new alternating; Tint's SPIR-V clamps of the new qmatmul_smat
  old_wheel; mkdir -p $OUT/p
  (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
    > /dev/null 2>> $OUT/p/err.txt)
  dawn -- pytest tests/backend/test_smat.py -q -x > $OUT/p/tests.txt 2>&1; tail -2 $OUT/p/tests.txt
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  P="bench/probes/llm_1b_profile_probe.py --top 4 --sizes= --model $LLAMA_1B"
  Q="bench/probes/smat_probe.py --n 4096 --sgid builtin"
  for r in 1 2; do
    for v in new old; do
      R=dawn; [ $v = old ] && R=old
      $R $T -- python $P >> $OUT/p/prefill-$v.json 2>> $OUT/p/err.txt
      $R $T -- python $Q >> $OUT/p/smat-$v.json 2>> $OUT/p/err.txt
    done
  done
  for v in new old; do
    python3 -c "import json, sys; [print(sys.argv[2], d['prefill']['wall_ms'], d['prefill']['gpu_ms'], \
d['prefill']['kernels']) for d in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith('{')))]" \
      $OUT/p/prefill-$v.json $v
    python3 -c "import json, sys; [print(sys.argv[2], [(v['shape'][12:], round(v.get('ms_4096', 0), 3), \
round(v.get('ms_2048', 0), 3)) for v in d['variants']]) for d in map(json.loads, (l for l in \
open(sys.argv[1]) if l.startswith('{')))]" $OUT/p/smat-$v.json $v
  done
  grep -v "^{" $OUT/p/err.txt | grep -iv "^ \|warn\|llama_\|^\[" | tail -4
  (cd $OUT && tar czf putab.tgz p && rm -rf p)
  ;;
confirm)
  # issue 31's prefill beside llama.cpp in one call (the 1B-shaped Q4_K_M under Dawn with the
  # subgroup-matrix kernels, llama.cpp Vulkan, alternating, each after WARM_S); the f16 smat
  # matmul with robustness off (its headroom) and Tint's SPIR-V of it; the SmolLM2-shaped Q4_1
  # prefill 128 and decode both ways (carry .big/llvk.so.xz)
  mkdir -p $OUT/c/tint
  for shape in 1b:Q4_K_M smollm2:Q4_1; do
    IFS=: read sh ty <<< "$shape"
    (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
      --shape $sh --type $ty > /dev/null 2>> $OUT/c/err.txt)
  done
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  P="bench/probes/llm_1b_profile_probe.py --top 6 --sizes="
  B=/tmp/llm_1b/llama-1b.Q4_K_M.gguf
  M=/tmp/llm_1b/llama-smollm2.Q4_1.gguf
  for r in 1 2 3; do
    dawn $T -- python $P --model $B >> $OUT/c/prefill-1b-dawn.json 2>> $OUT/c/err.txt
    (cd $S && python3 bench/peer_llamacpp.py --so $LL --model $B --prefill 512 \
      >> $OUT/c/prefill-1b-llamacpp.json \
      2>> $OUT/c/llamacpp.err)
  done
  dawn $T -- python $P --model $M --prefill 128 --decode 128 > $OUT/c/smollm2-dawn.json \
    2>> $OUT/c/err.txt
  (cd $S && python3 $P --model $M --prefill 128 --decode 128 > $OUT/c/smollm2-native.json \
    2>> $OUT/c/err.txt)
  dawnt ",disable_robustness" -- python bench/probes/smat_probe.py --n 4096 --sgid builtin \
    > $OUT/c/smat-norobust.json 2>> $OUT/c/err.txt
  dawn_module /tmp/dawnpkg.mjs
  (cd $S && python3 -c "from webrlx.kernels import kernel; from webrlx.compiler import smat; \
sh = next(s for s in smat.SHAPES if s.name == 'matmul_smat_128x256_s2x4_k16'); \
print(kernel('matmul/matmul_smat', T='f16', **smat.slots(sh, True)).source)" > $OUT/c/tint/smat.wgsl)
  for tg in "" ",disable_robustness"; do
    $D/node $S/tools/tint_spirv.mjs $OUT/c/tint/smat.wgsl --dawn /tmp/dawnpkg.mjs \
      --features shader-f16,subgroups,chromium-experimental-subgroup-matrix \
      --toggles "vulkan_enable_f16_on_nvidia$tg" > $OUT/c/tint/smat${tg#,}.spvasm \
      2>> $OUT/c/tint/err.txt
  done
  wc -l $OUT/c/tint/*
  python3 -c "import json, sys; [print('dawn', d['prefill']['wall_ms'], d['prefill']['gpu_ms']) \
for d in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith('{')))]" $OUT/c/prefill-1b-dawn.json
  python3 -c "import json, sys; [print('llama.cpp', d['prefill_ms']) \
for d in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith('{')))]" $OUT/c/prefill-1b-llamacpp.json
  for f in smollm2-dawn smollm2-native; do python3 -c "import json, sys; \
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); p = d['prefill']; \
print(sys.argv[2], p['wall_ms'], p['gpu_ms'], p['kernels'], d.get('decode'))" $OUT/c/$f.json $f; done
  python3 -c "import json, sys; d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); \
[print('norobust', v['shape'][12:], round(v.get('ms_4096', 0), 3), round(v.get('ms_2048', 0), 3)) for v in d['variants']]" \
    $OUT/c/smat-norobust.json
  grep -v "^{" $OUT/c/err.txt | grep -iv "^ \|warn\|llama_\|^\[" | tail -4
  (cd $OUT && tar czf confirm.tgz c && rm -rf c)
  ;;
tune1b)
  # the autotuner's picks for the 1B-shaped Q4_K_M under Dawn (prompts 16-512, decode, an
  # 8-sequence batch; timestamps unquantized), for the shipped table's nvidia family
  llama_1b $OUT/err.txt
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  dawn $T -- python tools/make_tune_tables.py --here --models gguf \
    --gguf $LLAMA_1B --prompts ${PROMPTS:-16,48,128,512} \
    > $OUT/tune-1b-nvidia.json 2> $OUT/tune.err
  tail -3 $OUT/tune.err; python3 -c "import json, sys; d = json.loads(open(sys.argv[1]).read(\
).strip().splitlines()[-1]); print(d['adapter'], len(d['table']))" $OUT/tune-1b-nvidia.json
  ;;
picksab)
  # decode and prefill of the 1B-shaped Q4_K_M under Dawn without and with a tune run's picks
  # (PICKS, a file of the working tree: tune1b's JSON), natively beside, each after WARM_S
  llama_1b $OUT/err.txt
  cp $PICKS /tmp/llm_1b/picks.json
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  P="bench/probes/llm_1b_profile_probe.py --top 6 --sizes=1,8 --decode 128 --model $LLAMA_1B"
  for r in 1 2; do
    dawn $T -- python $P >> $OUT/dawn-default.json 2>> $OUT/err.txt
    dawn $T -- python $P --picks /tmp/llm_1b/picks.json >> $OUT/dawn-picks.json 2>> $OUT/err.txt
  done
  (cd $S && python3 $P >> $OUT/native.json 2>> $OUT/err.txt)
  for f in dawn-default dawn-picks native; do python3 -c "import json, sys; [print(sys.argv[2], \
d['prefill']['wall_ms'], d['prefill']['gpu_ms'], d.get('decode', {}).get('tok_s'), \
[(e['sequences'], e['step_wall_ms'], e['gpu_ms']) for e in d.get('engine', [])]) \
for d in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith('{')))]" $OUT/$f.json $f; done
  grep -v "^{" $OUT/err.txt | grep -iv "^ \|warn\|llama_\|^\[" | tail -4
  ;;
batch8)
  # the 1B-shaped Q4_K_M's 8-sequence Engine step under Dawn with the fused tensor-core
  # projections as candidates (quant/qmatmul_smat_fused, _qkv: 2026-11-28, after the shipped
  # 1B picks): a tune run of its shapes (prompt 16, decode, the 8-sequence batch), then the
  # steps with the shipped table and with the run's picks, natively beside, each after WARM_S
  llama_1b $OUT/err.txt
  if [ -n "${PICKS:-}" ]; then cp $PICKS /tmp/llm_1b/picks.json      # (a tune run's, carried)
  else
    timeout ${TUNE_LIMIT:-240} bash -c "$(declare -f dawn); dawn --dawn-flag $DF \
--dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b -- python \
tools/make_tune_tables.py --here --models gguf --gguf $LLAMA_1B \
--prompts ${PROMPTS:-16}" > $OUT/tune-1b-batch8.json 2> $OUT/tune.err
    tail -c 300 $OUT/tune.err; tail -1 $OUT/tune-1b-batch8.json > /tmp/llm_1b/picks.json
  fi
  # (a 512-token prefill: the context leaves the steps of WARM_S room, see engine_step)
  P="bench/probes/llm_1b_profile_probe.py --top 8 --sizes=1,8 --prefill 512 --model $LLAMA_1B"
  for v in shipped picks; do
    A=""; [ $v = picks ] && A="--picks /tmp/llm_1b/picks.json"
    timeout 150 bash -c "$(declare -f dawn); dawn --dawn-flag $DF \
--dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b -- python $P $A" \
      >> $OUT/dawn-$v.json 2>> $OUT/err.txt
  done
  (cd $S && timeout 120 python3 $P >> $OUT/native.json 2>> $OUT/err.txt)
  for f in dawn-shipped dawn-picks native; do engine_summary $f $OUT/$f.json; done
  grep -v "^{" $OUT/err.txt | grep -iv "^ \|warn\|llama_\|^\[" | tail -4
  ;;
pattn)
  # cached_attention of a SmolLM2 prefill alone (S 128 and 512, 9/3 heads, D 64) under each
  # key-chunk target (lower_decoder.WORKGROUP_TARGET; 1: one pass, no attn_combine), natively
  # and under Dawn (bench/probes/prefill_attention_probe.py)
  (cd $S && timeout 100 python3 bench/probes/prefill_attention_probe.py ${PS:-128 512} \
    > $OUT/pattn-native.json 2> $OUT/pattn-native.err)
  dawn_limit 150 python bench/probes/prefill_attention_probe.py ${PS:-128 512} \
    > $OUT/pattn-dawn.json 2> $OUT/pattn-dawn.err
  for f in native dawn; do python3 -c "import json, sys; [print(sys.argv[2], r['S'], r['kernel'], \
r['wg_target'], r['pad'], r['gpu_us'], r['kernels']) for r in json.load(open(sys.argv[1]))['cases']]" \
    $OUT/pattn-$f.json $f || tail -c 600 $OUT/pattn-$f.err; done
  ;;
rptab)
  # the batched-decode GEMVs with 2 weight rows a thread over row quads (lower_quant.GEMV_RPT_RQ)
  # natively (the autotuner times every variant), off / on alternating: the 1B-shaped
  # Q4_K_M's Engine steps at 1 and 8 sequences, each after WARM_S
  llama_1b $OUT/err.txt
  P="bench/probes/llm_1b_profile_probe.py --top 8 --sizes=1,8 --prefill 512 --model $LLAMA_1B"
  for r in ${ROUNDS:-1 2}; do for v in off on; do
    (cd $S && timeout 150 python3 $P --rpt-rq $v >> $OUT/native-rptrq-$v.json 2>> $OUT/err.txt)
  done; done
  if [ "${SMOL:-1}" = 1 ]; then    # the same for the SmolLM2-shaped Q4_1 file
    smollm2_q41 $OUT/err.txt
    for v in off on; do (cd $S && timeout 100 python3 bench/probes/llm_1b_profile_probe.py \
      --top 8 --sizes=1,8 --prefill 128 --model $SMOLLM2_Q41 --rpt-rq $v \
      >> $OUT/smol-native-rptrq-$v.json 2>> $OUT/err.txt); done
  fi
  for v in off on; do engine_summary $v $OUT/native-rptrq-$v.json 6; done
  for v in off on; do engine_summary "smol $v" $OUT/smol-native-rptrq-$v.json 4 2> /dev/null; done
  grep -v "^{" $OUT/err.txt | grep -iv "^ \|warn\|llama_\|^\[" | tail -4
  ;;
forms)
  # the subgroup-matrix loads and stores in Tint's current forms (layout a template argument;
  # the bool forms are deprecated): the smat tests and the 2-rows-a-thread GEMV tests under
  # Dawn, Dawn's deprecation warnings counted, then the SmolLM2-shaped Q4_1 prefill and decode
  O=$D/out-forms && mkdir -p $O
  dawn_limit ${TEST_LIMIT:-260} pytest -q tests/backend/test_smat.py tests/backend/test_quant.py \
    -k "smat or two_weight_rows or x2q" > $O/tests-dawn.txt 2>&1
  grep -E "^dawn: |passed|failed|^FAILED|^E " $O/tests-dawn.txt | cut -c 1-300 | tail -8
  echo "deprecation warnings: $(grep -c 'deprecated' $O/tests-dawn.txt)"
  smollm2_q41 $O/err.txt
  prefill_dawn $O/smollm2-dawn.json; prefill_native $O/smollm2-native.json
  prefill_summary $O/smollm2-*.json
  echo "prefill deprecation warnings: $(cat $O/*.err 2> /dev/null | grep -c deprecated)"
  tar czf $OUT/forms.tgz -C $O .
  ;;
mlpair)
  # MiniLM f32 warm 1x128 / 32x128 natively and under Dawn, $ROUNDS rounds interleaved, random
  # weights of its shapes (carry .dawn/ml_small.tar.xz): issue 32's Dawn / native <= 1.25x
  O=$D/out-mlpair && mkdir -p $O && minilm_random $O/err.txt
  for r in ${ROUNDS:-1 2 3}; do
    (cd $S && timeout 90 python3 bench/engines.py --only minilm > $O/native-$r.json 2>> $O/err.txt)
    timeout 120 bash -c "$(declare -f dawn); dawn -- python bench/engines.py --only minilm" \
      > $O/dawn-$r.json 2>> $O/err.txt
    (cd $S && python3 bench/engines.py --compare $O/native-$r.json $O/dawn-$r.json \
      > $O/compare-$r.json) && python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
print(sys.argv[2], d['native']['minilm']['warm_ms'], d['dawn']['minilm']['warm_ms'], \
d['minilm'])" $O/compare-$r.json $r
  done
  tail -3 $O/err.txt; tar czf $OUT/mlpair.tgz -C $O .
  ;;
mltune)
  # issue 32's MiniLM Dawn / native <= 1.25x: under Dawn the f32 shapes ran the compiler's
  # defaults (no nvidia picks below 8x128), natively the autotuner's own picks
  O=$D/out-mltune && mkdir -p $O && minilm_random $O/err.txt
  if [ ! -s $O/tune.json ]; then
    timeout 400 bash -c "$(declare -f dawn); dawn \
      --dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia \
      --dawn-flag disable-dawn-features=timestamp_quantization \
      -- python tools/make_tune_tables.py --here --models ${TUNE_MODELS:-minilm,minilm16} \
      --minilm-shapes ${TUNE_SHAPES:-1x16,1x32,1x128,2x48,3x16,4x32,8x128,32x128}" \
      > $O/tune.json 2>> $O/err.txt
    python3 -c "import json, sys; t = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); \
print(t['adapter'], len(t['table']), 'picks')" $O/tune.json || tail -5 $O/err.txt
    cp $O/tune.json $D/models/minilm/tune-minilm.json     # the folder Dawn's Python sees
  fi
  for r in ${ROUNDS:-1 2}; do
    (cd $S && timeout 90 python3 bench/engines.py --only minilm > $O/native-$r.json 2>> $O/err.txt)
    timeout 120 bash -c "$(declare -f dawn); dawn -- python bench/engines.py --only minilm" \
      > $O/dawn-$r.json 2>> $O/err.txt
    timeout 120 bash -c "$(declare -f dawn); dawn -- python bench/engines.py --only minilm \
      --tune /home/pyodide/models/minilm/tune-minilm.json" > $O/tuned-$r.json 2>> $O/err.txt
    python3 -c "import json, sys; w = lambda f: json.loads(open(f).read().strip().splitlines()[-1])['minilm']['warm_ms']; \
n, d, t = (w(f) for f in sys.argv[2:]); print(sys.argv[1], 'native', n, 'dawn', d, 'tuned', t, \
{k: (round(d[k] / n[k], 3), round(t[k] / n[k], 3)) for k in n})" $r $O/native-$r.json $O/dawn-$r.json \
      $O/tuned-$r.json || tail -3 $O/err.txt
  done
  tail -3 $O/err.txt; tar czf $OUT/mltune.tgz -C $O .
  ;;
mlhost)
  O=$D/out-mlhost && mkdir -p $O && minilm_random $O/err.txt
  for r in ${ROUNDS:-1 2}; do
    (cd $S && timeout 120 python3 bench/probes/minilm_submit_probe.py ${PROBE_ARGS:-} \
      > $O/native-$r.json 2>> $O/err.txt)
    timeout 150 bash -c "$(declare -f dawn); dawn \
      --dawn-flag disable-dawn-features=timestamp_quantization \
      -- python bench/probes/minilm_submit_probe.py ${PROBE_ARGS:-}" > $O/dawn-$r.json 2>> $O/err.txt
    for f in native dawn; do python3 -c "import json, sys; \
ds = [json.loads(x) for x in open(sys.argv[1]).read().strip().splitlines() if x.startswith('{')]; \
[print(sys.argv[2], d.get('sum_in_norm', ''), d['dispatches'], d['median'], \
[r['run_ms'] for r in d['rounds']]) for d in ds]" $O/$f-$r.json $f-$r || tail -3 $O/err.txt; done
  done
  tar czf $OUT/mlhost.tgz -C $O .
  ;;
attnq)
  dawn --dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia \
    --json $OUT/dawn-attention-tests.json -- pytest tests/backend/test_nn.py \
    tests/backend/test_smat.py -k "attention or smat" > $OUT/dawn-attention-tests.txt 2>&1
  grep -E "passed|failed" $OUT/dawn-attention-tests.txt | tail -2
  bash $0 mlhost; bash $0 mlpair
  ;;
smatdiag)
  # what limits matmul_smat: the best shape at 4096^3 as it is, without its tile copies and
  # without its products (bench/probes/smat_probe.py --diag), torch f16 beside it
  (cd $S && python3 bench/probes/torch_f16_matmul.py > $OUT/torch-f16-matmul.json)
  dawn -- python bench/probes/smat_probe.py --n 4096 --sgid builtin --only-extra --shapes \
    2,4,4,4,16 --diag matmul_smat_128x256_s2x4_k16 > $OUT/smat-diag.json 2> $OUT/smat-diag.err
  cat $OUT/torch-f16-matmul.json; grep -E '"diag"|"shape"' $OUT/smat-diag.err | cut -c1-300
  ;;
smatpf)
  # matmul_smat with its tiles' loads two steps ahead (pf2 then, the default now) against one
  # (_pf1, the form before; run 2026-11-28 with SHAPES 2,4,4,4,16 2,4,4,4,16,0,0,1 ...: pf2 last),
  # whole and without products / copies, torch f16 beside; then the smat and matmul tests
  # under Dawn (the K loop's code is generated anew for both forms)
  (cd $S && python3 bench/probes/torch_f16_matmul.py > $OUT/torch-f16-matmul.json)
  dawn -- python bench/probes/smat_probe.py --n 4096 --sgid builtin --only-extra --shapes \
    ${SMAT_SHAPES:-2,4,4,4,16,1 2,4,4,4,16 2,4,4,2,32,1 2,4,4,2,32 2,2,4,4,32} \
    --diag matmul_smat_128x256_s2x4_k16_pf1 matmul_smat_128x256_s2x4_k16 \
    > $OUT/smat-probe.json 2> $OUT/smat-probe.err
  cat $OUT/torch-f16-matmul.json; grep -E '"diag"|"shape"' $OUT/smat-probe.err | cut -c1-420
  dawn --dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia \
    -- pytest tests/backend/test_smat.py tests/backend/test_matmul.py -q \
    > $OUT/smat-tests.txt 2>&1
  tail -3 $OUT/smat-tests.txt
  ;;
smatab)
  # an A/B of an attention_smat change: the new wheel (setup) against the old in .ab/old,
  # alternating $ROUNDS rounds (bench's f16 attention and MiniLM f16 cases, --no-ref); the
  # attention_smat probe's cases and the attention tests under Dawn with the new wheel
  old_wheel; O=$D/out-smatab && mkdir -p $O && minilm_random $O/err.txt
  C="from webrlx.cli import bench; import json; bench.NO_REF = True; print(json.dumps( \
bench.attention_cases([512, 2048], 10, 5, 'float16') + \
bench.minilm_cases(10, 5, [(1, 128), (32, 128)], 'float16')))"
  for r in $(seq ${ROUNDS:-3}); do
    dawn --dawn-flag $DF -- python -c "$C" >> $O/new.jsonl 2>> $O/err.txt
    old --dawn-flag $DF -- python -c "$C" >> $O/old.jsonl 2>> $O/err.txt
  done
  for f in $O/new.jsonl $O/old.jsonl; do python3 -c "import json, sys; [print(sys.argv[1] \
.split('/')[-1], {c['case']: round(c.get('webrlx_ms', -1), 4) for c in json.loads(l)}) \
for l in open(sys.argv[1]) if l.startswith('[')]" $f; done
  dawn_limit 100 python bench/probes/attention_smat_probe.py > $O/probe-dawn.json 2>> $O/err.txt
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print({c: (x['kernels'], \
round(x['max_err'], 5), round(x['max_ref'], 3)) for c, x in d.items()})" $O/probe-dawn.json
  dawn_limit 200 pytest -q tests/backend/test_smat.py -k attention > $O/tests-dawn.txt 2>&1
  grep -E "passed|failed|^FAILED" $O/tests-dawn.txt | cut -c 1-300 | tail -4
  grep -i "error" $O/err.txt | tail -5; tar czf $OUT/smatab.tgz -C $O .
  ;;
sumread)
  (cd $S && timeout 200 python3 -m pytest -q tests/backend/test_matmul.py -p no:cacheprovider \
    -k "split_k" > $OUT/native-split-k-tests.txt 2>&1)
  tail -1 $OUT/native-split-k-tests.txt
  timeout 300 bash -c "$(declare -f dawn); dawn -- pytest tests/backend/test_matmul.py \
    -k 'split_k'" > $OUT/dawn-split-k-tests.txt 2>&1
  grep -E "passed|failed" $OUT/dawn-split-k-tests.txt | tail -2
  PROBE_ARGS="--sum-in-norm on,off ${PROBE_ARGS:-}" ROUNDS=1 bash $0 mlhost
  bash $0 mlpair
  ;;
pieces)
  O=$D/out-pieces && mkdir -p $O && minilm_random $O/err.txt && smollm2_q41 $O/err.txt
  timeout ${PIECES_LIMIT:-400} bash -c "$(declare -f dawn); dawn --dawn-flag $DF \
    --mount /tmp/llm_1b -- python bench/probes/pieced_submit_probe.py --model $SMOLLM2_Q41 \
    --firsts ${FIRSTS:-0,16,32} --rounds ${ROUNDS:-3} --decode ${DECODE:-0} ${PROBE_ARGS:-}" > $O/dawn.json 2>> $O/err.txt
  [ "${NATIVE:-0}" = 1 ] && (cd $S && timeout 300 python3 bench/probes/pieced_submit_probe.py \
    --model $SMOLLM2_Q41 --firsts ${FIRSTS:-0,16,32} --rounds ${ROUNDS:-3} --decode ${DECODE:-0} \
    > $O/native.json 2>> $O/err.txt)
  for f in $O/dawn.json $O/native.json; do [ -f $f ] && (tail -1 $f | python3 -c \
    "import json, sys; print(sys.argv[1], json.dumps(json.loads(sys.stdin.read())['median']))" $f \
    || tail -5 $O/err.txt); done
  tar czf $OUT/pieces.tgz -C $O .
  ;;
dqab)
  for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$HOME/site" \
    .whl/*.whl
  mkdir -p $S && tar cf - --exclude=./.dawn --exclude=./.gl --exclude=./.whl --exclude=./.big \
    --exclude=./.ab --exclude=./.chr . | tar xf - -C $S
  xz -dc .big/llvk.so.xz > $LL
  llama_1b $OUT/err.txt
  for r in $(seq ${ROUNDS:-2}); do for m in off on; do
    (cd $S && timeout 150 python3 bench/probes/llm_1b_profile_probe.py --model $LLAMA_1B \
      --sizes= --prefill 512 --top 12 --dequant-first $m >> $OUT/dq-prefill-$m.json \
      2>> $OUT/err.txt)
  done; done
  for m in off on; do prefill_summary $OUT/dq-prefill-$m.json; done
  (cd $S && timeout ${LLM_LIMIT:-240} python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b \
    --sizes ${LLM_SIZES:-1} > $OUT/llm-1b.json 2>> $OUT/err.txt)
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print({k: d.get(k) for k in \
('decode_vs_llamacpp', 'prefill_llamacpp_over_webrlx')}, d['webrlx'].get('prefill_ms'), \
d['llamacpp'])" $OUT/llm-1b.json || tail -5 $OUT/err.txt
  ;;
dqrows)
  case " ${MODELS:-1b} " in *smollm2*) smollm2_q41 $OUT/err.txt;; esac
  for m in ${MODELS:-1b}; do
    model=$([ $m = 1b ] && echo $LLAMA_1B || echo $SMOLLM2_Q41)
    for n in ${PREFILLS:-16 32 64 128 256}; do for r in $(seq ${ROUNDS:-2}); do for d in on off; do
      (cd $S && timeout 150 python3 bench/probes/llm_1b_profile_probe.py --model $model \
        --sizes= --prefill $n --top 8 --dequant-first $d \
        >> $OUT/dqrows-$m-$(printf %03d $n)-$d.json 2>> $OUT/err.txt)
    done; done; done
  done
  prefill_summary $OUT/dqrows-*.json
  ;;
batchratio)
  # issue 31's batched figure natively: bench/llm_batch.py on the 1B-shaped Q4_K_M (Engine at 1
  # and 8 sequences, sizes interleaved, after WARM_S), with the default GEMV variants
  llama_1b $OUT/err.txt
  (cd $S && timeout ${BATCH_LIMIT:-150} python3 bench/llm_batch.py \
    --model $LLAMA_1B --sizes 1,8 --new ${NEW:-32} \
    > $OUT/llm-batch-1b.json 2>> $OUT/err.txt)
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(json.dumps(d)[:1500])" \
    $OUT/llm-batch-1b.json || tail -5 $OUT/err.txt
  ;;
splitab)
  # the quantized smat matmul over K pieces where its tiles are few (lower_quant.qsmat_pieces)
  # against none and 2 pieces: the smat tests under Dawn, then the 1B-shaped Q4_K_M 512-token
  # prefill under Dawn beside llama.cpp, alternating, each after WARM_S
  llama_1b $OUT/err.txt
  dawn -- pytest tests/backend/test_smat.py -q > $OUT/tests.txt 2>&1; tail -2 $OUT/tests.txt
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  B=/tmp/llm_1b/llama-1b.Q4_K_M.gguf
  P="bench/probes/llm_1b_profile_probe.py --top 8 --sizes= --model $B"
  for r in 1 2; do
    for q in rule 1 2; do
      X=$([ $q = rule ] || echo "--qsplit $q")
      dawn $T -- python $P $X >> $OUT/prefill-$q.json 2>> $OUT/err.txt
    done
    (cd $S && python3 bench/peer_llamacpp.py --so $LL --model $B --prefill 512 \
      >> $OUT/prefill-llamacpp.json \
      2>> $OUT/llamacpp.err)
  done
  for q in rule 1 2; do python3 -c "import json, sys; [print(sys.argv[2], d['prefill']['wall_ms'], \
d['prefill']['gpu_ms'], d['prefill']['kernels']) for d in map(json.loads, (l for l in \
open(sys.argv[1]) if l.startswith('{')))]" $OUT/prefill-$q.json $q; done
  python3 -c "import json, sys; [print('llama.cpp', d['prefill_ms']) for d in map(json.loads, \
(l for l in open(sys.argv[1]) if l.startswith('{')))]" $OUT/prefill-llamacpp.json
  grep -v "^{" $OUT/err.txt | grep -iv "^ \|warn\|llama_\|^\[\|^:\|subgroupMatrix\|\^" | tail -4
  ;;
benchpair)
  # `python -m webrlx bench` natively (torch CUDA as the peer) and under Dawn (--no-ref: numpy
  # in Pyodide is no peer), family by family, each case after WARM_S
  for only in ${BENCH_ONLY:-attention f16}; do
    (cd $S && timeout ${NATIVE_LIMIT:-90} python3 -m webrlx bench --only $only \
      > $OUT/bench-native-$only.json 2>> $OUT/err.txt)
    dawn_limit ${BENCH_LIMIT:-120} bench --no-ref --only $only > $OUT/bench-dawn-$only.json 2>> $OUT/err.txt
  done
  for f in $OUT/bench-*.json; do python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
[print(sys.argv[1].split('/')[-1], c.get('case'), c.get('dtype'), round(c['webrlx_ms'], 4), \
c.get('ref_ms') and round(c['ref_ms'], 4)) for c in d['cases']]" $f || echo "$f: no JSON"; done
  grep "^\[bench" $OUT/err.txt | tail -3
  ;;
mmq)
  # the int8 prefill (quant/qmatmul_mmq.wgsl, opt-in smat.INT8): its tests and test_smat.py
  # under Dawn; the 1B-shaped Q4_K_M file's 512-token prefill under Dawn with the f16
  # tensor-core kernels and with int8 (groups of each of $MMQ_GROUPS), ROUNDS times
  # alternating, the last logits of each saved for the accuracy; llama.cpp Vulkan on the file
  # (MMQ_TESTS=0: not the tests; MMQ_BENCH=0: only them)
  [ "${MMQ_TESTS:-1}" = 1 ] && { dawn --json $OUT/dawn-mmq-tests.json -- pytest \
    tests/backend/test_mmq.py ${MMQ_MORE_TESTS:-} -q > $OUT/dawn-mmq-tests.txt 2>&1;
    tail -25 $OUT/dawn-mmq-tests.txt | cut -c 1-400; }
  [ "${MMQ_BENCH:-1}" = 1 ] || exit 0
  (cd $S && python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b --make-only \
    --shape ${LLM_SHAPE:-1b} --type ${LLM_TYPE:-Q4_K_M} 2>/dev/null | tail -2)
  M=/tmp/llm_1b/llama-${LLM_SHAPE:-1b}.${LLM_TYPE:-Q4_K_M}.gguf
  P="bench/probes/llm_1b_profile_probe.py --model $M --sizes= --top ${TOP:-6} --prefill ${PREFILL:-512}"
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  for r in $(seq ${ROUNDS:-2}); do
    dawn $T -- python $P --logits-out /tmp/llm_1b/logits-f16.npy > $OUT/mmq-f16-$r.json \
      2>> $OUT/mmq.err
    for g in ${MMQ_GROUPS:-256}; do
      dawn $T -- python $P --int8 on --mmq-group $g --logits-out /tmp/llm_1b/logits-g$g.npy \
        > $OUT/mmq-int8-g$g-$r.json 2>> $OUT/mmq.err
    done
  done
  (cd $S && python3 bench/probes/llm_1b_profile_probe.py --model $M --sizes= --top 2 \
    --prefill ${PREFILL:-512} --logits-out /tmp/llm_1b/logits-native.npy \
    > $OUT/mmq-native.json 2>> $OUT/mmq.err)
  (cd $S && python3 bench/peer_llamacpp.py --so $LL --model $M --prefill ${PREFILL:-512} \
    > $OUT/mmq-llamacpp.json 2>> $OUT/mmq.err)
  (cd $OUT && tar czf mmq.tgz mmq-*.json mmq.err logits-*.npy 2>/dev/null; \
    cp /tmp/llm_1b/logits-*.npy . 2>/dev/null; tar czf mmq.tgz mmq-*.json mmq.err logits-*.npy; \
    rm -f logits-*.npy)
  for f in $OUT/mmq-*.json; do echo "== $f"; python3 -c "import json, sys; \
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); p = d.get('prefill', d); \
print({k: p[k] for k in ('wall_ms', 'gpu_ms', 'prefill_ms', 'ms') if k in p}, \
d.get('int8'), d.get('mmq_group'), d.get('int8_available'))" $f || tail -3 $OUT/mmq.err; done
  python3 -c "import numpy as np, glob; n = np.load('/tmp/llm_1b/logits-native.npy'); \
[print(f, float(np.abs(np.load(f) - n).max() / np.abs(n).max()), \
 int(np.load(f).argmax()), int(n.argmax())) \
 for f in sorted(glob.glob('/tmp/llm_1b/logits-*.npy'))]"
  ;;
i8batch)
  # the opt-in int8 decode GEMVs (compiler/int8_decode.py) on the 1B-shaped Q4_K_M file,
  # natively: one Engine step at 1 and 8 sequences by kernel (llm_1b_profile_probe), then
  # bench/llm_batch.py at 1 and 8 sequences, --int8-decode off / on alternating ($ROUNDS), and
  # the int8 decode tests
  llama_1b $OUT/err.txt
  for mode in off on; do
    (cd $S && timeout 150 python3 bench/probes/llm_1b_profile_probe.py --model $LLAMA_1B \
      --sizes 1,8 --prefill 16 --top 12 --int8-decode $mode > $OUT/step-i8$mode.json \
      2>> $OUT/err.txt)
    engine_summary "int8-decode $mode" $OUT/step-i8$mode.json 12
  done
  [ "${SMOL:-0}" = 1 ] && smollm2_q41 $OUT/err.txt
  for r in $(seq ${ROUNDS:-1}); do for f in 1b $([ "${SMOL:-0}" = 1 ] && echo smollm2); do
  for mode in off on; do
    local_model=$LLAMA_1B; [ $f = smollm2 ] && local_model=$SMOLLM2_Q41
    (cd $S && timeout ${BATCH_LIMIT:-150} python3 bench/llm_batch.py --model $local_model \
      --sizes 1,8 --new ${NEW:-32} --int8-decode $mode > $OUT/llm-batch-$f-i8$mode-$r.json \
      2>> $OUT/err.txt)
    python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(sys.argv[1].split('/')[-1], \
[(r['sequences'], r['tok_per_s'], r['ratio_vs_1']) for r in d['rows']], \
d['lm_generate']['tok_per_s'], d['most_over_lm_generate'])" $OUT/llm-batch-$f-i8$mode-$r.json \
      || tail -3 $OUT/err.txt
  done; done; done
  (cd $S && timeout 120 python3 -m pytest -q -p no:warnings tests/backend/test_int8_decode.py \
    2>&1 | tail -2)
  ;;
i8pre)
  # the opt-in int8 prefill without tensor cores (compiler/int8_prefill.py) natively on the
  # 1B-shaped Q4_K_M file: its prefill (${PREFILL:-512} tokens) off / on alternating
  # ($ROUNDS), the last logits' distance from the f32 run's, llama.cpp Vulkan's prefill of the
  # same file, then the int8 prefill tests
  llama_1b $OUT/err.txt
  P="bench/probes/llm_1b_profile_probe.py --model $LLAMA_1B --sizes= --top ${TOP:-8}"
  P="$P --prefill ${PREFILL:-512}"
  for r in $(seq ${ROUNDS:-2}); do for mode in off on; do
    (cd $S && timeout 200 python3 $P --int8-prefill $mode \
      --logits-out /tmp/llm_1b/logits-i8pre-$mode.npy > $OUT/i8pre-$mode-$r.json 2>> $OUT/err.txt)
    python3 -c "import json, sys; d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); \
p = d['prefill']; print(sys.argv[1].split('/')[-1], p['wall_ms'], p['gpu_ms'], p['greedy_tokens'], \
list(p.get('kernels', {}).items())[:8])" $OUT/i8pre-$mode-$r.json || tail -3 $OUT/err.txt
  done
  (cd $S && python3 bench/peer_llamacpp.py --so $LL --model $LLAMA_1B --prefill ${PREFILL:-512} \
    > $OUT/i8pre-llamacpp-$r.json 2>> $OUT/err.txt); cat $OUT/i8pre-llamacpp-$r.json | cut -c 1-600
  done
  python3 -c "import numpy as np; n = np.load('/tmp/llm_1b/logits-i8pre-off.npy'); \
i = np.load('/tmp/llm_1b/logits-i8pre-on.npy'); \
print('int8 vs f32 logits', float(np.abs(i - n).max() / np.abs(n).max()), int(i.argmax()), int(n.argmax()))"
  (cd $S && timeout 120 python3 -m pytest -q -p no:warnings tests/backend/test_int8_prefill.py \
    2>&1 | tail -2)
  ;;
llm1b)
  # issue 31's 1B JSON: bench/llm_1b.py beside llama.cpp Vulkan on the 1B-shaped Q4_K_M file
  # (decode, 512-token prefill, Engine at 1 and 8 sequences, memory), $LLM_FLAGS (--int8: the
  # opt-in int8 prefill and batched decode)
  llama_1b $OUT/err.txt
  (cd $S && timeout ${LLM_LIMIT:-300} python3 bench/llm_1b.py --llamacpp $LL --work /tmp/llm_1b \
    --sizes 1,8 ${LLM_FLAGS:-} > $OUT/llm-1b.json 2>> $OUT/err.txt)
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print({k: d.get(k) for k in \
('int8', 'decode_vs_llamacpp', 'prefill_llamacpp_over_webrlx', 'greedy_tokens_equal_to_llamacpp')}, \
d['webrlx'].get('prefill_ms'), d['webrlx'].get('decode_tok_s'), d['webrlx'].get('batched'), \
d['llamacpp'])" $OUT/llm-1b.json || tail -5 $OUT/err.txt
  ;;
families)
  # the family x type fixtures against transformers' kept answers (no torch there), natively
  mkdir -p /tmp/fx
  for d in build/llm_fixtures build/fx*; do [ -d $d ] && cp $d/* /tmp/fx/; done
  [ "${FX:-run}" = keep ] && { ls /tmp/fx | wc -l; exit 0; }
  mkdir -p $S/build/llm_fixtures && cp /tmp/fx/* $S/build/llm_fixtures/
  (cd $S && WEBRLX_LLM_KEPT=1 WEBRLX_LLM_TYPES=${LLM_TYPES:-} timeout ${FAM_LIMIT:-540} python3 -m pytest \
    tests/backend/test_llm_families.py -o addopts= -q -rfEs -p no:cacheprovider \
    --junitxml=$OUT/families.xml > $OUT/families.txt 2>&1)
  tail -4 $OUT/families.txt
  ;;
dawndec)
  # issue 32's "Dawn decode >= 0.8x native": the SmolLM2-shaped Q4_1 file's greedy decode
  # (256 new tokens, best of 3 after WARM_S) natively and under Dawn, $ROUNDS rounds alternating
  mkdir -p /tmp/llm_1b && smollm2_q41 $OUT/err.txt
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  P="bench/probes/llm_1b_profile_probe.py --model $SMOLLM2_Q41 --sizes= --top 2 --prefill 16"
  for r in $(seq ${ROUNDS:-2}); do
    (cd $S && timeout 120 python3 $P --decode 256 > $OUT/dawndec-native-$r.json 2>> $OUT/err.txt)
    dawn $T -- python $P --decode 256 > $OUT/dawndec-dawn-$r.json 2>> $OUT/err.txt
    for e in native dawn; do python3 -c "import json, sys; \
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); \
print(sys.argv[1].split('/')[-1], d['decode'], d['adapter'])" $OUT/dawndec-$e-$r.json \
      || tail -3 $OUT/err.txt; done
  done
  ;;
i8web)
  # the int8 prefill for a browser without subgroup matrices (Chrome's default): the 1B-shaped
  # Q4_K_M file's 512-token prefill under Dawn with the subgroup-matrix kernels off (--smat
  # off), int8_prefill off / on ($ROUNDS); first test_mmq.py under Dawn with them on (qrows_i8
  # shares common/rows_i8_unit.wgsl with qw8)
  T="--dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia
     --dawn-flag disable-dawn-features=timestamp_quantization --mount /tmp/llm_1b"
  mkdir -p /tmp/llm_1b
  dawn $T -- pytest -q -p no:warnings tests/backend/test_mmq.py > $OUT/i8web-mmq.txt 2>&1
  grep -E "^dawn: |passed|failed" $OUT/i8web-mmq.txt | tail -2
  [ "${I8WEB_BENCH:-1}" = 1 ] || exit 0
  llama_1b $OUT/err.txt
  P="bench/probes/llm_1b_profile_probe.py --model $LLAMA_1B --sizes= --top 6 --prefill 512"
  for r in $(seq ${ROUNDS:-1}); do for mode in off on; do
    dawn $T -- python $P --smat off --int8-prefill $mode > $OUT/i8web-$mode-$r.json 2>> $OUT/err.txt
    python3 -c "import json, sys; d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); \
p = d['prefill']; print(sys.argv[1].split('/')[-1], p['wall_ms'], p['gpu_ms'], p['greedy_tokens'], \
list(p.get('kernels', {}).items())[:6])" $OUT/i8web-$mode-$r.json || tail -3 $OUT/err.txt
  done; done
  ;;
i8dawn)
  # the int8 decode and prefill tests under Dawn (Tint's dot4I8Packed on the GPU)
  dawn -- pytest -q -p no:warnings tests/backend/test_int8_decode.py \
    tests/backend/test_int8_prefill.py > $OUT/i8dawn.txt 2>&1
  grep -E "^dawn: |passed|failed|Error" $OUT/i8dawn.txt | tail -5
  ;;
i8var)
  # every variant of the int8 decode GEMVs (int8_decode.GEMV_VARIANTS: threads a weight row,
  # weight rows a thread, tree reduction) timed by the autotuner at 8 rows on the 1B shapes,
  # Q4_K_M's mix (bench/probes/qgemv_variants_probe.py q4_k q6_k q6_k --int8), natively
  (cd $S && python3 bench/probes/qgemv_variants_probe.py q4_k q6_k q6_k --int8 \
    > $OUT/variants-i8.json 2> $OUT/variants-i8.err)
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
[print(k, c['pick'], list(c['us'].items())[:12]) for k, c in d['m8']['calls'].items()]; \
print(d['m8']['gpu_ms'], d['m8']['by_kernel'])" $OUT/variants-i8.json \
    || tail -c 1500 $OUT/variants-i8.err
  ;;
i8probe)
  # int8 x for the 8-row decode GEMVs (bench/probes/qgemv_i8_staged_probe.py, natively: x
  # staged a workgroup as int8) beside production's f32 GEMV variants at 8 rows on the same
  # Q4_K shapes (bench/probes/qgemv_variants_probe.py q4_k q4_k q4_k)
  (cd $S && python3 bench/probes/qgemv_i8_staged_probe.py > $OUT/i8-staged.json \
    2> $OUT/i8-staged.err)
  (cd $S && python3 bench/probes/qgemv_variants_probe.py q4_k q4_k q4_k > $OUT/variants-q4k.json \
    2> $OUT/variants-q4k.err)
  grep " us$" $OUT/i8-staged.err; tail -c 600 $OUT/i8-staged.err
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
[print(m, k, c['pick'], list(c['us'].items())[:3]) for m in ('m1', 'm8') \
for k, c in d[m]['calls'].items()]; print(d['m8']['gpu_ms'], d['m8']['by_kernel'])" \
    $OUT/variants-q4k.json || tail -c 800 $OUT/variants-q4k.err
  ;;
qprobe)
  (cd $S && python3 bench/probes/qsmat_probe.py > $OUT/qsmat-native.json 2> $OUT/qsmat-native.err)
  dawn --dawn-flag enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia \
    --dawn-flag disable-dawn-features=timestamp_quantization \
    -- python bench/probes/qsmat_probe.py > $OUT/qsmat-dawn.json 2> $OUT/qsmat-dawn.err
  cat $OUT/qsmat-dawn.err | cut -c 1-1500
  ;;
engines)
  mkdir -p $D/models/minilm $D/models/smollm2
  cat $D/ml/ml.p* | tar xf - -C $D/models/minilm
  cat $D/g/gguf.part* > $D/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  (cd $S && python3 bench/engines.py --new 256 > $OUT/engines-native.json)
  dawn -- python bench/engines.py --new 256 > $OUT/engines-dawn.json
  dawn -- python -c "import runpy, sys; import webrlx.backends.js_webgpu as j; \
j.ONE_CALL_ENCODE = False; sys.argv = ['engines.py', '--new', '256']; \
runpy.run_path('bench/engines.py', run_name='__main__')" > $OUT/engines-dawn-per-call.json
  for d in dawn dawn-per-call; do
    (cd $S && python3 bench/engines.py --compare $OUT/engines-native.json \
      $OUT/engines-$d.json > $OUT/engines-native-vs-$d.json)
    python3 -c "import json, sys; d = json.load(open(sys.argv[1])); \
print(sys.argv[1], {k: v for k, v in d.items() if k not in ('native', 'dawn')})" \
      $OUT/engines-native-vs-$d.json
  done
  ;;
smat)
  (cd $S && python3 bench/probes/torch_f16_matmul.py > $OUT/torch-f16-matmul.json)
  dawn -- python bench/probes/smat_probe.py --n 4096 > $OUT/smat-probe.json 2> $OUT/smat-probe.err
  dawn -- pytest tests/backend/test_smat.py tests/backend/test_matmul.py -q -x \
    > $OUT/smat-tests.txt 2>&1
  cat $OUT/torch-f16-matmul.json; tail -c 3000 $OUT/smat-probe.err; tail -5 $OUT/smat-tests.txt
  ;;
ml16)
  minilm_random $OUT/err.txt
  for dt in float16 float32; do
    (cd $S && timeout 150 python3 bench/minilm.py --shapes 1x128,32x128 --dtype $dt --no-onnx \
      > $OUT/minilm-native-$dt.json 2>> $OUT/err.txt)
  done
  dawn_limit 200 python \
    tools/make_tune_tables.py --here --models minilm16 > $OUT/tune-nvidia-minilm16.json \
    2>> $OUT/err.txt
  cp $OUT/tune-nvidia-minilm16.json $D/models/minilm/
  for v in "float16 --tune /home/pyodide/models/minilm/tune-nvidia-minilm16.json" "float16" \
      "float32"; do
    set -- $v
    dawn_limit 120 python \
      bench/engines.py --only minilm --dtype $v > $OUT/engines-dawn-$1${2:+-tuned}.json \
      2>> $OUT/err.txt
  done
  for dt in float16 float32; do
    (cd $S && timeout 90 python3 bench/engines.py --only minilm --dtype $dt \
      > $OUT/engines-native-$dt.json 2>> $OUT/err.txt)
  done
  for f in $OUT/minilm-native-*.json; do python3 -c "import json, sys; d = json.load(open( \
sys.argv[1])); print(sys.argv[1].split('/')[-1], d['check'], [{k: round(v, 4) if \
isinstance(v, float) else v for k, v in c.items()} for c in d['cases']])" $f; done
  for f in $OUT/engines-*.json; do python3 -c "import json, sys; d = json.load(open( \
sys.argv[1])); print(sys.argv[1].split('/')[-1], d['minilm']['warm_ms'])" $f; done
  for pair in "native-float16 dawn-float16-tuned" "native-float32 dawn-float16-tuned" \
      "native-float32 native-float16"; do
    set -- $pair
    (cd $S && python3 bench/engines.py --compare $OUT/engines-$1.json $OUT/engines-$2.json \
      | python3 -c "import json, sys; d = json.load(sys.stdin); print('$1 vs $2', \
d.get('minilm'))")
  done
  dawn_limit 120 pytest -q \
    tests/backend/test_nn.py -k float16 > $OUT/test-nn-f16-dawn.txt 2>&1
  tail -3 $OUT/test-nn-f16-dawn.txt
  grep -v "^tune:" $OUT/err.txt | tail -5
  ;;
pair2)
  O=$D/out-pair2 && mkdir -p $O && minilm_random $O/err.txt
  T=/home/pyodide/models/minilm/tune-nvidia-minilm16.json
  dawn_limit 200 python \
    tools/make_tune_tables.py --here --models minilm16 > $O/tune-nvidia-minilm16.json \
    2>> $O/err.txt
  cp $O/tune-nvidia-minilm16.json $D/models/minilm/
  pairs=""
  for only in ${BENCH_ONLY:-f16 attention minilm}; do
    (cd $S && timeout ${NATIVE_LIMIT:-150} python3 -m webrlx bench --only $only \
      > $O/bench-native-$only.json 2>> $O/err.txt)
    dawn_limit ${BENCH_LIMIT:-150} bench --no-ref --only $only --tune $T > $O/bench-dawn-$only.json 2>> $O/err.txt
    pairs="$pairs $O/bench-native-$only.json $O/bench-dawn-$only.json"
  done
  (cd $S && python3 bench/bench_pair.py $pairs > $O/bench-pair.json)
  dawn_limit 120 pytest -q \
    tests/backend/test_nn.py -k float16 > $O/test-nn-f16-dawn.txt 2>&1
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); [print(r['case'], r['dtype'], \
round(r['native_ms'], 4), round(r['dawn_ms'], 4), r['torch_ms'] and round(r['torch_ms'], 4), \
round(r.get('torch_over_dawn', 0), 3)) for r in d['rows']]" $O/bench-pair.json
  tail -2 $O/test-nn-f16-dawn.txt; grep -i "error" $O/err.txt | tail -5
  cp $O/bench-pair.json $O/tune-nvidia-minilm16.json $OUT/
  tar czf $OUT/pair2.tgz -C $O .
  ;;
asmat)
  O=$D/out-asmat && mkdir -p $O && minilm_random $O/err.txt
  dawn_limit 100 python \
    bench/probes/attention_smat_probe.py > $O/probe-dawn.json 2>> $O/err.txt
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); [print(k, v['kernels'], \
round(v['max_err'], 5), round(v['max_ref'], 4)) for k, v in d.items()]" $O/probe-dawn.json
  dawn_limit 200 pytest -q \
    tests/backend/test_smat.py -k attention > $O/test-asmat-dawn.txt 2>&1
  grep -E "passed|failed|^FAILED" $O/test-asmat-dawn.txt | cut -c 1-300 | tail -8
  CASES="from webrlx.cli import bench; import json, sys; bench.NO_REF = sys.platform == 'emscripten'; \
print(json.dumps(bench.attention_cases([128, 512, 2048], 10, 5, 'float16') + \
bench.minilm_cases(10, 5, [(1, 128), (32, 128)], 'float16')))"
  dawn_limit 150 python -c "$CASES" > $O/cases-dawn.json 2>> $O/err.txt
  (cd $S && timeout 150 python3 -c "$CASES" > $O/cases-native.json 2>> $O/err.txt)
  for f in $O/cases-*.json; do python3 -c "import json, sys; [print(sys.argv[1].split('/')[-1], \
c['case'], c['dtype'], round(c['webrlx_ms'], 4), c.get('ref_ms') and round(c['ref_ms'], 4)) \
for c in json.load(open(sys.argv[1]))]" $f; done
  dawn_limit 120 pytest -q \
    tests/backend/test_nn.py -k float16 > $O/test-nn-f16-dawn.txt 2>&1
  tail -2 $O/test-nn-f16-dawn.txt; grep -i "error" $O/err.txt | tail -5
  tar czf $OUT/asmat.tgz -C $O .
  ;;
fsmat)
  # the fused prefill projections on tensor cores (quant/qmatmul_smat_fused.wgsl): Tint's
  # verdict on two of its forms, its tests and the quantized smat tests under Dawn, then the
  # SmolLM2-shaped Q4_1 file's 128-token prefill (and decode) under Dawn by default (tensor
  # cores), with smat off, with each fused shape forced ($SHAPES), and natively
  O=$D/out-fsmat && mkdir -p $O/tint && dawn_module /tmp/dawnpkg/index.mjs
  for w2 in True False; do
    (cd $S && python3 -c "from webrlx.kernels import kernel; from webrlx.compiler import smat; \
print(kernel('quant/qmatmul_smat_fused', T='f32', \
**smat.fused_slots(smat.FUSED_SHAPES[2], $w2)).source)" > $O/tint/fused-$w2.wgsl)
    $D/node $S/tools/tint_spirv.mjs $O/tint/fused-$w2.wgsl --dawn /tmp/dawnpkg/index.mjs \
      --features shader-f16,subgroups,chromium-experimental-subgroup-matrix \
      --toggles vulkan_enable_f16_on_nvidia \
      --constants '{"FMT": 3, "QK": 32, "QBYTES": 20, "OWN": 1, "NORM": 1, "SWIGLU": 1}' \
      > $O/tint/fused-$w2.spvasm 2> $O/tint/err-$w2.txt
    echo "tint fused w2=$w2: rc $? $(wc -l < $O/tint/fused-$w2.spvasm) lines"; grep -i error $O/tint/err-$w2.txt | head -5
  done
  dawn_limit ${TEST_LIMIT:-240} pytest -q -x tests/backend/test_smat.py -k "fused or quantized" \
    > $O/test-fsmat-dawn.txt 2>&1
  grep -E "passed|failed|^FAILED|^E " $O/test-fsmat-dawn.txt | cut -c 1-400 | head -12
  smollm2_q41 $O/err.txt
  for v in on off ${SHAPES:-}; do prefill_dawn $O/smollm2-dawn-$v.json --smat $v; done
  if [ -n "${TUNE:-}" ]; then       # the autotuner's picks for its shapes under Dawn, then used
    tune_smollm2 $O 128
    prefill_dawn $O/smollm2-dawn-picks.json --picks /tmp/llm_1b/picks.json
  fi
  prefill_native $O/smollm2-native.json
  prefill_summary $O/smollm2-*.json
  cat $O/err.txt $O/*.err 2> /dev/null | grep -v "^{" | grep -iv "^ \|warn\|llama_\|^\[\|^:\|subgroupMatrix\|\^" | tail -4
  tar czf $OUT/fsmat.tgz -C $O .
  ;;
ortconf)
  # ONNX Runtime Web 1.30's WebGPU provider against webrlx on the same dawn.node
  # (bench/device_ortweb_dawn.sh; carry .dawn/ortweb.tar.xz), MiniLM's shapes with random
  # weights made here (as ml16; carry .dawn/ml_small.tar.xz); then the SmolLM2-shaped Q4_1
  # 128-token prefill under Dawn (default, smat off) and natively, one session
  O=$D/out-ortconf && mkdir -p $O && minilm_random $O/err.txt
  OUT=$O bash bench/device_ortweb_dawn.sh ortweb > $O/ortweb-setup.txt 2>&1; tail -2 $O/ortweb-setup.txt
  OUT=$O timeout ${ORT_LIMIT:-240} bash bench/device_ortweb_dawn.sh bench
  [ -f $LL ] || { tar czf $OUT/ortconf.tgz -C $O .; exit 0; }   # (no llama.cpp: no file)
  smollm2_q41 $O/err.txt
  for v in on off on; do prefill_dawn $O/smollm2-dawn-$v.json --smat $v; done
  prefill_native $O/smollm2-native.json
  prefill_summary $O/smollm2-*.json
  cat $O/err.txt $O/*.err 2> /dev/null | grep -v "^{" | grep -iv "^ \|warn\|llama_\|^\[\|^:\|subgroupMatrix\|\^" | tail -4
  tar czf $OUT/ortconf.tgz -C $O .
  ;;
prefab)
  # the A/B of a prefill change under Dawn: the SmolLM2-shaped Q4_1 file's 128-token prefill
  # (and 64 decode steps) with the new wheel (setup's) and an old one (.dawn/wheels/old/, in the
  # carried wheels folder: 8 carried paths at most), alternating for $ROUNDS rounds; setup
  # carrying .big/llvk.so.xz (the file). Made for q, k and v in one dispatch (2026-11-28)
  mkdir -p $D/wheels_old && cp .dawn/wheels/old/webrlx-*.whl $D/wheels/pytest-* \
    $D/wheels/pluggy-* $D/wheels/iniconfig-* $D/wheels_old/
  smollm2_q41 $OUT/err.txt
  for r in $(seq ${ROUNDS:-3}); do
    prefill_dawn $OUT/ab-new.json
    WHEELS=$D/wheels_old prefill_dawn $OUT/ab-old.json
  done
  prefill_summary $OUT/ab-new.json $OUT/ab-old.json
  cat $OUT/err.txt $OUT/*.err 2> /dev/null | grep -i "error" | tail -3
  ;;
narrowab)
  # the narrow / deep fused tile shapes (smat.FUSED_TUNED_ONLY, 2026-11-29): their tests under
  # Dawn, the autotuner's picks for the SmolLM2-shaped Q4_1 file's 128-token prefill with them
  # offered, then that prefill with the shipped table (on) and with those picks, alternating
  # for $ROUNDS rounds; setup carrying .big/llvk.so.xz (the file)
  O=$D/out-narrowab && mkdir -p $O
  dawn_limit ${TEST_LIMIT:-200} pytest -q -x tests/backend/test_smat.py -k "fused_prefill" \
    > $O/test-narrow-dawn.txt 2>&1
  grep -E "passed|failed|^FAILED|^E " $O/test-narrow-dawn.txt | cut -c 1-400 | head -12
  smollm2_q41 $O/err.txt
  tune_smollm2 $O 128
  python3 -c "import json, sys; t = json.load(open(sys.argv[1])); t = t.get('table', t); \
[print(k.split(' [')[0], v) for k, v in t.items() if '_smat_' in str(v)]" /tmp/llm_1b/picks.json \
    | head -20
  for r in $(seq ${ROUNDS:-3}); do
    prefill_dawn $O/smollm2-dawn-on.json
    prefill_dawn $O/smollm2-dawn-picks.json --picks /tmp/llm_1b/picks.json
  done
  prefill_summary $O/smollm2-dawn-on.json $O/smollm2-dawn-picks.json
  cat $O/err.txt $O/*.err 2> /dev/null | grep -v "^{" | grep -iv "^ \|warn\|llama_\|^\[\|^:\|subgroupMatrix\|\^" | tail -4
  tar czf $OUT/narrowab.tgz -C $O .
  ;;
qkvshapes)
  # q/k/v's prefill kernel (quant/qmatmul_smat_qkv.wgsl) is never timed by the autotuner (it
  # writes the live KV caches): the SmolLM2-shaped Q4_1 file's 128-token prefill under Dawn
  # with every fused projection forced to each shape of $SHAPES (and the default), its kernels'
  # times; setup carrying .big/llvk.so.xz (the file)
  O=$D/out-qkvshapes && mkdir -p $O
  smollm2_q41 $O/err.txt
  for sh in on ${SHAPES:-}; do DECODE=4 prefill_dawn $O/smollm2-dawn-$sh.json --smat $sh; done
  for sh in on ${SHAPES:-}; do python3 -c "import json, sys; \
[print(sys.argv[2], d['prefill']['wall_ms'], d['prefill']['gpu_ms'], \
{k: v for k, v in d['prefill']['kernels'].items() if '[q+k+v]' in k or '[res]' in k}) \
for d in map(json.loads, (l for l in open(sys.argv[1]) if l.startswith('{')))]" \
    $O/smollm2-dawn-$sh.json $sh || tail -c 300 $O/smollm2-dawn-$sh.err; done
  tar czf $OUT/qkvshapes.tgz -C $O .
  ;;
stateab)
  # the autotuner timing the calls that bind a KV cache on stand-ins (runtime/plan.
  # TIME_STATE_CALLS, 2026-11-29) against never timing them (off): the SmolLM2-shaped Q4_1
  # file's 128-token prefill, decode and Engine steps at 1 and 8 sequences natively (a fresh
  # autotune cache each run), $ROUNDS rounds alternating; under Dawn a tune run with them
  # timed, then the prefill with its picks against the shipped table; then the 1B-shaped
  # Q4_K_M file's Engine steps natively both ways; setup carrying .big/llvk.so.xz
  O=$D/out-stateab && mkdir -p $O
  smollm2_q41 $O/err.txt
  for r in $(seq ${ROUNDS:-2}); do
    for ts in off gpu; do
      HOME=$(mktemp -d) prefill_native $O/smollm2-native-$ts.json --tune-states $ts --sizes 1,8
    done
  done
  prefill_summary $O/smollm2-native-off.json $O/smollm2-native-gpu.json
  for ts in off gpu; do engine_summary native-$ts $O/smollm2-native-$ts.json 4; done
  tune_smollm2 $O 16,48,128
  python3 -c "import json, sys; t = json.load(open(sys.argv[1])); t = t.get('table', t); \
[print(k.split(' [')[0], v) for k, v in t.items() if 'qkv' in k]" /tmp/llm_1b/picks.json
  for r in $(seq ${ROUNDS:-2}); do
    prefill_dawn $O/smollm2-dawn-on.json --sizes 1,8
    prefill_dawn $O/smollm2-dawn-picks.json --picks /tmp/llm_1b/picks.json --sizes 1,8
  done
  prefill_summary $O/smollm2-dawn-on.json $O/smollm2-dawn-picks.json
  for v in on picks; do engine_summary dawn-$v $O/smollm2-dawn-$v.json 4; done
  if [ -n "${ONEB:-}" ]; then
    llama_1b $O/err.txt
    for ts in off gpu; do
      (cd $S && HOME=$(mktemp -d) timeout 150 python3 bench/probes/llm_1b_profile_probe.py \
        --model $LLAMA_1B --prefill 512 --sizes 1,8 --top 6 --tune-states $ts \
        >> $O/llm1b-native-$ts.json 2>> $O/llm1b-native-$ts.err)
      engine_summary 1b-native-$ts $O/llm1b-native-$ts.json 4
    done
  fi
  cat $O/err.txt $O/*.err 2> /dev/null | grep -v "^{" | grep -iv "^ \|warn\|llama_\|^\[\|^:\|subgroupMatrix\|\^" | tail -4
  tar czf $OUT/stateab.tgz -C $O .
  ;;
shipcheck)
  # the wheel as it ships (its nvidia table): the KV-cache tuning and fused-prefill tests under
  # Dawn, then the SmolLM2-shaped Q4_1 file's 128-token prefill, decode and Engine steps under
  # Dawn on the shipped table, $ROUNDS runs; setup carrying .big/llvk.so.xz (the file)
  O=$D/out-shipcheck && mkdir -p $O
  dawn_limit ${TEST_LIMIT:-200} pytest -q -x tests/backend/test_quant.py \
    tests/backend/test_smat.py -k "stand_ins or fused_prefill" > $O/test-dawn.txt 2>&1
  grep -E "passed|failed|^FAILED|^E " $O/test-dawn.txt | cut -c 1-400 | head -12
  smollm2_q41 $O/err.txt
  for r in $(seq ${ROUNDS:-2}); do prefill_dawn $O/smollm2-dawn-shipped.json --sizes 1,8; done
  prefill_summary $O/smollm2-dawn-shipped.json
  engine_summary dawn-shipped $O/smollm2-dawn-shipped.json 4
  tar czf $OUT/shipcheck.tgz -C $O .
  ;;
poolcheck)
  # the KV-cache stand-ins' pool (runtime/plan._trial_entries): its test under Dawn and
  # natively on the GPU, then the SmolLM2-shaped Q4_1 file natively with those calls timed (a
  # fresh autotune cache); setup carrying .big/llvk.so.xz (the file)
  O=$D/out-poolcheck && mkdir -p $O
  dawn_limit ${TEST_LIMIT:-200} pytest -q -x tests/backend/test_quant.py -k stand_ins \
    > $O/test-dawn.txt 2>&1
  grep -E "passed|failed|^FAILED|^E " $O/test-dawn.txt | cut -c 1-400 | head -8
  (cd $S && timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/backend/test_quant.py \
    -k stand_ins > $O/test-native.txt 2>&1)
  grep -E "passed|failed|^FAILED|^E " $O/test-native.txt | cut -c 1-400 | head -8
  smollm2_q41 $O/err.txt
  HOME=$(mktemp -d) prefill_native $O/smollm2-native-gpu.json --tune-states gpu --sizes 1,8
  prefill_summary $O/smollm2-native-gpu.json
  engine_summary native-gpu $O/smollm2-native-gpu.json 4
  tar czf $OUT/poolcheck.tgz -C $O .
  ;;
benchall)
  O=$D/out-benchall && mkdir -p $O && minilm_random $O/err.txt
  F=${FAMILIES:-matmul,f16,chain,io,rows,attention,minilm,train}
  (cd $S && timeout ${NATIVE_LIMIT:-240} python3 -m webrlx bench --only $F \
    > $O/bench-native.json 2>> $O/err.txt)
  dawn_limit ${BENCH_LIMIT:-270} bench --no-ref --only ${DAWN_FAMILIES:-${F/,train/}} \
    > $O/bench-dawn.json \
    2>> $O/err.txt
  (cd $S && python3 bench/bench_pair.py $O/bench-native.json $O/bench-dawn.json \
    > $O/bench-pair.json)
  python3 -c "import json, sys; d = json.load(open(sys.argv[1])); [print(r['case'], r['dtype'], \
round(r['native_ms'], 4), round(r['dawn_ms'], 4), r['torch_ms'] and round(r['torch_ms'], 4), \
round(r.get('torch_over_dawn', 0), 3)) for r in d['rows']]" $O/bench-pair.json
  grep "^\[bench" $O/err.txt | tail -4
  tar czf $OUT/benchall.tgz -C $O .
  ;;
esac
