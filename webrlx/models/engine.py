"""Batched decoding: one Engine serves up to `max_sequences` sequences of a LanguageModel at
once, each in its own fixed KV slot, with one submit per step for all live sequences.

    eng = Engine(lm, max_sequences=8, max_context=1024)
    a = eng.add_request("The capital of France is", max_new_tokens=20)
    b = eng.add_request([{"role": "user", "content": "Hi!"}])     # messages: the chat template
    for piece in a:                  # iterating a stream steps the engine (b advances too)
        print(piece, end="")
    b.cancel()                       # frees b's slot
    lm.generate_batch(["Once upon a time", "def f(x):"], 32)       # -> list of texts

The engine compiles its own graph (llama.decoder_layers) over the model's weights:
  prefill (a new sequence; its own submit): ids (1, s) -> the layers writing KV slot `slot`
    at positions 0..s-1 -> the sampled first token;
  decode step (every live sequence; one submit): one token per sequence, read on the device
    from the `tokens` state at (slot, position), KV rows written and read per sequence
    (nn.cached_attention with pos (2, B) = [positions; slots]) -> B sampled tokens written
    back into `tokens` at (slot, position + 1).
The final norm and the LM head GEMV run on the sampled rows only (a symbolic count r: 1 in a
prefill, B in a decode step), so one live sequence in a large engine pays for one row there.
So does sampling: one nn.sample dispatch draws the r rows (one workgroup a row, each with its
own settings, seed and step), and one scatter_set writes the r tokens into `tokens`.
Tokens stay on the GPU: the host sends only small index arrays and reads `tokens` back every
READ_EVERY steps (and when a sequence joins or reaches its token budget) to stream text; the
periodic reads are read-aheads (decoding.READ_AHEAD): copied aside and read READ_LAG steps later,
so the GPU's queue does not drain for them.
Sequences join and leave between steps (continuous batching); the decode plan is the one of
the live count (one compiled plan per count, made on first use).

Memory: the KV pool is kv_bytes = 2 (K and V) x layers x max_sequences x kv_heads x
max_context x head_dim x 4 bytes (float32), allocated once, next to a second copy of the
weights on the device (the engine's executable; the model's own executable keeps its one).
Limits: a request whose prompt + max_new_tokens exceeds max_context, or one more than
max_sequences live requests, raises EngineFullError / ValueError at add_request (nothing is
queued; the engine stays usable). Sampling as LanguageModel.stream, except the repetition
penalty (1.0 only here).
"""
from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from .. import nn
from ..runtime.executable import Executable, compile
from ..tensor import Graph, Tensor
from . import decoding
from .decoding import PREFILL_BUCKET, Sampling
from .llama import LlamaConfig, _embedding, _linear, _Weights, decoder_layers


class LanguageModel(Protocol):
    """What the Engine reads of models.llm.LanguageModel (described here, so that llm imports
    this module and not the other way round)."""
    config: LlamaConfig
    capacity: int
    tensor_infos: Any
    executable: Executable
    tokenizer: Any
    stop_ids: Any
    max_param_bytes: int | None

    @property
    def device(self) -> Any: ...

    @property
    def int8(self) -> frozenset[str]: ...

    def render_chat(self, messages: Any, add_generation_prompt: bool = True) -> str: ...

    def _ids(self, prompt: str | Sequence[int]) -> list[int]: ...


class EngineFullError(RuntimeError):
    """add_request() while max_sequences sequences are live: finish or cancel one first."""


