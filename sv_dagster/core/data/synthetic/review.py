"""The human spot-check of synthetic batches: review queue, decisions, and what is accepted.

A batch folder holds `spot_check.jsonl` (the review queue: a seeded 5% sample of its
rows) and `metadata.json` (env, partition, batch id). Reviewers' decisions go to
`<outputs>/reviews/synthetic/<env>/<partition>/decisions.jsonl`, outside the batch folder
(the batch's content hash is recorded and never changes after it is written). One line per
decision: id, batch id, reviewer, UTC time, verdict (accept | reject), the rows it covers
(none: the whole batch), note.

Rules (the latest decision for a scope wins, so a reviewer can revise):
- a decision without rows is about the batch: `reject` excludes every row downstream;
- a decision with rows is about those rows: `reject` excludes them;
- the review is `done` when there is a batch-level decision or every sampled row has one;
  a batch rejected as a whole is `rejected`; otherwise `pending`.

`accepted_examples(batch_dir)` is what training reads: the batch's rows in the
environment's schema minus the rejected ones, with the ids of the decisions applied (to
record in its provenance).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.data.synthetic.files import EXAMPLES_FILE, METADATA_FILE, QUEUE_FILE, rows_from_parquet
from sv_dagster.core.envs import ENVS
from sv_shared import textrefs

VERDICTS = ("accept", "reject")


class ReviewError(ValueError):
    """A review that cannot be recorded or read; the message names what is wrong."""


@dataclass(frozen=True)
class Decision:
    id: str
    env: str
    partition: str
    batch_id: str
    reviewer: str
    time: str
    verdict: str
    rows: tuple[str, ...] = ()
    note: str = ""
    data_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rows"] = list(self.rows)
        return out


def reviews_dir(env: str, partition: str, root: Path | None = None) -> Path:
    return (root or outputs_root()) / "reviews" / "synthetic" / env / partition


def decisions_path(env: str, partition: str, root: Path | None = None) -> Path:
    return reviews_dir(env, partition, root) / "decisions.jsonl"


def batch_metadata(batch_dir: Path) -> dict[str, Any]:
    path = Path(batch_dir) / METADATA_FILE
    if not path.is_file():
        raise ReviewError(f"not a synthetic batch folder (no {METADATA_FILE}): {batch_dir}")
    metadata: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return metadata


def read_queue(batch_dir: Path) -> list[dict[str, Any]]:
    path = Path(batch_dir) / QUEUE_FILE
    if not path.is_file():
        raise ReviewError(f"no review queue ({QUEUE_FILE}) in {batch_dir}")
    return [
        textrefs.hydrate_row(json.loads(line), where=str(path))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def read_decisions(env: str, partition: str, batch_id: str | None = None, root: Path | None = None) -> list[Decision]:
    """Decisions in the order they were recorded (for one batch when `batch_id` is given).
    A line that is not a decision raises, naming the file and line: a decisions file is
    written only by `record_decision`, so a broken one must be looked at, not skipped."""
    path = decisions_path(env, partition, root)
    if not path.is_file():
        return []
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            decision = Decision(**{**raw, "rows": tuple(raw.get("rows") or ())})
        except (json.JSONDecodeError, TypeError) as exc:
            raise ReviewError(f"{path}:{number}: not a review decision ({exc})") from exc
        if batch_id is None or decision.batch_id == batch_id:
            out.append(decision)
    return out


@dataclass
class ReviewStatus:
    state: str
    """`pending`, `done` or `rejected` (the whole batch)."""
    sampled: int
    reviewed: int
    """Sampled rows with a decision (all of them once a batch-level decision exists)."""
    rejected_rows: list[str] = field(default_factory=list)
    decision_ids: list[str] = field(default_factory=list)
    batch_verdict: str | None = None
    last: Decision | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["last"] = self.last.to_dict() if self.last else None
        return out


def review_status(batch_dir: Path, root: Path | None = None) -> ReviewStatus:
    meta = batch_metadata(batch_dir)
    queue = {entry["row_id"] for entry in read_queue(batch_dir)}
    decisions = read_decisions(meta["env"], meta["partition"], meta["batch_id"], root)
    batch_verdict: str | None = None
    row_verdicts: dict[str, str] = {}
    for decision in decisions:  # in order: the latest for a scope wins
        if decision.rows:
            row_verdicts.update({row: decision.verdict for row in decision.rows})
        else:
            batch_verdict = decision.verdict
    reviewed = len(queue) if batch_verdict else len(queue & set(row_verdicts))
    if batch_verdict == "reject":
        state = "rejected"
    elif batch_verdict == "accept" or (queue and reviewed == len(queue)):
        state = "done"
    else:
        state = "pending"
    return ReviewStatus(
        state=state,
        sampled=len(queue),
        reviewed=reviewed,
        rejected_rows=sorted(row for row, verdict in row_verdicts.items() if verdict == "reject"),
        decision_ids=[d.id for d in decisions],
        batch_verdict=batch_verdict,
        last=decisions[-1] if decisions else None,
    )


def iter_batch_rows(batch_dir: Path) -> Iterator[dict[str, Any]]:
    """The batch's rows in the environment's schema (from its Parquet table when no JSONL
    was written: columnar batches)."""
    batch_dir = Path(batch_dir)
    jsonl = batch_dir / EXAMPLES_FILE
    if jsonl.is_file():
        with jsonl.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)
        return
    env_name = batch_metadata(batch_dir).get("env")
    env = ENVS.get(env_name) if isinstance(env_name, str) else None
    synthetic = env.synthetic if env is not None else None
    if (
        synthetic is not None
        and synthetic.table
        and synthetic.table_rows is not None
        and (batch_dir / f"{synthetic.table}.parquet").is_file()
    ):
        yield from rows_from_parquet(batch_dir / f"{synthetic.table}.parquet", synthetic.table_rows)
        return
    raise ReviewError(f"no {EXAMPLES_FILE} or Parquet table in {batch_dir}")


def row_id(row: dict[str, Any]) -> str:
    return str(row["id"])


@dataclass
class AcceptedExamples:
    rows: list[dict[str, Any]]
    decision_ids: list[str]
    excluded: list[str]
    """Ids of the rows left out (rejected one by one, or all of a rejected batch)."""
    review: ReviewStatus
    batch_id: str
    env: str
    partition: str


def accepted_examples(batch_dir: Path, *, require_review: bool = False, root: Path | None = None) -> AcceptedExamples:
    """The batch's rows minus those reviewers rejected (all of them when the batch was
    rejected), and the decision ids applied. With `require_review`, a batch whose review
    is still pending raises ReviewError instead (for consumers that must not use
    unreviewed data)."""
    meta = batch_metadata(batch_dir)
    status = review_status(batch_dir, root)
    if require_review and status.state == "pending":
        raise ReviewError(
            f"synthetic/{meta['env']} partition {meta['partition']} (batch {meta['batch_id']}): review pending "
            f"({status.reviewed}/{status.sampled} sampled rows decided)"
        )
    rows, excluded = [], []
    rejected = set(status.rejected_rows)
    for row in iter_batch_rows(batch_dir):
        if status.state == "rejected" or row_id(row) in rejected:
            excluded.append(row_id(row))
        else:
            rows.append(row)
    return AcceptedExamples(
        rows, status.decision_ids, excluded, status, meta["batch_id"], meta["env"], meta["partition"]
    )


def write_accepted(batch_dir: Path, path: Path, **kwargs: Any) -> AcceptedExamples:
    """`accepted_examples` written as a JSONL the environment's taskset loads."""
    accepted = accepted_examples(batch_dir, **kwargs)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for row in accepted.rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    return accepted


