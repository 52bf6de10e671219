"""Audit a report against the files it cites.

Every sourced table row of a weekly, monthly or scoreboard report links to the JSON it was
rendered from (an eval's `summary.json`, a tournament's `tournament.json`, a training stage's
`checkpoint.json` or an ablation's `ablations.json`; a study report's checkpoint rows cite
their evals' `summary.json`) and names the run and data version of
that materialization. The audit renders each of the row's number cells again from the cited
files with the report's own `row_cells`, and hashes the cited folder as it is on disk now:
the data version is that hash, so a file changed since the report was written shows up even
where the numbers shown did not move. The monthly report's training sums (per model and
environment, and the total line) are rendered again from the files the training rows cite.

    sv-dagster audit outputs/reports/monthly/2026-11/report.md
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.provenance import content_hash
from sv_dagster.core.reporting.reports import (
    CHECKPOINT_RECORD,
    MARKDOWN_LINK,
    TRAINING_TOTAL,
    row_cells,
    training_figures,
    training_summary_cells,
    training_total,
)

MAX_REPORT_BYTES = 16 << 20  # a report is a page of tables; anything larger is not one of ours
MAX_CITED_BYTES = 64 << 20


class AuditError(ValueError):
    """The report itself cannot be read (missing, not Markdown, too large)."""


@dataclass(frozen=True)
class TableRow:
    line: int
    table: str
    env: str
    cells: dict[str, str]


@dataclass
class AuditResult:
    report: Path
    rows: int = 0
    cells: int = 0
    sources: set[Path] = field(default_factory=set)
    unsourced: int = 0
    derived: int = 0
    """Sums (training summary rows, the training total line) recomputed from the rows' files."""
    problems: list[str] = field(default_factory=list)
    checked: list[tuple[int, str, str]] = field(default_factory=list)
    """(line, what the row shows, its run) of each sourced row, for `lineage --row`."""

    @property
    def ok(self) -> bool:
        return not self.problems