def build_batched(cfg: LlamaConfig, infos: Any, slots: int, capacity: int,
                  max_param_bytes: int | None = None) -> tuple[Graph, list[Tensor]]:
    """The engine's graph: KV states (slots, kv_heads, capacity, head_dim) per layer and a
    `tokens` state (slots * (capacity + 1),). Symbolic dims (b, s): a prefill binds (1, prompt
    bucket), a decode step (live count, 1); r: the rows sampled (1 in a prefill, the live count
    in a decode step), so the final norm and the head GEMV run on r rows, not on `slots`.
      put_at, put_ids (m,): tokens[put_at] = put_ids first (a prompt; -1: skipped),
      tok_at (b, s): the rows' token indices into tokens, kv (2, b): [positions; slots],
      pick (r,): rows (of b * s) whose logits are sampled,
      out_at (r,): where sampled row j's token goes in tokens,
      fparams (r, 4) [temperature, top_p, 1, 0], iparams (r, 4) [top_k, seed, step, 0].
    One nn.sample draws the r rows, each with its own settings row. Returns [tokens sampled
    (r,)]. `slots` sizes the states only."""
    g = Graph()
    W = _Weights(g, infos, max_param_bytes)      # as the model's: the same row pieces
    put_at, put_ids = g.input("put_at", ("m",), "int32"), g.input("put_ids", ("m",), "int32")
    tok_at = g.input("tok_at", ("b", "s"), "int32")
    kv = g.input("kv", (2, "b"), "int32")
    pick = g.input("pick", ("r",), "int32")
    out_at = g.input("out_at", ("r",), "int32")
    fparams = g.input("fparams", ("r", 4), "float32")
    iparams = g.input("iparams", ("r", 4), "int32")
    tokens = g.state("tokens", (slots * (capacity + 1),), "int32").scatter_set(put_at, put_ids)
    x, tied = _embedding(W, tokens.gather(tok_at, axis=0))          # (b, s, width)
    if cfg.family.embed_scale:
        x = x * math.sqrt(cfg.width)
    x = decoder_layers(cfg, W, x, kv, (slots, cfg.kv_heads, capacity, cfg.head_dim))
    x = x.reshape(-1, cfg.width).gather(pick, axis=0)                # (r, width)
    x = nn.rms_norm(x, W.norm("output_norm.weight"), cfg.eps)
    head = W.linear_pieces("output.weight") if "output.weight" in infos else tied
    logits = _linear(x, head)                                        # (r, V)
    if cfg.final_softcap:
        logits = (logits * (1.0 / cfg.final_softcap)).tanh() * cfg.final_softcap
    unseen = g.constant(np.zeros(cfg.vocab, np.int32))
    toks = nn.sample(logits, unseen, fparams, iparams)               # (r,)
    tokens.scatter_set(out_at, toks)                                 # effects: states only
    return g, [toks]


@dataclass
class _Seq:
    """A live sequence: its slot, token counts and text state."""
    slot: int
    ids: list[int]
    max_new: int
    sampling: Sampling
    ignore_eos: bool
    stream: Stream
    produced: int = 0            # tokens sampled so far (on the device)
    shown: int = 0               # tokens read back and decoded
    decoder: Any = None
    prefilled: bool = False
    done: bool = False


