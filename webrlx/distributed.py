"""Scale-out on Ray (the optional extra, `pip install webrlx[ray]`): Ray Data moves the rows
through actors that each own one webrlx model on one device (`embed`, `generate`); Ray Serve
runs the OpenAI-compatible server as replicas behind one endpoint (`serve_app`).

    import ray, webrlx.distributed as wd
    ds = ray.data.read_parquet("corpus/")                 # a "text" column
    wd.embed(ds, concurrency=2, num_gpus=1).write_parquet("out/")

Row policy: every output row keeps its `id` (unique int64s added when the input has none)
and gets an `error` column: None where the row was processed, else why not (not text, empty,
over the model's context); its embedding is then NaN and its completion None. `strict=True`
fails the job instead, naming the row. An actor that dies (killed, device lost) is restarted
by Ray and its batches retried (`max_restarts`, `max_task_retries`).
Ray is imported by these functions only: `import webrlx` never imports it.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

ID = "id"
ERROR = "error"
EMBEDDING = "embedding"
COMPLETION = "completion"


class RowError(ValueError):
    """A row that cannot be processed, under strict=True (the message names its id)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ImportError("webrlx.distributed needs Ray: pip install 'webrlx[ray]'") from None
    return ray


def _text_error(text: Any) -> str | None:
    """Why `text` is not a row the models take, or None."""
    if not isinstance(text, str):
        return f"not text: a {type(text).__name__}"
    if not text.strip():
        return "empty text"
    return None


def _raise_if_strict(errors: list[str | None], ids: Any, strict: bool) -> None:
    bad = next((i for i, e in enumerate(errors) if e is not None), None)
    if strict and bad is not None:
        row_id = ids[bad].item() if isinstance(ids[bad], np.generic) else ids[bad]
        raise RowError(f"row id {row_id!r}: {errors[bad]} (strict=True fails the job; "
                       f"without it the row gets an '{ERROR}' column and the job goes on)")


def gpu_for(ids: list[Any], adapters: int) -> str:
    """The webrlx device ("gpu:N") of the first of the GPU ids Ray assigned a worker, when the
    driver lists `adapters` adapters of the default kind. Vulkan drivers list every GPU of the
    host whatever CUDA_VISIBLE_DEVICES says, in PCI order (CUDA's order with
    CUDA_DEVICE_ORDER=PCI_BUS_ID): the id is the adapter index. A driver that lists only the
    visible GPUs (as many adapters as ids) gets gpu:0."""
    first = str(ids[0])
    if not first.isdigit():
        raise RuntimeError(f"actor_device(): Ray assigned GPU {first!r}, not an index; start "
                           f"Ray with CUDA_VISIBLE_DEVICES as indices, or pass device='gpu:N'")
    if int(first) < adapters:
        return f"gpu:{first}"
    if adapters == len(ids):
        return "gpu:0"
    raise RuntimeError(f"actor_device(): Ray assigned GPU {first} but the driver lists "
                       f"{adapters} adapters; pass device='gpu:N'")


def actor_device(device: str | None = None) -> str | None:
    """The webrlx device of this Ray worker: `device` when given; else, in an actor or task
    that reserved GPUs (num_gpus >= 1), the adapter of the first GPU id Ray assigned it
    (ray.get_gpu_ids(), the ids of CUDA_VISIBLE_DEVICES; see gpu_for), so that two actors on
    a 2-GPU host use different GPUs; else None (the default adapter)."""
    if device is not None:
        return device
    try:
        import ray
        ids = ray.get_gpu_ids() if ray.is_initialized() else []
    except ImportError:
        return None
    if not ids:
        return None
    from .backends.wgpu_native import gpu_adapters
    return gpu_for(list(ids), len(gpu_adapters()))


class Embedder:
    """A Ray Data callable class: one MiniLM encoder on this actor's device; a batch of rows in,
    the same rows with `embedding` (n, 384) and `error` columns out."""

    def __init__(self, model: str | None = "minilm", text_column: str = "text",
                 batch_size: int = 32, strict: bool = False, device: str | None = None) -> None:
        from .models import minilm
        self.device = actor_device(device)
        self.encoder = minilm.load(None if model in (None, "minilm") else model,
                                   device=self.device)
        self.text_column, self.batch_size, self.strict = text_column, batch_size, strict

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from .models.minilm import MAX_LENGTH
        texts = list(batch[self.text_column])
        errors = [_text_error(t) for t in texts]
        encode = self.encoder.tokenizer.encode
        rows = [encode(t, None) if e is None else [] for t, e in zip(texts, errors)]
        for i, row in enumerate(rows):      # tokenized once: the check's ids are encoded
            if errors[i] is None and len(row) > MAX_LENGTH:
                errors[i] = f"over the context: more than {MAX_LENGTH} tokens"
        _raise_if_strict(errors, batch[ID], self.strict)
        good = [i for i, e in enumerate(errors) if e is None]
        emb = np.full((len(texts), self.encoder.config.hidden_size), np.nan, np.float32)
        if good:
            emb[good] = self.encoder.encode_ids([rows[i] for i in good], self.batch_size)
        return {**batch, EMBEDDING: emb, ERROR: np.array(errors, dtype=object)}


