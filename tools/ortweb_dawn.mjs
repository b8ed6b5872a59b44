// ONNX Runtime Web in Node over Dawn (dawn.node): ORT-web's WebGPU execution provider on the same
// navigator.gpu that `python -m webrlx dawn` gives webrlx (tools/dawn_runner.mjs). Prints JSON.
//
//   node tools/ortweb_dawn.mjs --model build/onnx/minilm.onnx [--shapes 1x128,32x128]
//        [--repeats 5] [--ep webgpu|wasm] [--dawn PATH/dawn.node | npm webgpu entry]
//        [--ort DIR (onnxruntime-web's dist)] [--bundle ort.webgpu.min.mjs] [--dawn-flag F]...
//   node tools/ortweb_dawn.mjs --print-ids 2x8          (the token ids, for a cross-check)
//
// Token ids are fixed by a formula shared with bench/dawn_ortweb.py (token_ids there): row b,
// position s of a BxS case is [CLS]=101 at s=0, [SEP]=102 at s=S-1, else
// 1000 + (b * 7919 + s * 104729) % 28000; attention mask all ones, token types zero.
// A run is session.run from CPU tensors (upload, the graph, readback of last_hidden_state),
// then mean pooling and L2 norm here, as bench/browser/ort_bench.js does in Chromium.
// first = the first run of a shape; warm = median of --repeats runs after one more.
//
// ort-wasm's threaded build keeps its heap in a SharedArrayBuffer; dawn.node's
// GPUQueue.writeBuffer rejects views of one ("no overload matched" on ORT's JSEP bundle, a
// segfault on the asyncify one), where Chrome accepts them. writeBuffer is wrapped here to copy
// such a view into a plain buffer first: one host copy per upload, uniforms included.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const DEFAULTS = {
  model: `${ROOT}/build/onnx/minilm.onnx`, shapes: '1x128,32x128', repeats: '5', ep: 'webgpu',
  dawn: `${ROOT}/build/dawn/node_modules/webgpu/index.js`,
  ort: `${ROOT}/build/ortweb/node_modules/onnxruntime-web/dist`, bundle: 'ort.webgpu.min.mjs',
};
const DEFAULT_FLAGS = ['enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia'];

function parseArgs(argv) {
  const args = { ...DEFAULTS, flags: [] };
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, '');
    if (key === 'dawn-flag') args.flags.push(argv[++i]);
    else if (key === 'print-ids') args.printIds = argv[++i];
    else if (key in DEFAULTS) args[key] = argv[++i];
    else throw new Error(`ortweb_dawn: unknown argument ${argv[i]}`);
  }
  if (!args.flags.length) args.flags = DEFAULT_FLAGS;
  return args;
}

export function tokenIds(batch, seq) {
  return Array.from({ length: batch }, (_, b) => Array.from({ length: seq }, (_, s) => {
    if (s === 0) return 101;
    if (s === seq - 1) return 102;
    return 1000 + (b * 7919 + s * 104729) % 28000;
  }));
}

const shapeOf = (text) => text.split('x').map(Number);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function installDawn(args) {
  const require = createRequire(import.meta.url);
  const path = resolve(args.dawn);
  return (path.endsWith('.node') ? Promise.resolve(require(path))
    : import(pathToFileURL(path).href)).then(({ create, globals }) => {
    Object.assign(globalThis, globals);
    const gpu = create(args.flags);
    if (!globalThis.navigator) globalThis.navigator = { userAgent: `Node.js/${process.version}` };
    Object.defineProperty(globalThis.navigator, 'gpu', { value: gpu, configurable: true });
    const write = GPUQueue.prototype.writeBuffer;
    GPUQueue.prototype.writeBuffer = function writeBuffer(buffer, offset, data, start = 0, size) {
      const backing = ArrayBuffer.isView(data) ? data.buffer : data;
      if (!(backing instanceof SharedArrayBuffer)) {
        return write.call(this, buffer, offset, data, start, size);
      }
      const unit = data.BYTES_PER_ELEMENT ?? 1;
      const bytes = ArrayBuffer.isView(data)
        ? new Uint8Array(data.buffer, data.byteOffset, data.byteLength) : new Uint8Array(data);
      const from = start * unit;
      const to = size === undefined ? bytes.byteLength : from + size * unit;
      return write.call(this, buffer, offset, bytes.slice(from, to));
    };
    return gpu;
  });
}

