"""`python -m webrlx dawn`: webrlx in Pyodide in Node over Dawn (npm `webgpu`'s dawn.node), through
backends/js_webgpu.py: the browser's code path, byte for byte, without a browser.

    python -m webrlx dawn [options] -- python -c CODE | python FILE ARGS | python -m MOD ARGS
    python -m webrlx dawn [options] -- pytest ARGS | bench ARGS

It boots the offline Pyodide of build/pyodide, sets `navigator.gpu` from dawn.node's
`create(flags)`, installs the same webrlx wheel the browser suite serves and runs the command
inside (pytest through tests/browser/pyodide_runner.py, the browser suite's in-Pyodide runner).
Sync runs wait through JSPI (node's flag for it is passed when node has one); async forms work
without it (--no-jspi). On a CPU box Dawn runs over Chromium's SwiftShader Vulkan driver
(VK_DRIVER_FILES is set to it when unset); docs/dawn.md has the GPU machine's steps.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .web_assets import PYODIDE_VERSION, WebAssets, build, checkout_root

WEBGPU_NPM = "webgpu@0.6.2"
DEFAULT_FLAGS = ("enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia",)
SWIFTSHADER_ICD = "/usr/lib/chromium/vk_swiftshader_icd.json"
PACKAGES = ("numpy", "micropip", "packaging", "jinja2")   # jinja2: webrlx.models.chat_template
ROOT = "/home/pyodide/webrlx-tests"        # the cwd inside, as in the browser suite's runner
OUT = "/home/pyodide/dawn-out"             # a host folder mounted inside, for results
MODELS = "/home/pyodide/models"
USAGE = "python -m webrlx dawn [options] -- python -c CODE | python FILE | pytest ARGS | bench"


def dawn_package(assets: WebAssets) -> Path:
    """The npm `webgpu` package's entry point under build/dawn/, installed there once."""
    folder = assets.root / "build" / "dawn"
    package = folder / "node_modules" / "webgpu"
    version = WEBGPU_NPM.split("@")[1]
    meta = package / "package.json"
    if not meta.is_file() or json.loads(meta.read_text())["version"] != version:
        if shutil.which("npm") is None:
            raise FileNotFoundError("dawn: npm is not installed; it fetches Dawn for Node "
                                    f"({WEBGPU_NPM}). apt-get install -y nodejs npm, or pass "
                                    "--dawn PATH/dawn.node")
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-save", "--no-audit", "--no-fund", "--prefix",
                        str(folder), WEBGPU_NPM], check=True, stdout=subprocess.DEVNULL)
    return package / "index.js"


def jspi_flags(node: str) -> list[str]:
    """The node flag that turns on JSPI (Node 20: stack switching; Node 22+: jspi), if any."""
    options = subprocess.run([node, "--v8-options"], capture_output=True, text=True,
                             check=False).stdout
    for flag in ("--experimental-wasm-jspi", "--experimental-wasm-stack-switching"):
        if flag + " " in options or flag + "\n" in options:
            return [flag]
    return []


def model_mounts() -> tuple[dict[str, str], dict[str, str]]:
    """Mount the model folders found on the host: (pyodide dir -> host dir, env)."""
    from ..models.assets import minilm_dir, smollm2_gguf
    mounts, env = {}, {}
    for var, name, find in (("WEBRLX_MINILM_DIR", "minilm", minilm_dir),
                            ("WEBRLX_SMOLLM2_DIR", "smollm2", lambda: smollm2_gguf().parent)):
        try:
            host = find()
        except FileNotFoundError:
            continue                  # the tests that need it fail inside, with the hint
        mounts[f"{MODELS}/{name}"] = str(Path(host).resolve())
        env[var] = f"{MODELS}/{name}"
    return mounts, env