class Generator:
    """A Ray Data callable class: one GGUF language model on this actor's device; a batch of
    prompts in, `completion` and `error` columns out. The batch's prompts are decoded together
    on the batched engine (LanguageModel.generate_batch), or one at a time with a repetition
    penalty (the engine has none)."""

    def __init__(self, model: str, prompt_column: str = "prompt", chat: bool = False,
                 max_new_tokens: int = 128, sampling: dict[str, Any] | None = None,
                 strict: bool = False, device: str | None = None,
                 max_context: int | None = None) -> None:
        from .models import llm
        self.device = actor_device(device)
        self.lm = llm.load(model, device=self.device, max_context=max_context)
        self.prompt_column, self.chat, self.strict = prompt_column, chat, strict
        self.max_new_tokens, self.sampling = max_new_tokens, dict(sampling or {})
        llm.Sampling(**self.sampling).check()

    def _prompt(self, row: Any) -> str:
        if self.chat:
            return self.lm.render_chat([{"role": "user", "content": row}])
        return row

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        prompts = list(batch[self.prompt_column])
        errors = [_text_error(p) for p in prompts]
        ids: list[list[int] | None] = [None] * len(prompts)
        for i, p in enumerate(prompts):
            if errors[i] is None:
                row = ids[i] = self.lm.tokenizer.encode(self._prompt(p))
                if len(row) + self.max_new_tokens > self.lm.capacity:
                    errors[i] = (f"over the context: {len(row)} prompt tokens + "
                                 f"{self.max_new_tokens} new > {self.lm.capacity}")
        _raise_if_strict(errors, batch[ID], self.strict)
        out: list[str | None] = [None] * len(prompts)
        good = {i: row_ids for i, row_ids in enumerate(ids)
                if errors[i] is None and row_ids is not None}
        if good and self.sampling.get("repetition_penalty", 1.0) == 1.0:
            from .models.llm import Sampling
            texts = self.lm.generate_batch(list(good.values()), self.max_new_tokens,
                                           Sampling(**self.sampling))
            for i, text in zip(good, texts):
                out[i] = text
        else:
            for i, row_ids in good.items():
                out[i] = self.lm.generate(row_ids, self.max_new_tokens, **self.sampling)
        return {**batch, COMPLETION: np.array(out, dtype=object),
                ERROR: np.array(errors, dtype=object)}


def with_ids(dataset: Any) -> Any:
    """The dataset with an `id` column (unique int64s) unless it has one."""
    from ray.data.expressions import monotonically_increasing_id
    if ID in (dataset.columns() or []):
        return dataset
    return dataset.with_column(ID, monotonically_increasing_id())


def _map(dataset: Any, cls: type, kwargs: dict[str, Any], batch_size: int, concurrency: int,
         num_gpus: float, num_cpus: float, max_restarts: int, max_task_retries: int) -> Any:
    ray = _ray()
    for name, v in (("batch_size", batch_size), ("concurrency", concurrency)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{cls.__name__.lower()}(): {name} must be an int >= 1, "
                             f"got {v!r}")
    return with_ids(dataset).map_batches(
        cls, fn_constructor_kwargs=kwargs, batch_size=batch_size, batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=concurrency), num_gpus=num_gpus,
        num_cpus=num_cpus,
        max_restarts=max_restarts, max_task_retries=max_task_retries)


def embed(dataset: Any, model: str = "minilm", *, text_column: str = "text",
          batch_size: int = 256, encode_batch_size: int = 32, concurrency: int = 1,
          num_gpus: float = 0, num_cpus: float = 1, strict: bool = False,
          device: str | None = None,
          max_restarts: int = -1, max_task_retries: int = -1) -> Any:
    """Return `dataset` with `embedding` (384 floats, L2-normalized) and `error` columns.

    Args:
        dataset: a ray.data.Dataset with a text column (and optionally `id`).
        model: "minilm" (the installed all-MiniLM-L6-v2) or a directory with its files.
        text_column: the column to embed.
        batch_size: rows per Ray Data batch (one task of an actor).
        encode_batch_size: rows per GPU submit inside an actor.
        concurrency: actors (each one model on one device).
        num_gpus: GPUs each actor reserves (1 on a GPU cluster, 0 on a CPU box).
        num_cpus: CPUs each actor reserves (leave some to the read and write tasks).
        strict: fail the job on the first bad row (naming its id) instead of marking it.
        device: the actors' webrlx device (None: the GPU Ray assigned each actor, see
            actor_device, else the default adapter; "gpu:N"; "reference").
        max_restarts: restarts of a dead actor (-1: unlimited).
        max_task_retries: retries of a dead actor's batches (-1: unlimited).
    """
    kwargs = {"model": model, "text_column": text_column, "batch_size": encode_batch_size,
              "strict": strict, "device": device}
    return _map(dataset, Embedder, kwargs, batch_size, concurrency, num_gpus, num_cpus,
                max_restarts, max_task_retries)


