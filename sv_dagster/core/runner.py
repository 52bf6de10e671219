"""The eval runner: call the model on each task, score the reply with the task's own
rewards, append one JSON line per example as it finishes.

A failed model call or a scoring error is recorded on its example (reward `null`, error
text) and the run goes on; such examples are unscored, never counted as wrong answers.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import verifiers.v1 as vf

from sv_dagster.core.backends import Backend, CompletionFailed
from sv_dagster.core.traces import chat_messages, completion_trace


@dataclass(frozen=True)
class RunCounts:
    n: int
    n_scored: int
    n_model_errors: int
    n_scoring_errors: int


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


async def score_completion(task: vf.Task, completion: str, model: str | None = None) -> tuple[dict, dict, float]:
    """(reward scores, reward weights, weighted total) for one completion of `task`."""
    trace = completion_trace(task, completion, model)
    await task.score(trace)
    scores = {name: (r.score if r is not None else None) for name, r in trace.rewards.items()}
    weights = {name: (r.weight if r is not None else None) for name, r in trace.rewards.items()}
    return scores, weights, trace.reward


class _ResultsWriter:
    """Appends one line per example and flushes it, so a killed run keeps what finished."""

    def __init__(self, handle: TextIO) -> None:
        self.handle = handle
        self.lock = asyncio.Lock()

    async def write(self, row: dict[str, Any]) -> None:
        async with self.lock:
            self.handle.write(json.dumps(row, default=str) + "\n")
            self.handle.flush()


async def _run_one(
    task: vf.Task,
    backend: Backend,
    writer: _ResultsWriter,
    parse: Callable[[str], Any] | None,
    semaphore: asyncio.Semaphore,
) -> str:
    messages = chat_messages(task)
    row: dict[str, Any] = {
        "example_id": task.key,
        "idx": task.data.idx,
        "prompt": messages,
        "answer": getattr(task.data, "answer", None),
        "info": getattr(task.data, "info", {}),
        "completion": None,
        "parsed": None,
        "rewards": None,
        "reward_weights": None,
        "reward": None,
        "error": None,
        "error_kind": None,
        "usage": None,
        "latency_s": None,
        "attempts": None,
    }
    async with semaphore:
        try:
            completion = await backend.complete(messages)
        except CompletionFailed as exc:
            row.update(error=str(exc), error_kind="model", attempts=exc.attempts)
            await writer.write(row)
            return "model_error"
    row.update(
        completion=completion.text,
        usage=completion.usage,
        latency_s=round(completion.latency_s, 4),
        attempts=completion.attempts,
        finish_reason=completion.finish_reason,
    )
    if parse is not None:
        parsed = parse(completion.text)
        row["parsed"] = parsed.to_dict() if hasattr(parsed, "to_dict") else parsed
    try:
        scores, weights, total = await score_completion(task, completion.text, backend.spec.model)
    except Exception as exc:  # a verifier bug must not lose the completion we paid for
        row.update(error=f"scoring failed: {type(exc).__name__}: {exc}", error_kind="scoring")
        await writer.write(row)
        return "scoring_error"
    row.update(rewards=scores, reward_weights=weights, reward=_finite(total))
    await writer.write(row)
    return "scored"


async def run_eval(
    tasks: Sequence[vf.Task],
    backend: Backend,
    results_path: Path,
    *,
    concurrency: int = 4,
    parse: Callable[[str], Any] | None = None,
) -> RunCounts:
    """Evaluate `tasks` with `backend`, appending to `results_path` (JSONL). Call
    `backend.preflight()` first to fail early on an unreachable endpoint."""
    semaphore = asyncio.Semaphore(max(1, concurrency))
    results_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with results_path.open("a", encoding="utf-8") as handle:
            writer = _ResultsWriter(handle)
            outcomes = await asyncio.gather(
                *(_run_one(task, backend, writer, parse, semaphore) for task in tasks)
            )
    finally:
        await backend.aclose()
    return RunCounts(
        n=len(outcomes),
        n_scored=outcomes.count("scored"),
        n_model_errors=outcomes.count("model_error"),
        n_scoring_errors=outcomes.count("scoring_error"),
    )


def read_results(results_path: Path) -> list[dict[str, Any]]:
    with results_path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]
