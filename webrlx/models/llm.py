"""Language models from any GGUF of the supported families (llama, mistral, qwen2, qwen3,
gemma2, gemma3, phi3) on webrlx: tokenizer, chat template and one compiled executable.

    from webrlx.models import llm
    lm = llm.load("model.gguf")
    print(lm.generate("The capital of France is", max_new_tokens=20))
    for piece in lm.chat([{"role": "user", "content": "Hi!"}]):
        print(piece, end="", flush=True)

`load` reads `general.architecture`, builds the decoder of its row of llama.FAMILIES and the
tokenizer `tokenizer.ggml.model` names (gpt2: byte-level BPE; llama: SentencePiece BPE).
Generation keeps the KV cache, the sampled token and the position on the GPU: a decode step is
one submit whose token feeds the next step as a DeviceTensor. Tokens are read back after the
first (the time to first token) and then every READ_EVERY steps (and at the end) to stream
text, each read READ_LAG steps after its copy was queued (decoding.READ_AHEAD: the GPU never
waits for a read), so a stop only costs that many extra steps. Between readbacks,
DECODE_STEPS_PER_SUBMIT decode steps go in one submit
(`exe.run(..., repeat=k, carry=DECODE_CARRY)`).
Every method has an async twin for the browser (`generate_async`, `stream_async`, ...).
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..compiler import int8_scope
from ..runtime.executable import Executable, compile
from . import decoding, gguf
from .bpe import BPETokenizer
from .chat_template import render_chat
from .decoding import PREFILL_BUCKET, Sampling
from .llama import (
    FAMILIES,
    ROPE_LONG,
    ROPE_SHORT,
    LlamaConfig,
    UnsupportedModelError,
    build_llama,
    check_rope_tensors,
    tensor_name,
    weight_arrays,
)
from .spm import SPMTokenizer

ROLES = ("system", "user", "assistant")
SPECIAL_TOKEN_NAMES = {"bos": "bos_token", "eos": "eos_token", "unknown": "unk_token",
                       "padding": "pad_token"}     # GGUF key part -> transformers
UPLOAD_SETTLE_BYTES = 64 << 20   # queued uploads held in host staging memory, at most
DEFAULT_CAPACITY = 2048  # KV cache positions (the model's context is 8192; pass capacity=)
# Decode steps per submit (exe.run(repeat=k, carry=DECODE_CARRY)): the host's work of a run
# (feed checks, the submit) is paid once for k steps, but every step is still encoded, and the
# GPU waits for the whole batch. Measured on an H100 (SmolLM2 Q4_1, 256 tokens,
# bench/results/2026-11-27-h100-dawn-decode-steps-per-submit.json), k = 1 -> 4: natively 725 ->
# 582 tok/s, under Dawn 451 -> 432 (host ms a token 1.74 -> 1.56). So one step a submit
# everywhere; the runtime keeps `repeat` for graphs whose host work dominates.
DECODE_STEPS_PER_SUBMIT = 1
DECODE_CARRY = {"ids": 0, "pos": 1}   # a step's token and pos_next feed the next step


@dataclass
class Stats:
    """Timings of the latest generation."""
    prompt_tokens: int = 0
    new_tokens: int = 0
    first_token_s: float = 0.0       # prefill + first sample, to the first readback
    total_s: float = 0.0
    readbacks: int = 0
    times: list[float] = field(default_factory=list, repr=False)

    @property
    def tokens_per_s(self) -> float:
        decode = self.total_s - self.first_token_s
        return (self.new_tokens - 1) / decode if self.new_tokens > 1 and decode > 0 else 0.0


Request = tuple  # ("run", feeds, repeat, carry) | ("read",) | ("start",) | ("finish", pending)
#                 | ("text", piece): what a generation step needs


# WebGPU's default maxStorageBufferBindingSize: every adapter binds this much at once
WEBGPU_DEFAULT_BINDING = 128 << 20


def param_bytes_limit(device: Any) -> int | None:
    """The most bytes one weight param may hold on `device`: its maxStorageBufferBindingSize
    (a bigger blocks weight is cut into row pieces, llama._Weights.row_pieces); None on the
    numpy reference. With no device object at hand in the browser (where adapters come
    asynchronously) it is the default WebGPU binding, which every adapter offers."""
    from ..backends import auto
    if device is None or isinstance(device, str):
        if device is None and sys.platform == "emscripten":
            device = auto.acquired()
            if device is None:
                return WEBGPU_DEFAULT_BINDING
        else:
            device = auto.device(device)
    info = getattr(device, "info", None)
    if info is None or getattr(info, "backend", "") == "reference":
        return None
    return int(info.max_binding_size)


def make_tokenizer(md: dict[str, Any]) -> BPETokenizer | SPMTokenizer:
    """The tokenizer `tokenizer.ggml.model` names: gpt2 (byte-level BPE) or llama (SPM)."""
    model = md.get("tokenizer.ggml.model")
    if model == "gpt2":
        return BPETokenizer.from_gguf_metadata(md)
    if model == "llama":
        return SPMTokenizer.from_gguf_metadata(md)
    raise UnsupportedModelError(f"tokenizer.ggml.model is {model!r}; webrlx reads gpt2 "
                                "(byte-level BPE) and llama (SentencePiece BPE)")


def model_config(file: gguf.GGUFFile) -> LlamaConfig:
    """The decoder config of a GGUF file, with the rope factors read from its tensors: Llama
    3's rope_freqs, or LongRoPE's rope_factors_long / _short (Phi-3-mini-128k, Phi-3.5-mini;
    which set a model runs follows from its KV cache capacity: LlamaConfig.rope_scaling).
    Factor tensors webrlx cannot honour raise UnsupportedModelError naming the tensor."""
    where = str(file.path)
    cfg = LlamaConfig.from_metadata(file.metadata, where)
    check_rope_tensors(cfg, file.tensors, where)

    def factors(name: str) -> tuple[float, ...]:
        values = file.tensor_f32(name).reshape(-1)
        if not (np.isfinite(values).all() and (values > 0).all()):
            raise UnsupportedModelError(f"{where}: tensor {name!r} holds rope factors <= 0 "
                                        "or not finite; they divide the frequencies")
        return tuple(float(f) for f in values)
    if "rope_freqs.weight" in file.tensors:         # llama.cpp's Llama 3 rope scaling
        cfg = replace(cfg, rope_factors=factors("rope_freqs.weight"))
    if ROPE_LONG in file.tensors:                   # LongRoPE (both: check_rope_tensors)
        cfg = replace(cfg, rope_long=factors(ROPE_LONG), rope_short=factors(ROPE_SHORT))
    return cfg


class LanguageModel:
    """A loaded model: tokenizer, chat template and one compiled executable."""

    def __init__(self, file: gguf.GGUFFile, device: Any = None,
                 capacity: int = DEFAULT_CAPACITY, fuse: bool = True, int8: Any = None) -> None:
        md = file.metadata
        self.config = model_config(file)
        if not isinstance(capacity, int) or not 16 <= capacity <= self.config.context:
            raise ValueError(f"load(): capacity must be an int in [16, {self.config.context}] "
                             f"(the model's context), got {capacity!r}")
        self.capacity = capacity
        self.tokenizer = make_tokenizer(md)
        self.chat_template: str | None = md.get("tokenizer.chat_template")
        self.name = str(md.get("general.name", self.config.arch))
        # the chat template sees the special tokens, as transformers' special_tokens_map
        tokens = md["tokenizer.ggml.tokens"]
        self.special_tokens = {name: tokens[int(md[f"tokenizer.ggml.{kind}_token_id"])]
                               for kind, name in SPECIAL_TOKEN_NAMES.items()
                               if f"tokenizer.ggml.{kind}_token_id" in md}
        self.eos_id = int(md["tokenizer.ggml.eos_token_id"])
        self.stop_ids = {self.eos_id} | {int(md[f"tokenizer.ggml.{k}_token_id"])
                                         for k in ("eot", "eom")
                                         if f"tokenizer.ggml.{k}_token_id" in md}
        infos = self.tensor_infos = file.tensors
        self.max_param_bytes = param_bytes_limit(device)
        self.graph, outputs = build_llama(self.config, infos, capacity, self.max_param_bytes)
        self.executable: Executable = compile(self.graph, outputs=outputs, device=device,
                                              fuse=fuse, int8=int8)
        names = list(self.graph.params)
        if file.mapped:
            self._upload(file, names)
        else:
            self.executable.set_params(weight_arrays(infos, file.tensor_bytes, names))
        self.stats = Stats()
        self.last_logits: Any = None     # a DeviceTensor: the prefill's last-position logits

    @property
    def device(self) -> Any:
        return self.executable.device

    @property
    def int8(self) -> frozenset[str]:
        """The int8 paths this model asked for (load(int8=)); its Engines take the same."""
        return self.executable.int8

    def _upload(self, file: gguf.GGUFFile, names: list[str]) -> None:
        """Upload the params tensor by tensor from a mapped file, dropping each one's host
        pages after it; every UPLOAD_SETTLE_BYTES the smallest param so far is read back,
        which runs the queued writes and frees their staging copies (host memory until then)."""
        exe = self.executable
        settle = getattr(exe.engine, "param_bufs", None) is not None   # uploads start now
        pending, smallest = 0, (1 << 62, "")
        for name in names:
            arrays = weight_arrays(file.tensors, file.tensor_bytes, [name])
            exe.set_params(arrays)
            file.release(tensor_name(name))
            pending += arrays[name].nbytes
            smallest = min(smallest, (arrays[name].nbytes, name))
            if settle and pending >= UPLOAD_SETTLE_BYTES:
                exe.read_param(smallest[1])
                pending = 0

    # -- the generation loop, written once for sync and async drivers ----------------------
    def _check(self, ids: Sequence[int], max_new_tokens: int, sampling: Sampling) -> None:
        sampling.check()
        if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be an int > 0, got {max_new_tokens!r}")
        if not ids:
            raise ValueError("prompt is empty: give at least one token of text")
        if len(ids) + max_new_tokens > self.capacity:
            raise ValueError(f"prompt of {len(ids)} tokens + max_new_tokens {max_new_tokens} "
                             f"exceeds the KV cache of {self.capacity} positions; shorten "
                             f"the prompt or load(capacity=...) up to {self.config.context}")

    def _steps(self, ids: list[int], max_new_tokens: int, sampling: Sampling,
               stop: Sequence[str], ignore_eos: bool = False) -> Generator[Request, Any, None]:
        n_prompt = len(ids)
        bucket = min(-(-n_prompt // PREFILL_BUCKET) * PREFILL_BUCKET, self.capacity)
        padded = ids + [ids[-1]] * (bucket - n_prompt)     # pad rows: causal, overwritten
        fp, ip = sampling.fparams(), sampling.iparams()
        t0 = time.perf_counter()
        self.stats = Stats(prompt_tokens=n_prompt)
        token, pos, logits = yield ("run", {
            "ids": np.array([padded], np.int32), "pos": np.zeros(1, np.int32),
            "last": np.array([n_prompt - 1], np.int32), "fparams": fp, "iparams": ip}, 1, None)
        self.last_logits = logits
        produced, shown, text, emitted, stopped = 1, 0, "", 0, False
        pending: tuple[Any, int] | None = None   # a read-ahead and the tokens it covers
        every, lag, ahead = decoding.READ_EVERY, decoding.READ_LAG, decoding.READ_AHEAD
        decoder = self.tokenizer.stream()
        last_zero = np.zeros(1, np.int32)
        while True:
            done = produced >= max_new_tokens
            toks, seen = None, shown
            if done or produced == 1 or (not ahead and produced % every == 1):
                toks, seen, pending = (yield ("read",)), produced, None   # waits for all
            elif ahead:
                if pending is not None and produced - pending[1] >= lag:
                    toks, seen = (yield ("finish", pending[0])), pending[1]
                    pending = None
                if produced % every == 1:
                    pending = ((yield ("start",)), produced)
            if toks is not None:
                self.stats.readbacks += 1
                if not self.stats.first_token_s:
                    self.stats.first_token_s = time.perf_counter() - t0
                for t in toks[n_prompt + shown: n_prompt + seen]:
                    shown += 1
                    self.stats.new_tokens = shown
                    if int(t) in self.stop_ids and not ignore_eos:
                        done = True
                        break
                    text += decoder.feed(int(t))
                    hit = _find_stop(text, stop)
                    if hit is not None:                 # the stop string is not shown
                        text, done, stopped = text[:hit], True, True
                        break
                    safe = len(text) - _stop_prefix(text, stop)   # may still become a stop
                    if safe > emitted:
                        yield ("text", text[emitted:safe])
                        emitted = safe
                if done:
                    if not stopped:                     # the decoder's incomplete tail
                        text += decoder.flush()
                        cut = _find_stop(text, stop)
                        text = text if cut is None else text[:cut]
                    if len(text) > emitted:
                        yield ("text", text[emitted:])
                    self.stats.new_tokens = shown
                    self.stats.total_s = time.perf_counter() - t0
                    return
            # the steps up to the next read event (a token count that is 1 mod READ_EVERY,
            # a read-ahead's finish, or max_new_tokens), DECODE_STEPS_PER_SUBMIT at most, in
            # one submit
            k = min(DECODE_STEPS_PER_SUBMIT, max_new_tokens - produced,
                    every - (produced - 1) % every,
                    pending[1] + lag - produced if pending is not None else every)
            token, pos, logits = yield ("run", {"ids": token, "pos": pos, "last": last_zero,
                                                "fparams": fp, "iparams": ip}, k, DECODE_CARRY)
            produced += k

    def _start(self, prompt: str | Sequence[int], max_new_tokens: int, sampling: Sampling,
               stop: Sequence[str] | str | None, ignore_eos: bool = False
               ) -> Generator[Request, Any, None]:
        ids = self._ids(prompt)
        if stop is not None and not isinstance(stop, (str, Sequence)):
            raise ValueError(f"stop must be a str or a list of str, got "
                             f"{type(stop).__name__}")
        stop = [stop] if isinstance(stop, str) else list(stop or ())
        if any(not isinstance(s, str) or not s for s in stop):
            raise ValueError(f"stop must be non-empty strings, got {stop!r}")
        self._check(ids, max_new_tokens, sampling)
        return self._steps(ids, max_new_tokens, sampling, stop, ignore_eos)

    def _ids(self, prompt: str | Sequence[int]) -> list[int]:
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt)
        if not isinstance(prompt, Sequence):
            raise ValueError(f"prompt must be a str or a list of token ids in "
                             f"[0, {self.config.vocab}), got {type(prompt).__name__}")
        bad = next(((i, t) for i, t in enumerate(prompt) if not isinstance(
            t, (int, np.integer)) or not 0 <= t < self.config.vocab), None)
        if bad is not None:
            raise ValueError(f"prompt token ids must be ints in [0, {self.config.vocab}) (the "
                             f"vocabulary), got {bad[1]!r} at position {bad[0]}")
        return [int(t) for t in prompt]

    def _drive(self, steps: Generator[Request, Any, None]) -> Iterator[str]:
        exe = self.executable
        exe.reset_states(["seen", "tokens"])   # the KV cache needs no zeroing
        value: Any = None
        while True:
            try:
                req = steps.send(value)
            except StopIteration:
                return
            if req[0] == "text":
                value = None
                yield req[1]
            elif req[0] == "run":
                value = exe.run(req[1], keep_on_device=True, repeat=req[2], carry=req[3])
            elif req[0] == "start":
                value = exe.start_read("tokens")
            elif req[0] == "finish":
                value = exe.finish_read(req[1])
            else:
                value = exe.read_state("tokens")

    async def _drive_async(self, steps: Generator[Request, Any, None]) -> AsyncIterator[str]:
        exe = self.executable
        await exe.ready_async()
        exe.reset_states(["seen", "tokens"])   # the KV cache needs no zeroing
        value: Any = None
        while True:
            try:
                req = steps.send(value)
            except StopIteration:
                return
            if req[0] == "text":
                value = None
                yield req[1]
            elif req[0] == "run":
                value = await exe.run_async(req[1], keep_on_device=True, repeat=req[2],
                                            carry=req[3])
            elif req[0] == "start":
                value = exe.start_read("tokens")
            elif req[0] == "finish":
                value = await exe.finish_read_async(req[1])
            else:
                value = await exe.read_state_async("tokens")

    # -- public API -------------------------------------------------------------------------
    def stream(self, prompt: str | Sequence[int], max_new_tokens: int = 128,
               temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
               repetition_penalty: float = 1.0, seed: int = 0,
               stop: Sequence[str] | str | None = None, ignore_eos: bool = False
               ) -> Iterator[str]:
        """Yield the completion of prompt as text pieces (never half a character).

        Args:
            prompt: text (tokenized without a BOS, as the model's tokenizer does) or token ids.
            max_new_tokens: how many tokens at most (> 0).
            temperature: 0 is greedy; > 0 samples from softmax(logits / temperature).
            top_k: keep the k most likely tokens (0: all).
            top_p: keep the smallest set whose probability reaches top_p, in (0, 1].
            repetition_penalty: > 1 makes tokens already in the context less likely.
            seed: the sampler's seed; the same seed gives the same text on one adapter.
            stop: strings that end the completion (not included in it).
            ignore_eos: keep going past the end-of-sequence token (benchmarks).
        """
        sampling = Sampling(temperature, top_k, top_p, repetition_penalty, seed)
        return self._drive(self._start(prompt, max_new_tokens, sampling, stop, ignore_eos))

    def stream_async(self, prompt: str | Sequence[int], max_new_tokens: int = 128,
                     temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                     repetition_penalty: float = 1.0, seed: int = 0,
                     stop: Sequence[str] | str | None = None, ignore_eos: bool = False
                     ) -> AsyncIterator[str]:
        """Async form of stream() (`async for piece in lm.stream_async(...)`)."""
        sampling = Sampling(temperature, top_k, top_p, repetition_penalty, seed)
        return self._drive_async(self._start(prompt, max_new_tokens, sampling, stop,
                                             ignore_eos))

    def generate(self, prompt: str | Sequence[int], max_new_tokens: int = 128,
                 **kwargs: Any) -> str:
        """Return the completion of prompt (the arguments of stream())."""
        return "".join(self.stream(prompt, max_new_tokens, **kwargs))

    async def generate_async(self, prompt: str | Sequence[int], max_new_tokens: int = 128,
                             **kwargs: Any) -> str:
        """Async form of generate()."""
        return "".join([p async for p in self.stream_async(prompt, max_new_tokens, **kwargs)])

    def generate_ids(self, prompt: str | Sequence[int], max_new_tokens: int, **kwargs: Any
                     ) -> list[int]:
        """The new token ids of a completion (text streaming aside), EOS included if drawn."""
        for _ in self.stream(prompt, max_new_tokens, **kwargs):
            pass
        n0 = self.stats.prompt_tokens
        toks = self.executable.read_state("tokens")
        return [int(t) for t in toks[n0: n0 + self.stats.new_tokens]]

    def generate_batch(self, prompts: Sequence[str | Sequence[int]], max_new_tokens: int = 128,
                       sampling: Sampling | None = None, ignore_eos: bool = False) -> list[str]:
        """The completions of several prompts, decoded together in one batch per step
        (webrlx.models.engine.Engine; see there for its memory and limits).

        Args:
            prompts: texts or token-id lists.
            max_new_tokens: tokens at most per prompt (> 0).
            sampling: Sampling(temperature, top_k, top_p, 1.0, seed) for every prompt;
                None: greedy.
            ignore_eos: keep going past the end-of-sequence token (benchmarks).
        """
        from .engine import generate_batch
        return generate_batch(self, prompts, max_new_tokens, sampling, ignore_eos)

    def render_chat(self, messages: Sequence[dict[str, str]],
                    add_generation_prompt: bool = True) -> str:
        """The conversation as the model's own chat template writes it."""
        if not self.chat_template:
            raise ValueError("chat(): this GGUF has no tokenizer.chat_template")
        for i, m in enumerate(messages):
            role = m.get("role") if isinstance(m, dict) else None
            if role not in ROLES:
                raise ValueError(f"chat(): messages[{i}] has role {role!r}; roles are "
                                 f"{', '.join(ROLES)}")
            if not isinstance(m.get("content"), str):
                raise ValueError(f"chat(): messages[{i}] needs a 'content' string, got "
                                 f"{type(m.get('content')).__name__}")
        return render_chat(self.chat_template, list(messages), add_generation_prompt,
                           model=self.name, **self.special_tokens)

    def chat(self, messages: Sequence[dict[str, str]], max_new_tokens: int = 256,
             **kwargs: Any) -> Iterator[str]:
        """Stream the assistant's reply to messages ([{"role": ..., "content": ...}, ...])
        with the model's chat template; stops at the end-of-turn token."""
        return self.stream(self.render_chat(messages), max_new_tokens, **kwargs)

    def chat_async(self, messages: Sequence[dict[str, str]], max_new_tokens: int = 256,
                   **kwargs: Any) -> AsyncIterator[str]:
        """Async form of chat()."""
        return self.stream_async(self.render_chat(messages), max_new_tokens, **kwargs)


def _stop_prefix(text: str, stop: Sequence[str]) -> int:
    """Length of the longest end of text that begins some stop string (held back)."""
    return max((k for s in stop for k in range(min(len(s) - 1, len(text)), 0, -1)
                if s.startswith(text[-k:])), default=0)


def _find_stop(text: str, stop: Sequence[str]) -> int | None:
    """Index where the first stop string starts in text, or None."""
    hits = [i for i in (text.find(s) for s in stop) if i >= 0]
    return min(hits) if hits else None


def load(path_or_bytes: str | os.PathLike[str] | bytes, device: Any = None,
         max_context: int | None = None,
         progress: Callable[[int, int], None] | None = None, int8: Any = None
         ) -> LanguageModel:
    """Load a language model from its GGUF file and compile it.

    Args:
        path_or_bytes: a .gguf file, or its bytes.
        device: a device from webrlx.device(), "reference", or None for the default.
        max_context: KV cache positions (prompt + new tokens), up to the model's context;
            None: min(DEFAULT_CAPACITY, the model's context).
        progress: called with (bytes read, total bytes) while the file is read.
        int8: opt into int8 arithmetic on GPUs, as llama.cpp runs by default (None: f32,
            within 1e-3 x max|logit| of transformers). "decode": batched decode steps (2-15
            sequences, weights of 4M+ values) on x rounded to int8 per 32 values, ~5e-3 x
            max|y| off a product; "prefill": prompts of 32+ tokens on int8 x int8 products,
            ~4e-2 x max|logit| off on a 1B model; True or "all": both. On an H200 with a 1B Q4_K_M
            file they take 8 sequences from 3.5x to 5.8x one, and a 512-token prefill from
            31.4 to 19.7 ms (docs/performance.md). Small models keep f32 where int8 loses.

    Raises:
        UnsupportedModelError: an architecture, tokenizer or tensor type webrlx does not run
            (the message names it and lists the supported ones).
    """
    kinds = int8_scope.parse(int8, "load()")            # before reading, as max_context
    if max_context is not None and (not isinstance(max_context, int) or max_context < 16):
        raise ValueError(f"load(): max_context must be an int >= 16 (KV positions, up to the "
                         f"model's context) or None, got {max_context!r}")   # before reading
    file = gguf.load(path_or_bytes, progress=progress)
    context = model_config(file).context
    if max_context is None:
        max_context = min(DEFAULT_CAPACITY, context)
    elif max_context > context:
        raise ValueError(f"load(): max_context must be at most the model's context of "
                         f"{context} positions, got {max_context}")
    return LanguageModel(file, device, max_context, int8=kinds)


__all__ = ["FAMILIES", "LanguageModel", "Sampling", "Stats", "UnsupportedModelError", "load"]
