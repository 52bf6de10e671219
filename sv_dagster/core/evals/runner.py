"""The eval runner: call the model on each task, score the reply with the task's own
rewards, append one JSON line per example as it finishes.

A failed model call or a scoring error is recorded on its example (reward `null`, error
text) and the run goes on; such examples are unscored, never counted as wrong answers.
Every row passes the one redaction step (`core.artifacts.redaction`) on its way to disk.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sv_dagster.core.artifacts.redaction import redact_text
from sv_dagster.core.evals.errors import RESUMABLE_ERRORS, ErrorKind
from sv_dagster.core.evals.triage import is_refusal
from sv_dagster.core.models.completion import SettlingBackend
from sv_shared import textrefs
from sv_shared.capabilities import DetailedTask, DialogueTask, FastScoringTask, ToolTask, WithholdingTask

if TYPE_CHECKING:  # verifiers and openai take seconds to import; readers of results.jsonl need neither
    import verifiers.v1 as vf

    from sv_dagster.core.models.completion import Backend


@dataclass(frozen=True)
class RunCounts:
    n: int
    """Examples run by this call."""
    n_scored: int
    n_model_errors: int
    n_scoring_errors: int
    n_resumed: int = 0
    """Examples already finished in results.jsonl and skipped (resume)."""
    n_counterpart_errors: int = 0
    n_judge_errors: int = 0

    @property
    def n_errors(self) -> int:
        """Examples of this call left unscored, of any `ErrorKind`."""
        return sum(getattr(self, kind.counter) for kind in ErrorKind)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def is_dialogue(task: Any) -> bool:
    """A multi-turn task: the runner plays its conversation (`task.respond`) up to `task.max_turns`."""
    return isinstance(task, DialogueTask)


_Scores = tuple[Mapping[str, float | None], Mapping[str, float | None], float]
"""(reward scores, reward weights, weighted total) of one completion."""


async def score_completion(
    task: vf.Task, completion: str, model: str | None = None, turns: list[dict[str, Any]] | None = None
) -> _Scores:
    """(reward scores, reward weights, weighted total) for one completion of `task`;
    `turns` are the tool-calling turns before it (assistant tool calls and tool results)
    or, for a dialogue task, the whole conversation after the prompt (which ends with or
    after `completion`)."""
    from sv_dagster.core.evals.traces import completion_trace

    trace = completion_trace(task, None if is_dialogue(task) else completion, model, turns)
    await task.score(trace)
    scores = {name: (r.score if r is not None else None) for name, r in trace.rewards.items()}
    weights = {name: (r.weight if r is not None else None) for name, r in trace.rewards.items()}
    return scores, weights, trace.reward


def _shortcut_scores(task: Any, completion: str, turns: list[dict[str, Any]] | None) -> _Scores | None:
    """`score_completion`'s numbers from the task's own `fast_score(completion)`, where the
    task offers one, for a single reply with no turns before it (what such a shortcut
    models); None sends the row the full way. Verifiers' trace bookkeeping costs several
    times what E4's rewards do. A shortcut that fails is not trusted: the full path then
    decides what the row records."""
    if not isinstance(task, FastScoringTask) or turns or is_dialogue(task):
        return None
    try:
        return task.fast_score(completion)
    except Exception:
        return None


class _ResultsWriter:
    """Appends one line per example and flushes it, so a killed run keeps what finished."""

    def __init__(self, handle: TextIO) -> None:
        self.handle = handle
        self.lock = asyncio.Lock()

    async def write(self, row: dict[str, Any]) -> None:
        line = redact_text(json.dumps(textrefs.referenced_again(row), default=str))
        async with self.lock:
            self.handle.write(line + "\n")
            self.handle.flush()


def task_tools(task: vf.Task) -> tuple[list[Any], int]:
    """The tools a task offers the model and its tool-call budget (none for single-turn tasks)."""
    if isinstance(task, ToolTask):
        return list(task.tool_functions()), task.tool_budget
    if hasattr(task, "tool_functions"):  # half a ToolTask: say so rather than guess a budget
        raise TypeError(
            f"{type(task).__name__} offers tool_functions but no tool_budget (sv_shared.capabilities.ToolTask)"
        )
    return [], 0


def _add_usage(total: dict[str, int] | None, usage: dict[str, int] | None) -> dict[str, int] | None:
    if usage is None:
        return total
    total = dict(total or {})
    for name, value in usage.items():
        total[name] = total.get(name, 0) + (value or 0)
    return total


def _settle(backend: Backend, replies: list[Any], outcome: str) -> None:
    """Tell a caching backend which replies were scored (only those are stored)."""
    if isinstance(backend, SettlingBackend):
        backend.settle(replies, outcome == "scored")


async def _run_one(
    task: vf.Task,
    backend: Backend,
    writer: _ResultsWriter,
    parse: Callable[[str], Any] | None,
    price: Callable[[dict[str, Any] | None], float | None],
    use_tools: bool = True,
    counterpart: Backend | None = None,
    observe: Callable[[dict[str, Any]], None] | None = None,
) -> str:
    from sv_dagster.core.evals.toolcalls import ToolBox
    from sv_dagster.core.models.completion import CompletionFailed
    from sv_shared.sft import chat_messages

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
        "refusal": None,
        "usage": None,
        "cost_usd": None,
        "latency_s": None,
        "attempts": None,
    }
    test_source = (row["info"] or {}).get("test_source") if isinstance(row["info"], dict) else None
    if test_source:  # a test-only corpus's row: summaries and tables score it under that name
        row["test_source"] = str(test_source)
    if is_dialogue(task):
        return await _run_dialogue(task, backend, counterpart, writer, row, messages, parse, price, observe)
    functions, budget = task_tools(task) if use_tools else ([], 0)
    toolbox = ToolBox(functions) if functions else None
    schemas = toolbox.schemas() if toolbox else None
    turns: list[dict[str, Any]] = []
    usage: dict[str, int] | None = None
    costs: list[float | None] = []
    latency = 0.0
    attempts = 0
    all_cached = True
    replies: list[Any] = []
    while True:
        # Tools are offered while budget is left; then the model must answer.
        offer = schemas if toolbox is not None and len(toolbox.calls) < budget else None
        try:
            completion = await backend.complete(messages + turns, offer)
        except CompletionFailed as exc:
            row.update(error=str(exc), error_kind=ErrorKind.MODEL, attempts=attempts + exc.attempts)
            if turns:
                row["turns"] = turns
            _settle(backend, replies, ErrorKind.MODEL)
            await writer.write(row)
            return ErrorKind.MODEL
        replies.append(completion)
        usage = _add_usage(usage, completion.usage)
        costs.append(0.0 if completion.cached else price(completion.usage))  # a cache hit costs nothing
        latency += completion.latency_s
        attempts += completion.attempts
        all_cached = all_cached and completion.cached
        if not (offer and completion.tool_calls):
            break
        assert toolbox is not None  # tools are offered only from a toolbox
        calls = list(completion.tool_calls)[: budget - len(toolbox.calls)]
        turns.append({"role": "assistant", "content": completion.text or None, "tool_calls": calls})
        for call in calls:
            function = call.get("function") or {}
            result = await toolbox.call(str(function.get("name")), str(function.get("arguments") or ""))
            turns.append(
                {"role": "tool", "tool_call_id": call.get("id") or "", "name": function.get("name"), "content": result}
            )
    row.update(
        completion=completion.text,
        usage=usage,
        cost_usd=_total_cost(costs),
        latency_s=round(latency, 4),
        attempts=attempts,
        finish_reason=completion.finish_reason,
        cached=all_cached,
    )
    if toolbox is not None:
        row.update(turns=turns, tool_calls=toolbox.calls)
    outcome = await score_row(row, task, completion.text, parse, backend.spec.model)
    _settle(backend, replies, outcome)
    await writer.write(row)
    return outcome


def _total_cost(costs: list[float | None]) -> float | None:
    """What the calls cost together; None when one of them was unpriced."""
    priced = [cost for cost in costs if cost is not None]
    return None if len(priced) < len(costs) else sum(priced)


class CounterpartFailed(RuntimeError):
    """The other side of a dialogue (E5's target model) failed for good."""


async def _run_dialogue(
    task: Any,
    backend: Backend,
    counterpart: Backend | None,
    writer: _ResultsWriter,
    row: dict[str, Any],
    prompt: list[dict[str, Any]],
    parse: Callable[[str], Any] | None,
    price: Callable[[dict[str, Any] | None], float | None],
    observe: Callable[[dict[str, Any]], None] | None = None,
) -> str:
    """Play a multi-turn task: the model under evaluation speaks, the task answers (a
    scripted user turn, or the counterpart model through `task.respond`), up to
    `task.max_turns` model turns. Failures of either side or of the judge end the
    dialogue unscored; every stored row passes `task.withhold_unsafe` first. `observe`
    sees the row in memory before that (the tournament keeps successful attacks this way,
    never on disk)."""
    from sv_dagster.core.models.completion import CompletionFailed

    conversation = list(prompt)
    usage: dict[str, int] | None = None
    costs: list[float | None] = []
    latency, attempts, counterpart_calls = 0.0, 0, 0

    async def other_side(messages: list[dict[str, Any]]) -> str:
        nonlocal counterpart_calls
        counterpart_calls += 1
        assert counterpart is not None  # the task is handed other_side only with a counterpart
        try:
            return (await counterpart.complete(messages)).text
        except CompletionFailed as exc:
            raise CounterpartFailed(str(exc)) from exc

    outcome, completion = "", ""
    replies: list[Any] = []
    for turn in range(1, max(1, int(task.max_turns)) + 1):
        try:
            reply = await backend.complete(conversation)
        except CompletionFailed as exc:
            row.update(
                error=f"model failed at turn {turn}: {exc}",
                error_kind=ErrorKind.MODEL,
                attempts=attempts + exc.attempts,
            )
            outcome = ErrorKind.MODEL
            break
        replies.append(reply)
        usage = _add_usage(usage, reply.usage)
        costs.append(0.0 if reply.cached else price(reply.usage))
        latency += reply.latency_s
        attempts += reply.attempts
        completion = reply.text or ""
        conversation.append({"role": "assistant", "content": completion})
        try:
            answer, over = await task.respond(conversation, other_side if counterpart is not None else None)
        except CounterpartFailed as exc:
            row.update(error=f"target model failed at turn {turn}: {exc}", error_kind=ErrorKind.COUNTERPART)
            outcome = ErrorKind.COUNTERPART
            break
        except Exception as exc:  # the judge (a classifier endpoint) or the task itself
            row.update(error=f"dialogue failed at turn {turn}: {type(exc).__name__}: {exc}", error_kind=ErrorKind.JUDGE)
            outcome = ErrorKind.JUDGE
            break
        if answer is not None:
            conversation.append({"role": "user", "content": answer})
        if over or answer is None:
            break
    row.update(
        completion=completion,
        turns=conversation[len(prompt) :],
        usage=usage,
        cost_usd=_total_cost(costs),
        latency_s=round(latency, 4),
        attempts=attempts,
        counterpart_calls=counterpart_calls,
    )
    if not outcome:
        outcome = await score_row(row, task, completion, parse, backend.spec.model)
    _settle(backend, replies, outcome)
    if observe is not None:
        observe(copy.deepcopy(row))
    await withhold_unsafe(task, row)
    await writer.write(row)
    return outcome


async def withhold_unsafe(task: Any, row: dict[str, Any]) -> None:
    """Let the task swap text its safety judge marks unsafe for hash markers before the
    row is stored. If the judge cannot be asked, no conversation text is stored at all."""
    if not isinstance(task, WithholdingTask):
        return
    try:
        row["withheld_texts"] = await task.withhold_unsafe(row)
    except Exception as exc:
        dropped = f"[text dropped: the safety judge failed ({type(exc).__name__})]"
        for field_name in ("prompt", "turns"):
            row[field_name] = [
                {**m, "content": dropped} if m.get("role") != "system" else m for m in row.get(field_name) or []
            ]
        row["completion"] = dropped if row.get("completion") else row.get("completion")
        row["withheld_texts"] = None
        row.setdefault("notes", []).append(f"conversation text dropped: the safety judge failed: {exc}"[:500])


async def score_row(
    row: dict[str, Any],
    task: vf.Task,
    completion: str,
    parse: Callable[[str], Any] | None,
    model: str | None,
    *,
    shortcut: bool = True,
) -> str:
    """Fill `row`'s parsed answer, rewards and total for `completion`; a scoring failure is
    recorded on the row (the completion we paid for is kept). Returns the outcome. The
    numbers come from the task's `fast_score` where it offers one (see `_shortcut_scores`);
    `shortcut=False` always scores through verifiers (the reference the shortcut must equal)."""
    try:
        if parse is not None:
            parsed = parse(completion)
            row["parsed"] = parsed.to_dict() if hasattr(parsed, "to_dict") else parsed
        # Refusals are their own column, not just a wrong answer (they are scored all the same).
        row["refusal"] = is_refusal(completion, row.get("parsed"))
        scored = _shortcut_scores(task, completion, row.get("turns")) if shortcut else None
        if scored is None:
            scored = await score_completion(task, completion, model, row.get("turns"))
        scores, weights, total = scored
    except Exception as exc:  # a verifier bug must not lose the example
        row.update(
            rewards=None,
            reward_weights=None,
            reward=None,
            error=f"scoring failed: {type(exc).__name__}: {str(exc)[:500]}",
            error_kind=ErrorKind.SCORING,
        )
        return ErrorKind.SCORING
    row.update(rewards=scores, reward_weights=weights, reward=_finite(total), error=None, error_kind=None)
    if isinstance(task, DetailedTask):  # what the verifier found (tool results, test runs)
        try:
            row["details"] = (
                task.details(completion, turns=row.get("turns")) if is_dialogue(task) else task.details(completion)
            )
        except Exception as exc:
            row["details"] = {"error": f"{type(exc).__name__}: {exc}"}
    return "scored"


def compact_results(results_path: Path) -> set[str]:
    """Keep the finished examples of an interrupted run and return their ids.

    Finished = a complete JSON line that is scored or failed in scoring (its completion is
    kept; `rescore` can redo it). A torn last line (the process was killed mid-write) and
    model, target-model and judge failures are dropped, so resuming runs them again; the file is rewritten
    atomically, so a second interruption cannot lose what was kept.
    """
    if not results_path.exists():
        return set()
    kept: dict[str, str] = {}
    with results_path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and row.get("example_id") and row.get("error_kind") not in RESUMABLE_ERRORS:
                kept[row["example_id"]] = line if line.endswith("\n") else line + "\n"
    tmp = results_path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(kept.values()), encoding="utf-8")
    os.replace(tmp, results_path)
    return set(kept)


