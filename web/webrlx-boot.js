// Boot webrlx in the browser: load Pyodide, numpy and the webrlx wheel; main thread or Worker.
// Pages import this module; web/worker.js runs the same boot inside a Web Worker.

export const PYODIDE_CDN = "https://cdn.jsdelivr.net/pyodide/v0.27.7/full/";

// Where Pyodide and the wheel come from: ?pyodide=...&wheel=... on the page URL, else the
// /config.json of `python -m webrlx serve`, else the CDN and the `webrlx` package on PyPI.
export async function pageConfig() {
  const query = new URLSearchParams(globalThis.location?.search ?? "");
  let served = {};
  try {
    const response = await fetch(new URL("/config.json", globalThis.location.href));
    if (response.ok) served = await response.json();
  } catch (err) {
    // no local server: the CDN defaults below apply
  }
  return {
    pyodideBaseURL: query.get("pyodide") ?? served.pyodideBaseURL ?? PYODIDE_CDN,
    wheelURL: query.get("wheel") ?? served.wheelURL ?? "webrlx",
  };
}

// Load Pyodide from pyodideBaseURL, then numpy, then micropip-install wheelURL (a wheel URL or
// a package name) and any extra requirements. Returns the pyodide object.
export async function bootWebrlx({
  pyodideBaseURL = PYODIDE_CDN,
  wheelURL = "webrlx",
  requirements = [],
  onProgress = () => {},
} = {}) {
  const base = new URL(pyodideBaseURL, globalThis.location.href).href.replace(/\/?$/, "/");
  const started = performance.now();
  const step = (message) => onProgress({ message, seconds: (performance.now() - started) / 1e3 });
  step("loading Pyodide");
  const { loadPyodide } = await import(base + "pyodide.mjs");
  const pyodide = await loadPyodide({ indexURL: base });
  await mountTuneCache(pyodide);
  step("loading numpy");
  await pyodide.loadPackage(["numpy", "micropip"], { messageCallback: () => {} });
  step("installing webrlx");
  const micropip = pyodide.pyimport("micropip");
  try {
    const wheel = new URL(wheelURL, globalThis.location.href);
    const target = /\.whl$/.test(wheel.pathname) ? wheel.href : wheelURL;
    await micropip.install([target, ...requirements]);
  } finally {
    micropip.destroy();
  }
  step("ready");
  return pyodide;
}

// The autotuner's table (~/.cache/webrlx/tune.json, see webrlx/runtime/autotune.py) lives on an
// IndexedDB-backed folder: what one visit tuned, the next one (or a reload) finds. Best effort:
// without IndexedDB (some private modes) the table stays in memory.
export const TUNE_CACHE_DIR = "/home/pyodide/.cache/webrlx";

async function mountTuneCache(pyodide) {
  try {
    pyodide.FS.mkdirTree(TUNE_CACHE_DIR);
    pyodide.FS.mount(pyodide.FS.filesystems.IDBFS, {}, TUNE_CACHE_DIR);
    await new Promise((resolve) => pyodide.FS.syncfs(true, () => resolve()));
  } catch (err) {
    console.warn("webrlx: the tuning table will not persist:", err);
  }
}

// Run Python code and return its last expression as a plain JS value (PyProxies destroyed).
export async function runPython(pyodide, code) {
  const result = await pyodide.runPythonAsync(code);
  if (result && typeof result.toJs === "function") {
    try {
      return result.toJs({ dict_converter: Object.fromEntries, create_pyproxies: false });
    } finally {
      result.destroy();
    }
  }
  return result;
}

// A webrlx Pyodide inside a Web Worker, behind the same promise API as the main thread:
// `const w = startWorker(options); await w.ready; const value = await w.run("1 + 1");`
export function startWorker(options = {}, workerURL = new URL("./worker.js", import.meta.url)) {
  const worker = new Worker(workerURL, { type: "module" });
  const waiting = new Map();
  let nextId = 0;
  const call = (message) =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve, reject });
      worker.postMessage({ id, ...message });
    });
  worker.onmessage = ({ data }) => {
    if (data.type === "progress") {
      options.onProgress?.(data.progress);
      return;
    }
    const pending = waiting.get(data.id);
    waiting.delete(data.id);
    if (data.type === "error") pending.reject(new Error(data.error));
    else pending.resolve(data.result);
  };
  worker.onerror = (event) => {
    for (const pending of waiting.values()) pending.reject(new Error(event.message));
    waiting.clear();
  };
  const { onProgress, ...bootOptions } = options;
  return {
    ready: call({ type: "boot", options: bootOptions }),
    run: (code) => call({ type: "run", code }),
    terminate: () => worker.terminate(),
  };
}