def _split_row(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table_kind(header: list[str]) -> str | None:
    if "n (ood)" in header:
        return "ood"
    if "previous" in header and "delta" in header:
        return "weekly"
    if "external kappa [95% CI]" in header:
        return "judges"
    if "success per round" in header:
        return "tournament"
    if "checkpoint" in header and "data version" in header and "mean reward [95% CI]" in header:
        return "study"
    if "current checkpoint" in header:
        return "training summary"
    if "CPU hours" in header and "record" in header:
        return "training"
    if header and header[0] == "#" and "model" in header:
        return "scoreboard"
    return None


def table_rows(text: str) -> Iterator[TableRow]:
    """Rows of the report's tables, with the kind of table and the scoreboard's environment."""
    lines = text.splitlines()
    env = ""
    header: list[str] | None = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith("# Scoreboard: "):
            env = stripped[len("# Scoreboard: ") :].strip()
        if not stripped.startswith("|"):
            header = None
            continue
        if stripped.startswith("|---"):
            continue
        cells = _split_row(stripped)
        if header is None:
            header = cells
            continue
        yield TableRow(number, _table_kind(header) or "other", env, dict(zip(header, cells, strict=False)))


def _links(row: TableRow, base: Path) -> list[Path]:
    found = [MARKDOWN_LINK.findall(cell) for cell in row.cells.values()]
    return [(base / href).resolve() for links in found for _, href in links]


def _cited(row: TableRow, base: Path) -> list[Path]:
    return [path for path in _links(row, base) if path.suffix == ".json"]


def _read_json(path: Path) -> Any:
    if path.stat().st_size > MAX_CITED_BYTES:
        raise AuditError(f"{path}: over {MAX_CITED_BYTES >> 20} MiB, not a summary")
    return json.loads(path.read_text(encoding="utf-8"))


def report_file(path: Path) -> Path:
    if path.is_dir():
        path = path / "report.md"
    elif path.suffix == ".html" and path.with_suffix(".md").is_file():
        path = path.with_suffix(".md")  # the page is rendered from the Markdown beside it
    if not path.is_file():
        raise AuditError(f"{path}: no such report")
    if path.stat().st_size > MAX_REPORT_BYTES:
        raise AuditError(f"{path}: over {MAX_REPORT_BYTES >> 20} MiB, not a report")
    return path


@dataclass
class _Training:
    """What the training rows of a report gave, for the sums under them."""

    figures: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    checkpoints: dict[tuple[str, str], set[Path]] = field(default_factory=lambda: defaultdict(set))
    unread: dict[tuple[str, str], list[int]] = field(default_factory=lambda: defaultdict(list))
    summaries: list[TableRow] = field(default_factory=list)

    def all_figures(self) -> list[dict[str, Any]]:
        return [f for figures in self.figures.values() for f in figures]

    def all_unread(self) -> list[int]:
        return sorted(line for lines in self.unread.values() for line in lines)


def _shows(row: TableRow) -> str:
    if row.table == "tournament":
        return f"{row.cells.get('attacker')} vs {row.cells.get('defender')}"
    if row.table == "training":
        return f"{row.cells.get('asset', '?')} ({row.cells.get('model', '?')})"
    if row.table == "study":
        return (
            f"{row.cells.get('training run', '?')} {row.cells.get('checkpoint', '?')} step {row.cells.get('step', '-')}"
        )
    return f"{row.cells.get('env') or row.env} / {row.cells.get('model', '?')}"


def _check_row(row: TableRow, base: Path, where: str, result: AuditResult, hashes: dict[Path, str]) -> list[Any]:
    """The row's cells rendered again from the files it cites, and its data version checked
    against their folder; returns what the files held ([] when they could not be read)."""
    cited = _cited(row, base)
    missing = [p for p in cited if not p.is_file()]
    if missing:
        result.problems.append(f"{where}: cites {missing[0]}, which is not there")
        return []
    try:
        data = [_read_json(p) for p in cited]
    except (AuditError, ValueError, OSError) as error:
        result.problems.append(f"{where}: cannot read what it cites: {error}")
        return []
    if not all(isinstance(item, dict) for item in data):
        result.problems.append(f"{where}: cites {cited[0]}, which does not hold a JSON object")
        return []
    result.sources.update(cited)
    folder = cited[0].parent
    shown = row.cells.get("data version", "")
    if folder not in hashes:
        hashes[folder] = content_hash([folder])
    if not shown or shown == "-" or not hashes[folder].startswith(shown):
        result.problems.append(
            f"{where}: data version {shown or '(none)'} but {folder} hashes to {hashes[folder][:12]} now: "
            "its files changed after the report was written"
        )
    for title, render in row_cells(row.table, row.env).items():
        if title not in row.cells:
            result.problems.append(f"{where}: no {title!r} column")
            continue
        result.cells += 1
        try:
            expected = render(data)
        except (TypeError, ValueError, AttributeError) as error:
            result.problems.append(f"{where}: {title} cannot be rendered from {cited[0].name} in {folder}: {error}")
            continue
        if row.cells[title] != expected:
            result.problems.append(
                f"{where}: {title} shows {row.cells[title]!r} but {cited[0].name} in {folder} gives {expected!r}"
            )
    return data


def _check_training_sums(text: str, name: str, base: Path, training: _Training, result: AuditResult) -> None:
    """Each (model, environment) summary row and the total line, rendered again from the
    files the training rows cite: a row missing, added or changed moves a sum."""
    for row in training.summaries:
        where = f"{name}:{row.line}"
        key = (row.cells.get("model", ""), row.cells.get("env", ""))
        result.derived += 1
        if training.unread[key]:
            result.problems.append(
                f"{where}: not recomputed: its training rows at lines {training.unread[key]} could not be read"
            )
            continue
        if not training.figures[key]:
            result.problems.append(
                f"{where}: no training row of {key[0]} / {key[1]} cites a file: its sums cannot be checked"
            )
            continue
        for title, expected in training_summary_cells(training.figures[key]).items():
            result.cells += 1
            if row.cells.get(title) != expected:
                result.problems.append(
                    f"{where}: {title} shows {row.cells.get(title)!r} but the {len(training.figures[key])} "
                    f"training rows' files sum to {expected!r}"
                )
        # The current checkpoint is one the rows above trained (which one is promoted, the
        # instance knows; the files do not).
        current = _links(row, base)
        if current and current[0] not in training.checkpoints[key]:
            result.problems.append(
                f"{where}: current checkpoint {current[0]} is not among the {key[0]} / {key[1]} rows' checkpoints"
            )
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith(TRAINING_TOTAL):
            continue
        result.derived += 1
        where = f"{name}:{number}"
        if training.all_unread():
            result.problems.append(
                f"{where}: not recomputed: training rows at lines {training.all_unread()} could not be read"
            )
            continue
        result.cells += 1
        expected = training_total(training.all_figures())
        if line.strip() != expected:
            result.problems.append(f"{where}: shows {line.strip()!r} but the training rows' files give {expected!r}")


def audit_report(path: Path) -> AuditResult:
    """Check every sourced row of the report at `path` (a .md, the .html beside one, or a
    monthly report's folder), and the training sums over them."""
    path = report_file(Path(path))
    result = AuditResult(report=path)
    hashes: dict[Path, str] = {}
    training = _Training()
    text = path.read_text(encoding="utf-8")
    for row in table_rows(text):
        if row.table == "training summary":
            training.summaries.append(row)
            continue
        if row.table == "other" or not _cited(row, path.parent):
            result.unsourced += 1
            continue
        result.rows += 1
        result.checked.append((row.line, _shows(row), row.cells.get("run", "-")))
        data = _check_row(row, path.parent, f"{path.name}:{row.line}", result, hashes)
        if row.table != "training":
            continue
        key = (row.cells.get("model", ""), row.cells.get("env", ""))
        if not data:
            training.unread[key].append(row.line)
            continue
        try:
            training.figures[key].append(training_figures(data[0]))
        except (TypeError, ValueError, AttributeError):
            training.unread[key].append(row.line)  # the row's own check said why
        record = _cited(row, path.parent)[0]
        if record.name == CHECKPOINT_RECORD:  # an ablation's folder holds no weights
            training.checkpoints[key].add(record.parent)
    _check_training_sums(text, path.name, path.parent, training, result)
    return result


def main_audit(report: str) -> int:
    """`sv-dagster audit REPORT`: 0 when every number matches, 1 on any mismatch, 2 when the
    report cannot be read."""
    try:
        result = audit_report(Path(report))
    except (AuditError, OSError, UnicodeDecodeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for line, shows, run in result.checked:
        print(f"  line {line:<4} {shows}  run {run}")
    for problem in result.problems:
        print(f"MISMATCH {problem}")
    verdict = "FAILED" if result.problems else "OK"
    print(
        f"{verdict}: {result.report}: {result.rows} sourced rows, {result.cells} cells checked against "
        f"{len(result.sources)} cited files"
        + (f", {result.derived} training sums recomputed from them" if result.derived else "")
        + f", {len(result.problems)} mismatches"
        + (
            f"; {result.unsourced} rows of other tables (paired comparisons) are not checked"
            if result.unsourced
            else ""
        )
    )
    return 1 if result.problems else 0
