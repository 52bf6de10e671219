"""Why an example has no score: one kind per failure, one summary counter per kind.

The runner tags every row it could not score with a kind (`error_kind`); every summary counts
each kind under its own key, so the counters add up to `n_errors` in every environment."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any


class ErrorKind(StrEnum):
    MODEL = "model"
    """The model under evaluation failed for good (after its retries)."""
    COUNTERPART = "counterpart"
    """The other side of a dialogue (E5's target model) failed for good."""
    JUDGE = "judge"
    """A dialogue stopped mid-way: its judge (a classifier endpoint) or the task itself failed."""
    SCORING = "scoring"
    """The verifier failed on a finished reply."""

    @property
    def counter(self) -> str:
        """The summary key that counts this kind."""
        return f"n_{self.value}_errors"


RESUMABLE_ERRORS = frozenset({ErrorKind.MODEL, ErrorKind.COUNTERPART, ErrorKind.JUDGE})
"""Kinds a resumed run plays again: nothing of the example was scored."""


def error_counts(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """`n_errors` (rows with an error) and one counter per kind."""
    counts = {"n_errors": 0, **{kind.counter: 0 for kind in ErrorKind}}
    for row in rows:
        if row.get("error") is None:
            continue
        counts["n_errors"] += 1
        kind = row.get("error_kind")
        if isinstance(kind, str) and kind in ErrorKind._value2member_map_:
            counts[ErrorKind(kind).counter] += 1
    return counts
