"""What a task may offer beyond verifiers' `Task`. The eval runner and the trainers ask a task
through these protocols, never by attribute name, so a task that offers half of one (tools but
no budget) is a type error, not a silent default."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]
Scores = tuple[dict[str, float], dict[str, float], float]
"""Reward scores, reward weights and the weighted total."""


@runtime_checkable
class DialogueTask(Protocol):
    """A multi-turn task: the runner plays its conversation, asking `respond` for the other
    side's next message after each model reply, up to `max_turns` replies."""

    @property
    def max_turns(self) -> int: ...

    async def respond(self, conversation: list[Message], counterpart: Any) -> tuple[str | None, bool]:
        """The next message to the model and whether the conversation is over."""
        ...


@runtime_checkable
class ToolTask(Protocol):
    """A task that offers the model tools, at most `tool_budget` calls a rollout."""

    @property
    def tool_budget(self) -> int: ...

    def tool_functions(self) -> list[Callable[..., Awaitable[str]]]: ...


@runtime_checkable
class FastScoringTask(Protocol):
    """A task that scores a lone reply without verifiers' trace bookkeeping; None (or an
    exception) sends the reply the full way."""

    def fast_score(self, completion: str | None) -> Scores | None: ...


@runtime_checkable
class DetailedTask(Protocol):
    """A task that reports what its verifier found for the reply just scored (tool results,
    test runs, a conversation's judgement); a dialogue task is also given its turns."""

    def details(self, completion: str | None, turns: list[Message] | None = None) -> dict[str, Any] | None: ...


@runtime_checkable
class WithholdingTask(Protocol):
    """A task that swaps text its safety judge marks unsafe for hash markers in a stored row,
    returning how many texts it withheld."""

    async def withhold_unsafe(self, row: dict[str, Any]) -> int: ...
