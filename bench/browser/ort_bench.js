// onnxruntime-web runner of `python -m webrlx bench --browser`: window.ortBench.run({ep, model,
// ids, repeats}) loads the exported BertModel (last_hidden_state) with the "webgpu" or "wasm"
// execution provider and times each case's run (session.run + mean pooling + L2 norm here).
import * as ort from "/ort/ort.webgpu.min.mjs";

ort.env.wasm.wasmPaths = new URL("/ort/", location.href).href;
// threads need SharedArrayBuffer, which needs cross-origin isolation (the bench server has none)
ort.env.wasm.numThreads = self.crossOriginIsolated ? Math.min(4, navigator.hardwareConcurrency) : 1;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function feeds(rows) {
  const batch = rows.length, seq = rows[0].length;
  const ids = new BigInt64Array(batch * seq), mask = new BigInt64Array(batch * seq);
  rows.forEach((r, i) => r.forEach((v, j) => {
    ids[i * seq + j] = BigInt(v);
    mask[i * seq + j] = 1n;
  }));
  const dims = [batch, seq];
  return { input_ids: new ort.Tensor("int64", ids, dims),
           attention_mask: new ort.Tensor("int64", mask, dims),
           token_type_ids: new ort.Tensor("int64", new BigInt64Array(batch * seq), dims) };
}

// sentence-transformers pooling: mean over the masked tokens, then L2 normalize
function pool(hidden, mask) {
  const [batch, seq, dim] = hidden.dims;
  const h = hidden.data, m = mask.data, out = [];
  for (let b = 0; b < batch; b++) {
    const e = new Float64Array(dim);
    let n = 0;
    for (let s = 0; s < seq; s++) {
      if (!m[b * seq + s]) continue;
      n++;
      const o = (b * seq + s) * dim;
      for (let d = 0; d < dim; d++) e[d] += h[o + d];
    }
    let norm = 0;
    for (let d = 0; d < dim; d++) { e[d] /= Math.max(n, 1e-9); norm += e[d] * e[d]; }
    norm = Math.max(Math.sqrt(norm), 1e-12);
    out.push(Array.from(e, (x) => x / norm));
  }
  return out;
}

async function adapterName() {
  const a = ort.env.webgpu?.adapter ?? await navigator.gpu?.requestAdapter();
  const i = a?.info;
  return i ? [i.vendor, i.architecture, i.device, i.description].filter(Boolean).join(" ") : null;
}

window.ortBench = {
  async run({ ep, model, ids, repeats }) {
    let t = performance.now();
    const response = await fetch(model);
    if (!response.ok) throw new Error(`${model}: HTTP ${response.status}`);
    const bytes = new Uint8Array(await response.arrayBuffer());
    const fetch_s = (performance.now() - t) / 1e3;
    t = performance.now();
    const session = await ort.InferenceSession.create(bytes, { executionProviders: [ep] });
    const load_s = (performance.now() - t) / 1e3;
    const once = async (f) => {
      const out = await session.run(f);
      return pool(out.hidden, f.attention_mask);
    };
    const cases = {};
    for (const [name, rows] of Object.entries(ids)) {
      const f = feeds(rows);
      t = performance.now();
      const embedding = await once(f);
      const first_ms = performance.now() - t;
      await once(f);
      const warm = [];
      for (let i = 0; i < repeats; i++) {
        t = performance.now();
        await once(f);
        warm.push(performance.now() - t);
      }
      cases[name] = { first_ms, warm_ms: median(warm), warm_all_ms: warm, embedding };
    }
    await session.release();
    return { fetch_s, load_s, cases, ort_version: ort.env.versions?.common ?? null,
             backend: ep, threads: ort.env.wasm.numThreads,
             adapter: ep === "webgpu" ? await adapterName() : "wasm (CPU)" };
  },
};