function pool(hidden, rows) {
  const [batch, seq, dim] = hidden.dims;
  const h = hidden.data, out = [];
  for (let b = 0; b < batch; b++) {
    const e = new Float64Array(dim);
    for (let s = 0; s < seq; s++) for (let d = 0; d < dim; d++) e[d] += h[(b * seq + s) * dim + d];
    let norm = 0;
    for (let d = 0; d < dim; d++) { e[d] /= rows[b].length; norm += e[d] * e[d]; }
    norm = Math.max(Math.sqrt(norm), 1e-12);
    out.push(Array.from(e, (x) => Math.round((x / norm) * 1e7) / 1e7));
  }
  return out;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.printIds) {
    process.stdout.write(`${JSON.stringify(tokenIds(...shapeOf(args.printIds)))}\n`);
    return;
  }
  const t0 = performance.now();
  const gpu = await installDawn(args);
  const dist = resolve(args.ort).replace(/\/?$/, '/');
  const ort = await import(pathToFileURL(dist + args.bundle).href);
  ort.env.wasm.wasmPaths = dist;
  ort.env.wasm.numThreads = 1;         // as in the bench page: no cross-origin isolation there
  ort.env.logLevel = 'error';
  let t = performance.now();
  const bytes = readFileSync(args.model);
  const readS = (performance.now() - t) / 1e3;
  t = performance.now();
  const session = await ort.InferenceSession.create(bytes, { executionProviders: [args.ep] });
  const loadS = (performance.now() - t) / 1e3;
  const [output] = session.outputNames;
  const once = async (feeds, rows) => pool((await session.run(feeds))[output], rows);
  const cases = {};
  for (const shape of args.shapes.split(',').filter(Boolean)) {
    const [batch, seq] = shapeOf(shape);
    const rows = tokenIds(batch, seq);
    const dims = [batch, seq];
    const feeds = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from(rows.flat(), BigInt), dims),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(batch * seq).fill(1n), dims),
      token_type_ids: new ort.Tensor('int64', new BigInt64Array(batch * seq), dims),
    };
    t = performance.now();
    const embedding = await once(feeds, rows);
    const firstMs = performance.now() - t;
    await once(feeds, rows);
    const warm = [];
    for (let i = 0; i < Number(args.repeats); i++) {
      t = performance.now();
      await once(feeds, rows);
      warm.push(performance.now() - t);
    }
    cases[shape] = { first_ms: firstMs, warm_ms: median(warm), warm_all_ms: warm,
                     ids_sum: rows.flat().reduce((a, v) => a + v, 0), embedding };
  }
  await session.release();
  const adapter = args.ep === 'webgpu'
    ? ort.env.webgpu?.adapter ?? await gpu.requestAdapter() : null;
  const info = adapter?.info;
  process.stdout.write(`${JSON.stringify({
    runner: 'onnxruntime-web in Node over Dawn', ort_version: ort.env.versions?.common ?? null,
    bundle: args.bundle, ep: args.ep, threads: ort.env.wasm.numThreads,
    adapter: info ? [info.vendor, info.architecture, info.device, info.description]
      .filter(Boolean).join(' ') : 'wasm (CPU)',
    node: process.version, flags: args.flags, model: args.model, read_s: readS, load_s: loadS,
    total_s: (performance.now() - t0) / 1e3, repeats: Number(args.repeats), cases,
  })}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then(() => process.exit(0), (err) => {
    process.stderr.write(`ortweb_dawn: ${err?.stack ?? err}\n`);
    process.exit(1);
  });
}
