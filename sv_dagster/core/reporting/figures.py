"""Figures as the console and the reports print them: a value, a value with its 95% CI, and
the console's plain-text table. Every number printed goes through here; each output keeps its
own precision of CIs (the console's tables 2 decimals, the reports' 3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

CONSOLE_CI_DIGITS = 2
REPORT_CI_DIGITS = 3


def fmt(value: Any, digits: int = 3) -> str:
    """A cell: a float to `digits` decimals, None as "-", anything else as it prints."""
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def ci_text(ci: Sequence[float], digits: int) -> str:
    return f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def with_ci(value: Any, ci: Sequence[float] | None, digits: int) -> str:
    """`value [low, high]`, or the value alone when there is no CI."""
    return f"{fmt(value)} {ci_text(ci, digits)}" if ci else fmt(value)


def format_table(
    rows: list[dict[str, Any]],
    columns: tuple[tuple[str, str], ...],
    first: tuple[str, str] = ("model", "model"),
    *,
    by: tuple[tuple[str, str], ...] = (),
) -> str:
    """A console table: `first`, the `by` columns and n, then `columns` ((title, key) pairs),
    padded to the widest cell."""
    columns = (first, *by, ("n", "n_examples"), *columns)
    header = [title for title, _ in columns]
    body = [[fmt(row.get(key)) for _, key in columns] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(header, *body)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)) for line in [header, *body]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)
