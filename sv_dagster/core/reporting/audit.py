"""Audit a report against the files it cites.

Every sourced table row of a weekly, monthly or scoreboard report links to the JSON it was
rendered from (an eval's `summary.json`, a tournament's `tournament.json`) and names the
run and data version of that materialization. The audit renders each of the row's number
cells again from the cited files with the report's own `row_cells`, and hashes the cited
folder as it is on disk now: the data version is that hash, so a file changed since the
report was written shows up even where the numbers shown did not move.

    sv-dagster audit outputs/reports/monthly/2026-11/report.md
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.provenance import content_hash
from sv_dagster.core.reporting.reports import MARKDOWN_LINK, row_cells

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
    problems: list[str] = field(default_factory=list)
    checked: list[tuple[int, str, str]] = field(default_factory=list)
    """(line, what the row shows, its run) of each sourced row, for `lineage --row`."""

    @property
    def ok(self) -> bool:
        return not self.problems


def _split_row(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table_kind(header: list[str]) -> str | None:
    if "previous" in header and "delta" in header:
        return "weekly"
    if "success per round" in header:
        return "tournament"
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


def _cited(row: TableRow, base: Path) -> list[Path]:
    links = [MARKDOWN_LINK.findall(cell) for cell in row.cells.values()]
    return [(base / href).resolve() for found in links for _, href in found if href.endswith(".json")]


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


def audit_report(path: Path) -> AuditResult:
    """Check every sourced row of the report at `path` (a .md, the .html beside one, or a
    monthly report's folder)."""
    path = report_file(Path(path))
    result = AuditResult(report=path)
    hashes: dict[Path, str] = {}
    for row in table_rows(path.read_text(encoding="utf-8")):
        cited = _cited(row, path.parent)
        if row.table == "other" or not cited:
            result.unsourced += 1
            continue
        result.rows += 1
        where = f"{path.name}:{row.line}"
        shows = (
            f"{row.cells.get('attacker')} vs {row.cells.get('defender')}"
            if row.table == "tournament"
            else f"{row.cells.get('env') or row.env} / {row.cells.get('model', '?')}"
        )
        result.checked.append((row.line, shows, row.cells.get("run", "-")))
        missing = [p for p in cited if not p.is_file()]
        if missing:
            result.problems.append(f"{where}: cites {missing[0]}, which is not there")
            continue
        try:
            data = [_read_json(p) for p in cited]
        except (AuditError, ValueError, OSError) as error:
            result.problems.append(f"{where}: cannot read what it cites: {error}")
            continue
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
            expected = render(data)
            if row.cells[title] != expected:
                result.problems.append(
                    f"{where}: {title} shows {row.cells[title]!r} but {cited[0].name} in {folder} gives {expected!r}"
                )
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
        f"{len(result.sources)} cited files, {len(result.problems)} mismatches"
        + (
            f"; {result.unsourced} rows cite no JSON (training compute, totals) and are not checked"
            if result.unsourced
            else ""
        )
    )
    return 1 if result.problems else 0