def _batch_row_ids(batch_dir: Path) -> set[str]:
    return {row_id(row) for row in iter_batch_rows(batch_dir)}


def record_decision(
    batch_dir: Path,
    *,
    reviewer: str,
    verdict: str,
    rows: Sequence[str] = (),
    note: str = "",
    data_version: str | None = None,
    root: Path | None = None,
    now: datetime | None = None,
) -> Decision:
    """Append one decision for the batch (validated first: verdict, reviewer, row ids)."""
    if verdict not in VERDICTS:
        raise ReviewError(f"verdict must be one of {list(VERDICTS)}, got {verdict!r}")
    if not reviewer.strip():
        raise ReviewError("a decision needs the reviewer's name")
    meta = batch_metadata(batch_dir)
    rows = tuple(dict.fromkeys(str(r) for r in rows))
    if rows:
        unknown = sorted(set(rows) - _batch_row_ids(batch_dir))
        if unknown:
            raise ReviewError(f"row id(s) {unknown[:5]} are not in batch {meta['batch_id']} ({batch_dir})")
    when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    digest = hashlib.sha256(json.dumps([meta["batch_id"], reviewer, when, verdict, rows, note]).encode()).hexdigest()[
        :12
    ]
    decision = Decision(
        id=f"rev-{digest}",
        env=meta["env"],
        partition=meta["partition"],
        batch_id=meta["batch_id"],
        reviewer=reviewer.strip(),
        time=when,
        verdict=verdict,
        rows=rows,
        note=note,
        data_version=data_version,
    )
    path = decisions_path(meta["env"], meta["partition"], root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:  # append-only: the history of decisions is kept
        handle.write(json.dumps(decision.to_dict(), sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return decision