def generate(dataset: Any, model: str | os.PathLike[str], *, prompt_column: str = "prompt",
             chat: bool = False, max_new_tokens: int = 128, temperature: float = 0.0,
             top_k: int = 0, top_p: float = 1.0, repetition_penalty: float = 1.0,
             seed: int = 0, batch_size: int = 16, concurrency: int = 1, num_gpus: float = 0,
             num_cpus: float = 1,
             strict: bool = False, device: str | None = None, max_context: int | None = None,
             max_restarts: int = -1, max_task_retries: int = -1) -> Any:
    """Return `dataset` with `completion` and `error` columns (each actor decodes a batch's
    prompts together on the batched engine; one at a time with a repetition penalty).

    Args:
        dataset: a ray.data.Dataset with a prompt column (and optionally `id`).
        model: a .gguf file every actor can read.
        prompt_column: the column of prompts.
        chat: wrap each prompt as one user message in the model's chat template.
        max_new_tokens: as in LanguageModel.stream().
        temperature: as in LanguageModel.stream().
        top_k: as in LanguageModel.stream().
        top_p: as in LanguageModel.stream().
        repetition_penalty: as in LanguageModel.stream().
        seed: as in LanguageModel.stream().
        batch_size: rows per Ray Data batch.
        concurrency: actors (each one model on one device).
        num_gpus: GPUs each actor reserves.
        num_cpus: CPUs each actor reserves.
        strict: fail the job on the first bad row instead of marking it.
        device: the actors' webrlx device (None: the GPU Ray assigned each actor, see
            actor_device, else the default adapter).
        max_context: KV cache positions of each actor's model.
        max_restarts: restarts of a dead actor (-1: unlimited).
        max_task_retries: retries of a dead actor's batches (-1: unlimited).
    """
    sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p,
                "repetition_penalty": repetition_penalty, "seed": seed}
    kwargs = {"model": os.fspath(model), "prompt_column": prompt_column, "chat": chat,
              "max_new_tokens": max_new_tokens, "sampling": sampling, "strict": strict,
              "device": device, "max_context": max_context}
    return _map(dataset, Generator, kwargs, batch_size, concurrency, num_gpus, num_cpus,
                max_restarts, max_task_retries)


def serve_app(model: str | os.PathLike[str], num_replicas: int = 1, *, num_gpus: float = 0,
              embedding_model: str | None = "minilm", max_queue: int = 8,
              max_context: int | None = None, max_sequences: int = 8,
              engine_factory: Any = None) -> Any:
    """A Ray Serve application: `num_replicas` copies of the OpenAI-compatible app
    (webrlx.openai_api), each with its own models on one device (the GPU Ray assigned the
    replica, see actor_device), behind Serve's one HTTP endpoint. Run it with
    `ray.serve.run(serve_app("model.gguf", 2, num_gpus=1))`.

    Args:
        model: a .gguf file every replica can read.
        num_replicas: replicas (one per GPU on a GPU cluster).
        num_gpus: GPUs each replica reserves.
        embedding_model: "minilm", a MiniLM directory, or None (no /v1/embeddings).
        max_queue: requests each replica lets wait for a free sequence slot (then 429).
        max_context: KV positions per sequence of each replica's model.
        max_sequences: sequences each replica's batched engine decodes at once.
        engine_factory: a test and bench hook, as create_app's (picklable).
    """
    _ray()
    from ray import serve

    def build() -> Any:
        """The replica's app, built and its models loaded on the replica."""
        from .openai_api import create_app
        app = create_app(os.fspath(model), embedding_model, max_queue, max_context,
                         max_sequences, device=actor_device(None),
                         engine_factory=engine_factory)
        app.state.server.load()
        return app

    @serve.deployment(num_replicas=num_replicas, ray_actor_options={"num_gpus": num_gpus},
                      max_ongoing_requests=max_sequences + max_queue + 1)
    @serve.ingress(build)
    class OpenAIServer:
        """One replica of the OpenAI-compatible app."""

    return OpenAIServer.bind()   # type: ignore[attr-defined]
