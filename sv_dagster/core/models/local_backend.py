"""The `local` backend: a checkpoint folder (or a Hugging Face id) served in-process with
transformers, for CPU evaluation of trained checkpoints and the safety review.

Concurrent requests from the runner are gathered into batches (one `generate` call per
batch in a worker thread), so an eval of hundreds of examples runs a few dozen forward passes
per token, not hundreds. The leading tokens every prompt of a batch shares (an eval's system
prompt) are computed once and their cache repeated for every row, through the model server's
own `sv_dagster.core.models.batching.generate_shared`: prefilling the prompts is most of an
eval's compute on CPU. Decoding is greedy at temperature 0, sampled otherwise with the registry's seed.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from sv_dagster.core.models.batching import generate_shared
from sv_dagster.core.models.completion import BackendConfigError, BackendUnavailable, Completion
from sv_dagster.core.models.registry import ModelSpec

MAX_BATCH = 32


@dataclass
class _Request:
    messages: list[dict[str, Any]]
    future: asyncio.Future[tuple[str, int, int, str]]


class LocalTransformersBackend:
    def __init__(
        self, spec: ModelSpec, checkpoint: str | os.PathLike[str] | None = None, max_batch: int = MAX_BATCH
    ) -> None:
        self.spec = spec
        self.source = str(checkpoint or spec.model)
        if not self.source:
            raise BackendConfigError(f"model {spec.name!r}: local backend needs a checkpoint folder or model id")
        self.max_batch = max_batch
        self._model: Any = None
        self._tokenizer: Any = None
        self._load_lock = threading.Lock()
        self._queue: asyncio.Queue[_Request] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _load(self) -> None:
        with self._load_lock:
            if self._model is not None:
                return
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            try:
                tokenizer = AutoTokenizer.from_pretrained(self.source)
                model = AutoModelForCausalLM.from_pretrained(self.source, dtype=torch.float32)
            except OSError as exc:
                raise BackendUnavailable(f"model {self.spec.name!r}: cannot load {self.source}: {exc}") from exc
            if tokenizer.pad_token is None:
                tokenizer.pad_token = tokenizer.eos_token
            tokenizer.padding_side = "left"
            model.eval()
            self._tokenizer, self._model = tokenizer, model

    async def preflight(self) -> None:
        """Load the weights now: a missing or broken checkpoint fails before any example."""
        await asyncio.to_thread(self._load)

    def _generate(self, batch: list[list[dict[str, Any]]]) -> list[tuple[str, int, int, str]]:
        import copy

        import torch

        self._load()
        s = self.spec.sampling
        tokenizer, model = self._tokenizer, self._model
        rows = [
            torch.tensor(
                tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=False)
            )
            for messages in batch
        ]
        sample = bool(s.temperature and s.temperature > 0)
        config = copy.deepcopy(model.generation_config)  # what `generate(**options)` would start from
        config.update(
            max_new_tokens=s.max_tokens,
            do_sample=sample,
            temperature=s.temperature if sample else None,
            top_p=s.top_p if sample else None,
            top_k=None,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        if sample and s.seed is not None:
            torch.manual_seed(s.seed)
        masks = [torch.ones_like(row) for row in rows]
        output, width = generate_shared(model, rows, masks, tokenizer.pad_token_id, config)
        results = []
        for generated, row in zip(output, rows):
            new = generated[width:]
            finished = (new == tokenizer.eos_token_id).nonzero()
            length = int(finished[0]) + 1 if len(finished) else len(new)
            text = tokenizer.decode(new[:length], skip_special_tokens=True)
            results.append((text, len(row), length, "stop" if len(finished) else "length"))
        return results

    async def _serve(self) -> None:
        assert self._queue is not None
        while True:
            first = await self._queue.get()
            batch = [first]
            while len(batch) < self.max_batch and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                results = await asyncio.to_thread(self._generate, [r.messages for r in batch])
            except Exception as exc:  # every waiting request sees the failure
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(exc)
                continue
            for request, result in zip(batch, results):
                if not request.future.done():
                    request.future.set_result(result)

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Completion:
        """The model's reply; `tools` are not offered (the local models do not call tools)."""
        start = time.perf_counter()
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._worker is None or self._worker.done():
            # One batching worker per event loop (each `asyncio.run` of the runner is a new one).
            self._loop, self._queue = loop, asyncio.Queue()
            self._worker = loop.create_task(self._serve())
        future = loop.create_future()
        assert self._queue is not None
        await self._queue.put(
            _Request([{"role": m["role"], "content": m.get("content") or ""} for m in messages], future)
        )
        await asyncio.sleep(0)  # let concurrent callers enqueue before the batch is cut
        text, prompt_tokens, completion_tokens, finish = await future
        return Completion(
            text=text,
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            latency_s=time.perf_counter() - start,
            finish_reason=finish,
        )

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            self._worker = None
