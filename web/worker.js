// Web Worker side of startWorker() in webrlx-boot.js. Messages in: {id, type: "boot", options}
// and {id, type: "run", code}; out: {id, type: "result", result} | {id, type: "error", error}
// and {type: "progress", progress} while booting. Runs are queued, one at a time.
import { bootWebrlx, runPython } from "./webrlx-boot.js";

let pyodide = null;
let queue = Promise.resolve();

async function handle({ type, options, code }) {
  if (type === "boot") {
    const onProgress = (progress) => postMessage({ type: "progress", progress });
    pyodide = bootWebrlx({ ...options, onProgress });
    await pyodide;
    return null;
  }
  if (type === "run") {
    if (pyodide === null) throw new Error("worker: send {type: 'boot'} before 'run'");
    return runPython(await pyodide, code);
  }
  throw new Error(`worker: unknown message type ${type}`);
}

self.onmessage = ({ data }) => {
  queue = queue.then(async () => {
    try {
      postMessage({ id: data.id, type: "result", result: await handle(data) });
    } catch (err) {
      postMessage({ id: data.id, type: "error", error: String(err?.message ?? err) });
    }
  });
};
