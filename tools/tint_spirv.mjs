// The SPIR-V Tint writes for a WGSL compute shader: what Chrome's WebGPU hands the Vulkan
// driver (robustness clamps, polyfills, the memory model), to compare with the WGSL webrlx
// renders. Dawn's `dump_shaders` toggle logs the shader at pipeline creation; dawn.node prints
// its log, which this keeps from the "Dumped SPIRV" line on. Runs on this box over
// SwiftShader's Vulkan ICD (Tint's output does not depend on the GPU, save vendor toggles).
//
//   VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json \
//     node tools/tint_spirv.mjs SHADER.wgsl [--constants '{"SPLITS": 1}'] [--entry main]
//        [--dawn PATH (npm webgpu entry)] [--toggles disable_robustness,...]
//        [--features shader-f16,subgroups,chromium-experimental-subgroup-matrix]
// (--features: requested on the device, for shaders that enable them; on the GPU machine,
// with --toggles vulkan_enable_f16_on_nvidia for f16 and subgroup matrices)
//
// A webrlx kernel as WGSL: python -c "from webrlx.kernels import kernel, raw_shader;
//   print(kernel('attention/attention_flash', T='f32', D='32', QKV='vec4<f32>',
//   ROW_TILES=raw_shader('common/flash_rows')).source)" > /tmp/flash.wgsl
// (the adapter's workgroup-memory limit applies: SwiftShader's is 32 KiB).
// Exit status 1, with the compiler's or the pipeline's messages, if the shader is rejected.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULTS = { constants: '{}', entry: 'main', toggles: '', features: '',
                   dawn: `${ROOT}/build/dawn/node_modules/webgpu/index.js` };

function parseArgs(argv) {
  const args = { ...DEFAULTS, shader: null };
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '');
    if (!argv[i].startsWith('--')) {
      if (args.shader) throw new Error(`tint_spirv: one shader file, got ${argv[i]} too`);
      args.shader = argv[i];
    } else if (key in DEFAULTS) args[key] = argv[++i];
    else throw new Error(`tint_spirv: unknown argument ${argv[i]}`);
  }
  if (!args.shader) throw new Error('tint_spirv: give the WGSL file to compile');
  return args;
}

// dawn.node prints Dawn's log to file descriptor 1 from C++: the compile runs in a child
// process whose stdout is kept, and only the part from the SPIR-V dump on is printed
if (!process.env.TINT_SPIRV_CHILD) {
  const { spawnSync } = await import('node:child_process');
  const run = spawnSync(process.execPath, [fileURLToPath(import.meta.url), ...process.argv.slice(2)],
                        { env: { ...process.env, TINT_SPIRV_CHILD: '1' }, encoding: 'utf8',
                          maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'inherit'] });
  if (run.status !== 0) process.exit(run.status ?? 1);
  const at = run.stdout.indexOf('Dumped SPIRV');
  if (at < 0) {
    console.error('tint_spirv: Dawn logged no SPIR-V (no dump_shaders in this dawn.node?)');
    process.exit(1);
  }
  process.stdout.write(run.stdout.slice(run.stdout.lastIndexOf('\n', at) + 1));
  process.exit(0);
}

const args = parseArgs(process.argv.slice(2));
const code = readFileSync(args.shader, 'utf8');
const constants = JSON.parse(args.constants);
const { create, globals } = await import(pathToFileURL(args.dawn).href);
Object.assign(globalThis, globals);
const toggles = ['allow_unsafe_apis', 'dump_shaders', 'disable_symbol_renaming',
                 ...args.toggles.split(',').filter(Boolean)];
const gpu = create([`enable-dawn-features=${toggles.join(',')}`]);
const adapter = await gpu.requestAdapter();
if (!adapter) { console.error('tint_spirv: no adapter'); process.exit(1); }
const requiredFeatures = args.features.split(',').filter(Boolean);
const missing = requiredFeatures.filter((f) => !adapter.features.has(f));
if (missing.length) {
  console.error(`tint_spirv: the adapter lacks ${missing.join(', ')}`);
  process.exit(1);
}
const device = await adapter.requestDevice({ requiredFeatures, requiredLimits: {
  maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize } });
device.pushErrorScope('validation');
const module = device.createShaderModule({ code });
const info = await module.getCompilationInfo();
device.createComputePipeline({ layout: 'auto',
                               compute: { module, entryPoint: args.entry, constants } });
const error = await device.popErrorScope();
await device.queue.onSubmittedWorkDone();
const errors = info.messages.filter((m) => m.type === 'error');
for (const m of errors) console.error(`${args.shader}:${m.lineNum}:${m.linePos} ${m.message}`);
if (error) console.error(`tint_spirv: pipeline: ${error.message.split('\n')[0]}`);
process.exit(errors.length || error ? 1 : 0);