async def run_eval(
    tasks: Iterable[vf.Task],
    backend: Backend,
    results_path: Path,
    *,
    concurrency: int = 4,
    parse: Callable[[str], Any] | None = None,
    resume: bool = False,
    price: Callable[[dict[str, Any] | None], float | None] = lambda usage: None,
    use_tools: bool = True,
    counterpart: Backend | None = None,
    observe: Callable[[dict[str, Any]], None] | None = None,
    progress: Callable[[RunCounts], None] | None = None,
) -> RunCounts:
    """Evaluate `tasks` with `backend`, appending one line per example to `results_path`.

    `price(usage)` gives each call's cost (None when unpriced). Tasks that offer tools
    (`task.tool_functions()`) run a tool-calling loop up to `task.tool_budget` calls, unless
    `use_tools` is off. Dialogue tasks (`task.respond`) are played turn by turn; `counterpart`
    is the model on the other side when the task needs one (E5's target). `concurrency` workers pull tasks from one iterator, so memory does not grow with the
    number of examples. With `resume`, examples already finished in the file are skipped
    (see `compact_results`); without it the file starts empty. `progress` gets the counts so
    far once before the first example (the resumed ones) and after each example. Call
    `backend.preflight()` first to fail early on an unreachable endpoint.
    """
    if results_path.exists() and not results_path.is_file():  # never unlink /dev/null or a folder
        raise ValueError(f"results path {results_path} exists and is not a regular file")
    results_path.parent.mkdir(parents=True, exist_ok=True)
    if resume:
        finished = compact_results(results_path)
    else:
        results_path.unlink(missing_ok=True)
        finished = set()
    pending = (task for task in tasks if task.key not in finished)
    outcomes: Counter[str] = Counter()

    def counts() -> RunCounts:
        return RunCounts(
            n=sum(outcomes.values()),
            n_scored=outcomes["scored"],
            n_resumed=len(finished),
            **{kind.counter: outcomes[kind] for kind in ErrorKind},
        )

    if progress is not None:
        progress(counts())
    try:
        with results_path.open("a", encoding="utf-8") as handle:
            writer = _ResultsWriter(handle)

            async def worker() -> None:
                for task in pending:  # shared iterator: each worker takes the next task
                    outcomes[await _run_one(task, backend, writer, parse, price, use_tools, counterpart, observe)] += 1
                    if progress is not None:
                        progress(counts())

            await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    finally:
        await backend.aclose()
        if counterpart is not None:
            await counterpart.aclose()
    return counts()


def read_results(results_path: Path, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The rows of a results.jsonl; `drop` leaves out bulky fields (a 100k-example
    summary does not need 100k prompts in memory)."""
    rows = []
    with results_path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                for name in drop:
                    row.pop(name, None)
                rows.append(row)
    return rows


SUMMARY_DROP = ("prompt", "info", "turns")
"""Fields no summary reads."""
