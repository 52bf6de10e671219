"""The verdict type and the classifier protocol shared by the rule and Llama Guard backends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


class SafetyClassifierError(RuntimeError):
    """The classifier could not give a verdict (endpoint down, bad status, unparsable output).

    Never swallowed into a "safe" verdict: a red-team score built on a failed judge must fail
    loudly. The message names the URL that was called."""


@dataclass(frozen=True)
class SafetyVerdict:
    unsafe: bool
    categories: tuple[str, ...] = ()
    """Llama Guard S-codes, empty when safe."""
    classifier: str = ""
    """`id@version` of the classifier that decided (or the `judged_by` of a withheld marker)."""

    def to_dict(self) -> dict[str, Any]:
        return {"unsafe": self.unsafe, "categories": list(self.categories), "classifier": self.classifier}


@runtime_checkable
class SafetyClassifier(Protocol):
    """Judges one text: as an assistant reply to `context` (role="agent") or as a user prompt
    (role="user"), the same distinction Llama Guard 3 makes ('Agent' vs 'User')."""

    id: str
    version: str

    @property
    def ident(self) -> str: ...

    def classify(self, text: str, *, context: str | None = None, role: str = "agent") -> SafetyVerdict: ...

    def classify_many(self, items: Sequence[tuple[str, str | None, str]]) -> list[SafetyVerdict]: ...

    async def aclassify(self, text: str, *, context: str | None = None, role: str = "agent") -> SafetyVerdict: ...


ROLES = ("agent", "user")


def check_role(role: str) -> str:
    if role not in ROLES:
        raise ValueError(f"role must be 'agent' or 'user', got {role!r}")
    return role