def checkout_files(root: Path, paths: list[str]) -> dict[str, str]:
    """Files to copy inside for `paths` (test or script paths from the checkout): each folder's
    .py files, each file's folder's .py files, and what the test session reads at its root,
    tests/fixtures whole (its subfolders too: tests/fixtures/llamacpp's GGUF files and
    references, ~10 MB in all)."""
    files = [root / "pyproject.toml", root / "tests" / "__init__.py",
             root / "tests" / "conftest.py", *sorted((root / "tests" / "fixtures").rglob("*"))]
    for arg in paths:
        path = (root / arg.split("::")[0]).resolve()
        if path.is_dir():
            files += sorted(path.rglob("*.py"))
        elif path.is_file():
            files += sorted(path.parent.glob("*.py"))
    return {f"{ROOT}/{p.relative_to(root)}": str(p) for p in files
            if p.is_file() and p.is_relative_to(root)}


def python_code(command: list[str], wheels: list[str], root: Path) -> tuple[str, dict[str, str]]:
    """The Python that runs `command` inside Pyodide (its value: the exit status), and the
    checkout files it needs."""
    install = (f"import micropip\nawait micropip.install({wheels!r}, deps=False)\n"
               "import json, os, runpy, sys\n")
    tool, args = command[0], command[1:]
    if tool == "pytest":
        runner = (root / "tests" / "browser" / "pyodide_runner.py").read_text()
        args = args or ["tests/backend"]
        files = checkout_files(root, [a for a in args if not a.startswith("-")])
        run = (f"{runner}\n{install}_suite = await run_suite([], {{}}, {{}}, {args!r})\n"
               f"open('{OUT}/pytest.json', 'w').write(_suite)\njson.loads(_suite)['exit']\n")
        return run, files
    files = {}
    if tool == "bench":
        call = f"sys.argv = ['webrlx', 'bench', *{args!r}]\nrunpy.run_module('webrlx', " \
               "run_name='__main__', alter_sys=True)"
    elif tool == "python" and args[:1] == ["-c"] and len(args) > 1:
        call = (f"sys.argv = ['-c', *{args[2:]!r}]\nfrom pyodide.code import eval_code_async\n"
                f"await eval_code_async({args[1]!r}, {{'__name__': '__main__'}})")
    elif tool == "python" and args[:1] == ["-m"] and len(args) > 1:
        call = f"sys.argv = [{args[1]!r}, *{args[2:]!r}]\nrunpy.run_module({args[1]!r}, " \
               "run_name='__main__', alter_sys=True)"
    elif tool == "python" and args and not args[0].startswith("-"):
        files = checkout_files(root, [args[0]])
        script = f"{ROOT}/{Path(args[0]).resolve().relative_to(root)}"
        call = f"sys.argv = [{script!r}, *{args[1:]!r}]\nrunpy.run_path({script!r}, " \
               "run_name='__main__')"
    else:
        raise SystemExit(f"dawn: unknown command {' '.join(command)!r}; usage: {USAGE}")
    run = (f"{install}try:\n" + "".join(f"    {line}\n" for line in call.splitlines()) +
           "    _status = 0\nexcept SystemExit as e:\n"
           "    _status = e.code if isinstance(e.code, int) else (e.code is not None)\n"
           "    if isinstance(e.code, str):\n        print(e.code, file=sys.stderr)\n_status\n")
    return run, files


def summarize(results: dict) -> str:
    """One line of counts per outcome, then each failing test's first lines."""
    counts: dict[str, int] = {}
    lines = []
    for nodeid, r in results["results"].items():
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
        if r["outcome"] in ("failed", "error"):
            lines.append(f"  {r['outcome']}: {nodeid}: {r['longrepr'].strip()[-300:]}")
    head = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    return f"dawn: pytest inside Pyodide over Dawn: {head or 'nothing collected'}\n" + \
        "\n".join(lines)


