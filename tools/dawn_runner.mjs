// webrlx in Pyodide in Node over Dawn (dawn.node): the browser's code path without a browser.
// node [--experimental-wasm-stack-switching] dawn_runner.mjs CONFIG.json
// CONFIG (written by `python -m webrlx dawn`, webrlx/cli/dawn.py): {pyodide, dawn (a dawn.node
// path, or the npm `webgpu` entry point), flags, packages, files {pyodide path: host path},
// mounts {pyodide dir: host dir}, env, cwd, code}. `code` (which installs the wheels among
// `files` with micropip) runs through runPythonAsync: top-level await, and JSPI where node
// has it; its value is the process's exit status. CONFIG.stdout_fd (optional): the file
// descriptor Python's stdout goes to, so that what Dawn itself logs on the process's stdout
// (shader compilation warnings) stays out of a command's output (`bench` JSON).
import { readFileSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const dawn = config.dawn.endsWith('.node') ? require(config.dawn)
  : await import(pathToFileURL(config.dawn).href);
const { create, globals } = dawn;
Object.assign(globalThis, globals);
const gpu = create(config.flags);

const pyDir = config.pyodide.replace(/\/?$/, '/');
const { loadPyodide } = await import(pathToFileURL(pyDir + 'pyodide.mjs').href);
const py = await loadPyodide({ indexURL: pyDir, env: config.env });
if (config.stdout_fd !== undefined) {
  py.setStdout({ write: (buf) => writeSync(config.stdout_fd, buf) });
}
// Only after loadPyodide: its startup reads navigator.userAgent when a navigator exists.
if (!globalThis.navigator) globalThis.navigator = { userAgent: `Node.js/${process.version}` };
Object.defineProperty(globalThis.navigator, 'gpu', { value: gpu, configurable: true });

await py.loadPackage(config.packages, { messageCallback: () => {} });
for (const [target, host] of Object.entries(config.files)) {
  py.FS.mkdirTree(dirname(target));
  py.FS.writeFile(target, readFileSync(host));
}
for (const [target, host] of Object.entries(config.mounts)) {
  py.FS.mkdirTree(target);
  py.FS.mount(py.FS.filesystems.NODEFS, { root: host }, target);
}
py.FS.mkdirTree(config.cwd);
py.FS.chdir(config.cwd);
let status = 1;
try {
  status = Number(await py.runPythonAsync(config.code) ?? 0);
} catch (err) {
  process.stderr.write(`${err.message ?? err}\n`);
}
process.exit(status);
