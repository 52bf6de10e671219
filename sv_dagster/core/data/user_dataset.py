"""A user's own JSONL file as an environment's test split (`sv-dagster eval eN --dataset FILE`).

Each line is the environment's own dataset row or the common research shape
`{"question", "answer", "meta"|"info"}`; the environment's `user_row` turns it into the row
its taskset reads, with the taskset's own parsing rules, and the row is then held to the
dataset's row schema (what the blocking dataset check asserts). So every row is checked here,
before any model call: a bad one is left out and recorded as `FILE:LINE: reason (expected
shapes: ...)`, and a file with no usable row is an error, never a fallback to bundled rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.provenance import file_sha256
from sv_dagster.core.envs import ENVS
from sv_shared.corpora import RowSchema
from sv_shared.errors import UserError
from sv_shared.jsonl import DatasetError, json_objects

Row = dict[str, Any]


class UserDatasetError(UserError, ValueError):
    """A user's dataset file that cannot be evaluated; the message is one line naming the file."""


@dataclass(frozen=True)
class UserRows:
    path: Path
    """The file as given, made absolute."""
    sha256: str
    rows: list[Row]
    """The usable rows, in the environment's dataset shape, in file order."""
    rejects: list[Row] = field(default_factory=list)
    """`{"where": "FILE:LINE", "reason": ...}` for each line left out."""
    shapes: str = ""

    def reject_lines(self) -> list[str]:
        """Each left-out line as a person reads it."""
        return [f"{r['where']}: {r['reason']} (expected shapes: {self.shapes})" for r in self.rejects]

    def describe(self) -> dict[str, Any]:
        """What the dataset's report and provenance record of the file."""
        return {
            "path": str(self.path),
            "sha256": self.sha256,
            "n_rows": len(self.rows),
            "n_rejected": len(self.rejects),
        }


def _default_id(path: Path, line: int) -> str:
    # Ids must suit every taskset (E3's are `[A-Za-z0-9._-]`): the file's stem, cleaned.
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", path.stem).strip("-.") or "row"
    return f"{stem}-{line}"


def _schema_problem(schema: RowSchema, row: Row) -> str | None:
    """What the dataset check would find wrong with `row` (None: nothing), so a kept row
    never blocks the eval later."""
    missing = [key for key in schema.required if row.get(key) is None]
    if missing:
        return f"missing field(s) {missing}"
    label = schema.label(row)
    if label is None:
        return "no label"
    if schema.allowed_labels is not None and label not in schema.allowed_labels:
        return f"label {label!r} is not one of {list(schema.allowed_labels)}"
    if schema.label_pattern is not None and not re.search(schema.label_pattern, str(label)):
        return f"label {label!r} does not match {schema.label_pattern}"
    return None


def read_user_rows(env_short: str, path: str | Path) -> UserRows:
    """Every line of `path` checked for `env_short`: the usable rows and the left-out lines.
    A missing or unreadable file raises UserDatasetError."""
    env = ENVS[env_short]
    if env.user_row is None or env.corpora is None:
        raise UserDatasetError(f"{env.env_id} takes no user dataset (it declares no user row shape)")
    path = Path(path).expanduser().absolute()
    if not path.is_file():
        raise UserDatasetError(f"--dataset {path}: no such file")
    schema = env.corpora.schema
    errors: list[str] = []
    rows: list[Row] = []
    rejects: list[Row] = []
    first_line: dict[str, int] = {}
    try:
        for line, where, raw in json_objects(path, errors):
            if raw.get("id") is None:
                raw = {**raw, "id": _default_id(path, line)}
            try:
                row = env.user_row(raw)
            except (ValueError, TypeError) as exc:
                rejects.append({"where": where, "reason": str(exc)})
                continue
            problem = _schema_problem(schema, row)
            if problem is None and str(row["id"]) in first_line:
                problem = f"duplicate id {row['id']!r} (first on line {first_line[str(row['id'])]})"
            if problem is not None:
                rejects.append({"where": where, "reason": problem})
                continue
            first_line[str(row["id"])] = line
            schema.mark_sample(row, False)  # the user's own rows, not project-written samples
            schema.annotate(row, user_file=path.name, user_line=line)
            rows.append(row)
    except UnicodeDecodeError as exc:
        raise UserDatasetError(f"--dataset {path}: not UTF-8 text (byte {exc.start}); give a JSONL file") from None
    except DatasetError as exc:
        raise UserDatasetError(f"--dataset {path}: {exc}") from None
    prefix = f"{path}:"
    for error in errors:  # json_objects' own: `FILE:LINE: reason`
        number, _, reason = error.removeprefix(prefix).partition(": ")
        rejects.append({"where": f"{path}:{number}", "reason": reason})
    rejects.sort(key=lambda r: int(r["where"].rsplit(":", 1)[1]))
    return UserRows(path, file_sha256(path), rows, rejects, env.user_shapes)


def usable_user_rows(env_short: str, path: str | Path) -> UserRows:
    """`read_user_rows`, or a UserDatasetError when no row of the file is usable (naming the
    first bad line and how many there were)."""
    user = read_user_rows(env_short, path)
    if user.rows:
        return user
    if not user.rejects:
        raise UserDatasetError(f"--dataset {user.path}: no rows (the file is empty); expected shapes: {user.shapes}")
    first = user.reject_lines()[0]
    more = f"; and {len(user.rejects) - 1} more bad line(s)" if len(user.rejects) > 1 else ""
    raise UserDatasetError(f"--dataset {user.path} has no usable row: {first}{more}")


def dataset_stale(built_from: str | None, built_sha256: str | None, user: UserRows | None) -> bool:
    """Whether a dataset built from the user's file `built_from` (None: not from a user's file)
    with bytes `built_sha256` must be built again before an eval of `user` (None: no file asked
    for): one built from a user's file when none is asked for (a user's rows are never
    evaluated unasked), or not from exactly the file asked for, path and sha256 (a changed file
    is never evaluated as its older bytes). A dataset never built is stale too; the caller knows."""
    if user is None:
        return built_from is not None
    return built_from != str(user.path) or built_sha256 != user.sha256