def main_dawn(argv: list[str]) -> int:
    if "--" in argv:
        cut = argv.index("--")
        argv, command = argv[:cut], argv[cut + 1:]
    else:
        command = []
    p = argparse.ArgumentParser(prog="python -m webrlx dawn", usage=USAGE,
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--node", default=shutil.which("node"), help="node binary (Node 20+)")
    p.add_argument("--dawn", default=None, help="dawn.node (default: npm "
                   f"{WEBGPU_NPM}, installed into build/dawn)")
    p.add_argument("--dawn-flag", action="append", default=None,
                   help=f"a flag for dawn.node's create(), repeatable (default: {DEFAULT_FLAGS})")
    p.add_argument("--pyodide", default=None, help=f"an offline Pyodide {PYODIDE_VERSION} "
                   "folder (default: build/pyodide)")
    p.add_argument("--wheels", default=None, help="a folder with the webrlx wheel and pytest's "
                   "wheels (default: build/wheels, the wheel rebuilt from the checkout)")
    p.add_argument("--no-jspi", action="store_true", help="run without JSPI: only async forms")
    p.add_argument("--install", action="store_true", help=f"install {WEBGPU_NPM} into "
                   "build/dawn, then exit (tools/setup.sh)")
    p.add_argument("--json", default=None, help="pytest: write its per-test results here")
    p.add_argument("--mount", action="append", default=[], metavar="HOST_DIR[:INSIDE]",
                   help="a host folder to mount inside (default: the same path), repeatable")
    args = p.parse_args(argv)
    extra = {}                                 # --mount: inside -> host
    for spec in args.mount:
        host, _, inside = spec.partition(":")
        if not Path(host).is_dir():
            p.error(f"--mount {spec!r}: {host!r} is not a folder")
        extra[inside or str(Path(host).resolve())] = str(Path(host).resolve())
    root = checkout_root()
    if args.install:
        print(dawn_package(WebAssets(root)))
        return 0
    if not command:
        p.error(f"a command after `--` is needed: {USAGE}")
    if not args.node:
        raise SystemExit("dawn: node is not installed (apt-get install -y nodejs), or pass "
                         "--node PATH")
    assets = WebAssets(root) if args.pyodide and args.wheels else build(root)
    wheel_dir = Path(args.wheels) if args.wheels else assets.wheels
    wheels = sorted(wheel_dir.glob("webrlx-*.whl"))[:1]
    if command[0] == "pytest":
        wheels += sorted(w for w in wheel_dir.glob("*.whl") if not w.name.startswith("webrlx-"))
    code, files = python_code(command, [f"emfs:/tmp/wheels/{w.name}" for w in wheels], root)
    files.update({f"/tmp/wheels/{w.name}": str(w) for w in wheels})
    mounts, env = model_mounts()
    mounts.update(extra)
    env.update({k: v for k, v in os.environ.items() if k.startswith("WEBRLX_") and k not in env})
    env["HOME"] = "/home/pyodide"
    host_env = dict(os.environ)
    if "VK_DRIVER_FILES" not in host_env and Path(SWIFTSHADER_ICD).is_file():
        host_env["VK_DRIVER_FILES"] = SWIFTSHADER_ICD
    with tempfile.TemporaryDirectory(prefix="webrlx-dawn-") as tmp:
        if "XDG_RUNTIME_DIR" not in host_env:
            os.chmod(tmp, 0o700)
            host_env["XDG_RUNTIME_DIR"] = tmp
        out = Path(tmp) / "out"
        out.mkdir()
        mounts[OUT] = str(out)
        config: dict[str, Any] = {"pyodide": str(Path(args.pyodide or assets.pyodide).resolve()),
                  "dawn": str(Path(args.dawn).resolve()) if args.dawn else
                  str(dawn_package(assets)), "flags": list(args.dawn_flag or DEFAULT_FLAGS),
                  "packages": list(PACKAGES), "files": files, "mounts": mounts, "env": env,
                  "cwd": ROOT, "code": code}
        # Python's stdout goes to a copy of ours; node's own stdout, where Dawn logs shader
        # compilation warnings, to our stderr: a command's stdout stays its own (JSON)
        sys.stdout.flush()
        stdout_fd = os.dup(sys.stdout.fileno())
        config["stdout_fd"] = stdout_fd
        (Path(tmp) / "config.json").write_text(json.dumps(config))
        node_flags = [] if args.no_jspi else jspi_flags(args.node)
        try:
            status = subprocess.run([args.node, *node_flags,
                                     str(root / "tools" / "dawn_runner.mjs"),
                                     str(Path(tmp) / "config.json")], env=host_env,
                                    stdout=sys.stderr.fileno(), pass_fds=(stdout_fd,),
                                    check=False).returncode
        finally:
            os.close(stdout_fd)
        if command[0] == "pytest" and (out / "pytest.json").is_file():
            results = json.loads((out / "pytest.json").read_text())
            print(summarize(results))
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=1))
    return status
