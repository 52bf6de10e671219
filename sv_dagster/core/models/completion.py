"""What every model backend returns and raises, apart from the backends themselves (so the
in-process local backend and the HTTP ones share them without importing each other)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from sv_dagster.core.models.registry import ModelSpec


class BackendConfigError(ValueError):
    """The model's configuration is unusable (raised before any model call)."""


class BackendUnavailable(RuntimeError):
    """The model endpoint cannot be reached or refuses us; the message names the URL."""


class CompletionFailed(RuntimeError):
    """One request failed for good (after retries for transient errors)."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


@dataclass(frozen=True)
class Completion:
    text: str
    usage: dict[str, int] | None
    latency_s: float
    attempts: int = 1
    finish_reason: str | None = None
    cached: bool = False
    tool_calls: tuple[dict[str, Any], ...] = ()
    """Tool calls the model asked for, in the OpenAI wire shape
    ({"id", "type": "function", "function": {"name", "arguments"}})."""
    cache_key: str | None = None
    """Set by a response cache, which stores the reply only once its example is scored."""


class Backend(Protocol):
    spec: ModelSpec

    async def preflight(self) -> None: ...

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Completion:
        """The model's next turn; `tools` (OpenAI function schemas) are offered when given."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class SettlingBackend(Backend, Protocol):
    """A backend that keeps replies until their example's outcome is known (a response
    cache stores only replies that were scored)."""

    def settle(self, completions: list[Completion], scored: bool) -> None: ...
