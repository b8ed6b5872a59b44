// Compile WGSL compute shaders with Tint through Dawn's null backend: validation and pipeline
// creation as Chrome does them, with every feature the null adapter offers (shader-f16,
// subgroups and chromium-experimental-subgroup-matrix among them), on any machine and no GPU.
// So kernels that only a GPU with subgroup matrices runs (Dawn on NVIDIA: matmul_smat,
// qmatmul_smat*, attention_smat) are compiled in CI too. Nothing runs: the null backend
// executes no shader, so this checks what Tint accepts, not what a kernel computes.
//
//   node tools/tint_check.mjs SHADERS.json OUT.json [--dawn PATH (npm webgpu entry)]
// SHADERS.json: [{"name": ..., "code": WGSL, "constants": {OVERRIDE: number}}, ...]
// OUT.json: {"adapter": {...}, "results": [{"name", "ok", "limited", "errors": [...]}, ...]};
// exit status 1 when any shader is rejected (its Tint messages in "errors" and on stderr).
// "limited": the module compiled but its pipeline needs more than the null adapter's default
// limits (workgroup memory, threads), which real GPUs raise: the caller checks those sizes.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
let dawn = `${ROOT}/build/dawn/node_modules/webgpu/index.js`;
const files = [];
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--dawn') dawn = argv[++i];
  else if (argv[i].startsWith('--')) throw new Error(`tint_check: unknown argument ${argv[i]}`);
  else files.push(argv[i]);
}
if (files.length !== 2) throw new Error('tint_check: give SHADERS.json and OUT.json');
const shaders = JSON.parse(readFileSync(files[0], 'utf8'));

const { create, globals } = await import(pathToFileURL(dawn).href);
Object.assign(globalThis, globals);
const gpu = create(['backend=null', 'enable-dawn-features=allow_unsafe_apis']);
const adapter = await gpu.requestAdapter();
if (!adapter) { console.error('tint_check: Dawn offers no null adapter'); process.exit(1); }
const wanted = ['shader-f16', 'subgroups', 'chromium-experimental-subgroup-matrix'];
const requiredFeatures = wanted.filter((f) => adapter.features.has(f));
const limits = ['maxComputeWorkgroupStorageSize', 'maxComputeInvocationsPerWorkgroup',
                'maxComputeWorkgroupSizeX', 'maxStorageBuffersPerShaderStage',
                'maxStorageBufferBindingSize'];
const requiredLimits = Object.fromEntries(limits.map((k) => [k, adapter.limits[k]]));
const device = await adapter.requestDevice({ requiredFeatures, requiredLimits });
const results = [];
let rejected = 0;
for (const s of shaders) {
  device.pushErrorScope('validation');
  const module = device.createShaderModule({ code: s.code });
  const info = await module.getCompilationInfo();
  let pipelineError = null;
  try {
    await device.createComputePipelineAsync({
      layout: 'auto', compute: { module, entryPoint: 'main', constants: s.constants || {} } });
  } catch (e) { pipelineError = String(e.message || e); }
  const scoped = await device.popErrorScope();
  const errors = info.messages.filter((m) => m.type === 'error')
    .map((m) => `${s.name}:${m.lineNum}:${m.linePos} ${m.message}`);
  // the null adapter has the default limits (16 KiB of workgroup memory, 256 threads, 8
  // storage buffers a stage): a pipeline over them is `limited` (the caller checks its sizes
  // against a real adapter's), not rejected, once its module compiled
  let limited = null;
  if (pipelineError && !errors.length &&
      /larger than the maximum allowed|exceeds the maximum/.test(pipelineError)) {
    limited = pipelineError.split('\n')[0];
  } else if (pipelineError) errors.push(`${s.name}: pipeline: ${pipelineError.split('\n')[0]}`);
  if (scoped && !limited) errors.push(`${s.name}: ${scoped.message.split('\n')[0]}`);
  if (errors.length) { rejected++; for (const e of errors) console.error(e); }
  results.push({ name: s.name, ok: errors.length === 0, limited, errors });
}
writeFileSync(files[1], JSON.stringify({
  adapter: { features: [...adapter.features].sort(), limits: requiredLimits,
             subgroupMatrixConfigs: adapter.info.subgroupMatrixConfigs ?? null },
  results }));
process.exit(rejected ? 1 : 0);