class Stream:
    """Text pieces of one request: iterate it (sync or async) to step the engine until this
    request finishes; cancel() ends it and frees its slot."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.pieces: list[str] = []
        self.finished = False
        self.cancelled = False
        self.token_ids: list[int] = []

    def cancel(self) -> None:
        """Stop this request now and free its KV slot for another."""
        self.cancelled = True
        self.engine._release(self)

    def __iter__(self) -> Iterator[str]:
        while True:
            if self.pieces:
                yield self.pieces.pop(0)
            elif self.finished or self.cancelled:
                return
            else:
                self.engine.step()

    async def _aiter(self) -> AsyncIterator[str]:
        while True:
            if self.pieces:
                yield self.pieces.pop(0)
            elif self.finished or self.cancelled:
                return
            else:
                await self.engine.step_async()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._aiter()

    def text(self) -> str:
        """The whole completion (steps the engine until this request ends)."""
        return "".join(self)


@dataclass
class Engine:
    """Continuous batching over fixed KV slots (see the module docstring).

    Args:
        lm: a loaded LanguageModel (llm.load); its weights are uploaded once more here.
        max_sequences: KV slots: sequences live at once.
        max_context: positions per slot (prompt + new tokens), up to the model's context;
            None: the model's load(max_context=).
    """
    lm: LanguageModel
    max_sequences: int = 8
    max_context: int | None = None
    executable: Executable = field(init=False, repr=False)
    seqs: dict[int, _Seq] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        cfg = self.lm.config
        ctx = self.lm.capacity if self.max_context is None else self.max_context
        if not isinstance(self.max_sequences, int) or self.max_sequences < 1:
            raise ValueError(f"Engine(): max_sequences must be an int >= 1, got "
                             f"{self.max_sequences!r}")
        if not isinstance(ctx, int) or not 16 <= ctx <= cfg.context:
            raise ValueError(f"Engine(): max_context must be an int in [16, {cfg.context}] "
                             f"(the model's context), got {ctx!r}")
        self.max_context = ctx
        self._check_memory()
        graph, outputs = build_batched(cfg, self.lm.tensor_infos, self.max_sequences, ctx,
                                       self.lm.max_param_bytes)
        self.executable = compile(graph, outputs=outputs, device=self.lm.device,
                                  max_plans=self.max_sequences + 8, int8=self.lm.int8)
        # the model's device copies of the weights where it has them (one copy on the GPU)
        shared = set(self.executable.share_params(self.lm.executable))
        rest = {n: self.lm.executable._params[n] for n in graph.params if n not in shared}
        if rest:
            self.executable.set_params(rest)
        self.executable.reset_states(["tokens"])
        self.seqs = {}
        self.steps = 0
        # a read-ahead: (pending read, {slot: (sequence, tokens drawn)}, step it started)
        self._pending: tuple[Any, dict[int, tuple[Any, int]], int] | None = None
        self.lm._batch_engine = self           # type: ignore[attr-defined]  # generate_batch

    @property
    def kv_bytes(self) -> int:
        """Bytes of the KV pool: 2 x layers x max_sequences x kv_heads x max_context x
        head_dim x 4."""
        cfg = self.lm.config
        return 2 * cfg.layers * self.slot_bytes() * self.max_sequences

    def slot_bytes(self) -> int:
        """Bytes of one layer's K (or V) cache of one slot."""
        cfg = self.lm.config
        return cfg.kv_heads * int(self.max_context or 0) * cfg.head_dim * 4

    def _check_memory(self) -> None:
        info = getattr(self.lm.device, "info", None)
        if info is None:
            return
        state = self.slot_bytes() * self.max_sequences             # one layer's K pool
        limit = min(info.limit("max-storage-buffer-binding-size", 1 << 27),
                    info.limit("max-buffer-size", 1 << 28))
        if state > limit:
            raise ValueError(
                f"Engine(): a layer's KV pool of {self.max_sequences} sequences x "
                f"{self.max_context} positions is {state} bytes, over the adapter's buffer "
                f"limit {limit}; lower max_sequences or max_context (kv_bytes = 2 x layers x "
                f"max_sequences x kv_heads x max_context x head_dim x 4)")

    # -- requests ------------------------------------------------------------------------------
    def add_request(self, prompt: str | Sequence[int] | Sequence[dict[str, str]],
                    sampling: Sampling | None = None, max_new_tokens: int = 128,
                    ignore_eos: bool = False) -> Stream:
        """Start a sequence (text, token ids, or chat messages) -> its Stream of text pieces.
        It is prefilled on the next step() and then decoded with the others.

        Raises:
            ValueError: a bad prompt or argument, or prompt + max_new_tokens over max_context.
            EngineFullError: max_sequences sequences are already live.
        """
        sampling = sampling or Sampling()
        sampling.check()
        if sampling.repetition_penalty != 1.0:
            raise ValueError("Engine.add_request(): repetition_penalty must be 1.0 in the "
                             "batched engine (use LanguageModel.stream for a penalty)")
        if prompt and isinstance(prompt, (list, tuple)) and isinstance(prompt[0], dict):
            prompt = self.lm.render_chat(prompt)                     # type: ignore[arg-type]
        ids = self.lm._ids(prompt)                                   # type: ignore[arg-type]
        if not ids:
            raise ValueError("Engine.add_request(): prompt is empty")
        if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens <= 0:
            raise ValueError(f"Engine.add_request(): max_new_tokens must be an int > 0, got "
                             f"{max_new_tokens!r}")
        if len(ids) + max_new_tokens > int(self.max_context or 0):
            raise ValueError(f"Engine.add_request(): prompt of {len(ids)} tokens + "
                             f"max_new_tokens {max_new_tokens} exceeds max_context "
                             f"{self.max_context}; shorten the prompt or make the Engine "
                             f"with a larger max_context")
        free = [s for s in range(self.max_sequences) if s not in self.seqs]
        if not free:
            raise EngineFullError(f"Engine.add_request(): all {self.max_sequences} sequences "
                                  f"(max_sequences) are live; wait for one to finish or "
                                  f"cancel() one")
        stream = Stream(self)
        self.seqs[free[0]] = _Seq(free[0], ids, int(max_new_tokens), sampling, ignore_eos,
                                  stream, decoder=self.lm.tokenizer.stream())
        return stream

    def _release(self, stream: Stream) -> None:
        for slot, seq in list(self.seqs.items()):
            if seq.stream is stream:
                del self.seqs[slot]

    @property
    def live(self) -> int:
        """Sequences holding a slot."""
        return len(self.seqs)

    # -- steps: each yields ("run", feeds) / ("read",) requests to a sync or async driver ----
    def _rows(self, rows: int) -> dict[str, np.ndarray]:
        """The sampling inputs of `rows` sampled rows (filled by _sample_row)."""
        return {"pick": np.zeros(rows, np.int32), "out_at": np.zeros(rows, np.int32),
                "fparams": np.zeros((rows, 4), np.float32),
                "iparams": np.zeros((rows, 4), np.int32)}

    def _sample_row(self, feeds: dict[str, np.ndarray], r: int, seq: _Seq, row: int,
                    pos: int) -> None:
        """Sampled row r is hidden row `row`, its token goes into tokens at (slot, pos)."""
        stride = int(self.max_context or 0) + 1
        feeds["pick"][r] = row
        feeds["out_at"][r] = seq.slot * stride + pos
        feeds["fparams"][r] = seq.sampling.fparams()
        feeds["iparams"][r] = [seq.sampling.top_k, seq.sampling.seed, pos, 0]

    def _plan(self) -> list[tuple[str, Any]]:
        """This step's runs: a prefill per new sequence, then one decode for the others."""
        stride = int(self.max_context or 0) + 1
        runs: list[tuple[str, Any]] = []
        for seq in self.seqs.values():
            if seq.prefilled:
                continue
            n = len(seq.ids)
            bucket = min(-(-n // PREFILL_BUCKET) * PREFILL_BUCKET, int(self.max_context or 0))
            padded = seq.ids + [seq.ids[-1]] * (bucket - n)       # pad rows: overwritten
            at = seq.slot * stride + np.arange(bucket, dtype=np.int32)
            feeds = {"put_at": at, "put_ids": np.array(padded, np.int32),
                     "tok_at": at[None, :], "kv": np.array([[0], [seq.slot]], np.int32),
                     **self._rows(1)}
            self._sample_row(feeds, 0, seq, n - 1, n)
            runs.append(("prefill", (seq, feeds)))
        live = [s for s in self.seqs.values() if s.prefilled and not s.done
                and s.produced < s.max_new]
        if live:
            pos = np.array([len(s.ids) + s.produced - 1 for s in live], np.int32)
            slots = np.array([s.slot for s in live], np.int32)
            feeds = {"put_at": np.full(1, -1, np.int32), "put_ids": np.zeros(1, np.int32),
                     "tok_at": (slots * stride + pos)[:, None], "kv": np.stack([pos, slots]),
                     **self._rows(len(live))}
            for r, s in enumerate(live):
                self._sample_row(feeds, r, s, r, int(pos[r]) + 1)
            runs.append(("decode", (live, feeds)))
        return runs

    def _after(self, runs: list[tuple[str, Any]]) -> bool:
        """Count the tokens the runs drew; True when tokens must be read back now (a new
        sequence's first token, a sequence at its budget)."""
        read = False
        for kind, (what, _) in runs:
            if kind == "prefill":
                what.prefilled, what.produced, read = True, 1, True
            else:
                for s in what:
                    s.produced += 1
                    read |= s.produced >= s.max_new
        self.steps += 1
        return read

    def _reads(self, runs: list[tuple[str, Any]]) -> tuple[bool, bool, bool]:
        """After a step's runs: (read every token now, finish the read-ahead, start one).
        Every READ_EVERY steps the tokens are read: with READ_AHEAD, copied aside and read
        READ_LAG steps later (the GPU keeps its queue), else at once (models/decoding.py)."""
        now = bool(runs) and self._after(runs) or any(s.done for s in self.seqs.values())
        due = bool(runs) and self.steps % decoding.READ_EVERY == 0
        if now or not due and self._pending is None:
            return now, False, False
        if not decoding.READ_AHEAD:
            return due, False, False
        finish = self._pending is not None and self.steps - self._pending[2] >= decoding.READ_LAG
        return False, finish, due

    def _start_read(self) -> None:
        seen = {slot: (seq, seq.produced) for slot, seq in self.seqs.items()}
        self._pending = (self.executable.start_read("tokens"), seen, self.steps)

    def _consume(self, tokens: np.ndarray, seen: dict[int, tuple[Any, int]] | None = None
                 ) -> None:
        """Decode the tokens read back into each stream's text; finish sequences. `seen`: a
        read-ahead's {slot: (sequence, tokens it had drawn)} when it was copied (a slot
        taken by another sequence since is left alone); None: every token drawn so far."""
        stride = int(self.max_context or 0) + 1
        stop_ids = self.lm.stop_ids
        if seen is None:
            self._pending = None                # this read covers the read-ahead's tokens
        for slot, seq in list(self.seqs.items()):
            upto = seq.produced
            if seen is not None:
                then = seen.get(slot)
                if then is None or then[0] is not seq:
                    continue
                upto = then[1]
            row = tokens[slot * stride: (slot + 1) * stride]
            n = len(seq.ids)
            while seq.shown < upto and not seq.done:
                t = int(row[n + seq.shown])
                seq.shown += 1
                seq.stream.token_ids.append(t)
                if t in stop_ids and not seq.ignore_eos:
                    seq.done = True
                    break
                piece = seq.decoder.feed(t)
                if piece:
                    seq.stream.pieces.append(piece)
            if seq.shown >= seq.max_new:
                seq.done = True
            if seq.done:
                tail = seq.decoder.flush()
                if tail:
                    seq.stream.pieces.append(tail)
                seq.stream.finished = True
                del self.seqs[slot]

    def step(self) -> int:
        """Run one step: prefill the sequences added since, decode every live one (one submit),
        read tokens back when due. Returns the number of sequences still live."""
        exe = self.executable
        runs = self._plan()
        for _, (_, feeds) in runs:
            exe.run(feeds, keep_on_device=True)
        now, finish, start = self._reads(runs)
        if now:
            self._consume(exe.read_state("tokens"))
        if finish and self._pending is not None:
            pending, self._pending = self._pending, None
            self._consume(exe.finish_read(pending[0]), pending[1])
        if start:
            self._start_read()
        return self.live

    async def step_async(self) -> int:
        """Async form of step()."""
        exe = self.executable
        await exe.ready_async()
        runs = self._plan()
        for _, (_, feeds) in runs:
            await exe.run_async(feeds, keep_on_device=True)
        now, finish, start = self._reads(runs)
        if now:
            self._consume(await exe.read_state_async("tokens"))
        if finish and self._pending is not None:
            pending, self._pending = self._pending, None
            self._consume(await exe.finish_read_async(pending[0]), pending[1])
        if start:
            self._start_read()
        return self.live

    def run(self) -> None:
        """Step until every sequence has finished."""
        while self.seqs:
            self.step()


def generate_batch(lm: LanguageModel, prompts: Sequence[str | Sequence[int]],
                   max_new_tokens: int = 128, sampling: Sampling | None = None,
                   ignore_eos: bool = False) -> list[str]:
    """The completions of prompts, decoded together on the model's latest Engine when it has
    enough free slots (its other sequences advance too), else on a new one with
    max_sequences = max(8, len(prompts)) and the model's max_context."""
    eng = getattr(lm, "_batch_engine", None)
    if eng is None or eng.max_sequences - eng.live < len(prompts):
        eng = Engine(lm, max_sequences=max(8, len(prompts)))
    streams = [eng.add_request(p, sampling, max_new_tokens, ignore_eos) for p in prompts]
    while not all(s.finished for s in streams):
        eng.step()
    return ["".join(s.pieces) for s in streams]


__all__ = ["Engine", "EngineFullError", "Stream", "build_batched", "generate_batch"]
