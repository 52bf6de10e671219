"""Figures as the console and the reports print them: a value, a value with its 95% CI, and
the console's plain-text table. Every number printed goes through here; each output keeps its
own precision of CIs (the console's tables 2 decimals, the reports' 3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sv_dagster.core.evals.tournament import TournamentResult

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


def success_curve(result: TournamentResult) -> str:
    """The attacker's success rate per round, `0.50 -> 0.25` ("n/a" for a round without one)."""
    return " -> ".join(
        "n/a" if r.attacker_success_rate is None else fmt(r.attacker_success_rate, CONSOLE_CI_DIGITS)
        for r in result.rounds
    )


def rounds_markdown(result: TournamentResult) -> list[str]:
    """The tournament's rounds as a Markdown table: attacker success with its 95% CI, the
    defender's unsafe and over-refusal rates (blank where not measured), known attacks."""
    lines = [
        "| round | attacker success (95% CI) | defender unsafe | over-refusal | known attacks |",
        "|---|---|---|---|---|",
    ]
    for r in result.rounds:
        ci = r.attacker_success_ci95
        success = fmt(r.attacker_success_rate, CONSOLE_CI_DIGITS) + (
            f" {ci_text(ci, CONSOLE_CI_DIGITS)}" if ci else " "
        )
        unsafe, refusal = (
            "" if rate is None else fmt(rate, CONSOLE_CI_DIGITS)
            for rate in (r.defender_unsafe_rate, r.defender_over_refusal_rate)
        )
        lines.append(f"| {r.round} | {success} | {unsafe} | {refusal} | {r.known_attacks} |")
    return lines
