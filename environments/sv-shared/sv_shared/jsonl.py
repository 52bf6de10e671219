"""Reading datasets in the common research JSONL shape.

One JSON object per line: `{"question": str, "answer": ..., "meta" | "info": {...}}`, with an
optional `"id"`. Every problem is reported with the file and line it came from, all at
once, before any model is called.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sv_shared import textrefs
from sv_shared.parsing import MAX_JSON_DEPTH, json_nested_deeper_than

MAX_LINE_CHARS = 16_000_000
"""Longest line of a JSONL dataset (characters). Rows hold one example (E2's largest file
is 1 MB); a longer line is reported, never read into memory whole."""


class DatasetError(ValueError):
    """A dataset file that cannot be used as it is; the message names file and line."""


@dataclass(frozen=True)
class Example:
    question: str
    answer: str
    id: str
    info: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    """`path:line` the example was read from."""


def _bounded_lines(handle: TextIO, limit: int) -> Iterator[tuple[int, str | None]]:
    """(line number, line) for each line of `handle`, the line None when it is longer than
    `limit` characters: such a line is skipped, never held in memory whole."""
    line_no = 0
    while line := handle.readline(limit + 1):
        line_no += 1
        if len(line) > limit and not line.endswith("\n"):
            while (rest := handle.readline(1 << 20)) and not rest.endswith("\n"):
                pass
            yield line_no, None
        else:
            yield line_no, line


def json_objects(path: str | Path, errors: list[str]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(line number, `path:line`, object) for each JSON object line of a JSONL file; blank lines are
    skipped, and a line that is not JSON or not an object, is longer than MAX_LINE_CHARS or
    nests deeper than MAX_JSON_DEPTH is appended to `errors` (the caller reports them all at
    once). A missing file raises DatasetError."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"dataset file not found: {path}")
    with path.open(encoding="utf-8") as handle:
        for line_no, line in _bounded_lines(handle, MAX_LINE_CHARS):
            where = f"{path}:{line_no}"
            if line is None:
                errors.append(f"{where}: line longer than {MAX_LINE_CHARS} characters")
                continue
            if not line.strip():
                continue
            if json_nested_deeper_than(line, MAX_JSON_DEPTH):
                errors.append(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                errors.append(f"{where}: not valid JSON ({exc.msg})")
                continue
            except (ValueError, RecursionError) as exc:  # an integer past Python's digit limit
                errors.append(f"{where}: not valid JSON ({' '.join(str(exc).split())[:200]})")
                continue
            if not isinstance(row, dict):
                errors.append(f"{where}: expected a JSON object, got {type(row).__name__}")
                continue
            try:
                row = textrefs.hydrate_row(row, where=where)
            except textrefs.MissingTextError as exc:
                errors.append(str(exc))
                continue
            yield line_no, where, row


def canonical_answer(value: Any, allowed: Sequence[str] | None, int_answers: Mapping[int, str] | None) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and int_answers is not None:
        return int_answers.get(value)
    if not isinstance(value, str) or not value.strip():
        return None
    if allowed is None:
        return value.strip()
    by_lower = {label.lower(): label for label in allowed}
    text = value.strip()
    if int_answers is not None and text.isdigit():
        return int_answers.get(int(text))
    return by_lower.get(text.lower())


def read_examples(
    path: str | Path,
    *,
    allowed_answers: Sequence[str] | None = None,
    int_answers: Mapping[int, str] | None = None,
    max_errors_shown: int = 10,
) -> list[Example]:
    """All examples of a JSONL file, or a DatasetError listing every bad line.

    `allowed_answers` (case-insensitive) and `int_answers` (e.g. {0: "Benign"}) normalise
    the answer to its canonical spelling; an answer outside them is an error.
    """
    path = Path(path)
    examples: list[Example] = []
    errors: list[str] = []
    for line_no, where, row in json_objects(path, errors):
        question = row.get("question")
        if not isinstance(question, str) or not question.strip():
            errors.append(f"{where}: missing or empty 'question'")
            continue
        if "answer" not in row or row["answer"] is None:
            errors.append(f"{where}: missing 'answer'")
            continue
        answer = canonical_answer(row["answer"], allowed_answers, int_answers)
        if answer is None:
            allowed = f" (allowed: {', '.join(allowed_answers)})" if allowed_answers else ""
            errors.append(f"{where}: unusable answer {row['answer']!r}{allowed}")
            continue
        info = row.get("info", row.get("meta")) or {}
        if not isinstance(info, dict):
            errors.append(f"{where}: 'info'/'meta' must be an object")
            continue
        examples.append(
            Example(
                question=question,
                answer=answer,
                id=str(row.get("id", f"{path.stem}-{line_no}")),
                info=info,
                source=where,
            )
        )
    if errors:
        shown = "\n  ".join(errors[:max_errors_shown])
        more = f"\n  ... and {len(errors) - max_errors_shown} more" if len(errors) > max_errors_shown else ""
        raise DatasetError(f"{len(errors)} bad row(s) in {path}:\n  {shown}{more}")
    if not examples:
        raise DatasetError(f"dataset file has no examples: {path}")
    return examples
