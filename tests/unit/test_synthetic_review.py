"""The spot-check review on files: the queue, decisions (row and batch level, latest wins),
the review state, and what `accepted_examples` hands downstream."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sv_dagster.core.data.synthetic import (
    BatchSpec,
    ReviewError,
    Upstream,
    accepted_examples,
    build_batch,
    read_decisions,
    record_decision,
    review_status,
    write_accepted,
)
from sv_dagster.core.envs import ENVS


@pytest.fixture
def batch(tmp_path: Path) -> Path:
    spec = BatchSpec(
        env="e4",
        env_id="sv-env-phishing-detection",
        partition="2026-11-07",
        batch_id="abc12345",
        out_dir=tmp_path / "datasets" / "e4" / "synthetic" / "2026-11-07_abc12345",
        size=60,
        seed=3,
        sample=True,
        spot_fraction=0.05,
    )
    return build_batch(spec, Upstream()).out_dir


def _queue(batch: Path) -> list[str]:
    return [json.loads(line)["row_id"] for line in (batch / "spot_check.jsonl").read_text().splitlines()]


def test_the_queue_is_a_seeded_five_percent_with_at_least_one_row(batch, tmp_path):
    queued = _queue(batch)
    assert len(queued) == 3  # 5% of 60
    entry = json.loads((batch / "spot_check.jsonl").read_text().splitlines()[0])
    assert entry["row"]["id"] == entry["row_id"] and entry["partition"] == "2026-11-07"
    again = tmp_path / "again"
    spec = BatchSpec(
        env="e4",
        env_id="sv-env-phishing-detection",
        partition="2026-11-07",
        batch_id="abc12345",
        out_dir=again,
        size=60,
        seed=3,
        sample=True,
    )
    assert _queue(build_batch(spec, Upstream()).out_dir) == queued  # same seed, same sample
    small = BatchSpec(
        env="e4",
        env_id="sv-env-phishing-detection",
        partition="2026-11-07",
        batch_id="s",
        out_dir=tmp_path / "s",
        size=4,
        seed=3,
        sample=True,
    )
    assert len(_queue(build_batch(small, Upstream()).out_dir)) == 1


def test_review_stays_pending_until_every_sampled_row_or_the_batch_is_decided(batch, tmp_path):
    queued = _queue(batch)
    status = review_status(batch, root=tmp_path)
    assert (status.state, status.sampled, status.reviewed) == ("pending", 3, 0)
    record_decision(batch, reviewer="ana", verdict="accept", rows=queued[:2], root=tmp_path)
    assert review_status(batch, root=tmp_path).state == "pending"
    record_decision(batch, reviewer="ana", verdict="reject", rows=queued[2:], note="bad evidence", root=tmp_path)
    status = review_status(batch, root=tmp_path)
    assert (status.state, status.reviewed, status.rejected_rows) == ("done", 3, queued[2:])
    decisions = read_decisions("e4", "2026-11-07", root=tmp_path)
    assert [d.verdict for d in decisions] == ["accept", "reject"] and decisions[1].note == "bad evidence"
    assert decisions[0].reviewer == "ana" and datetime.fromisoformat(decisions[0].time) > datetime.now(UTC) - timedelta(
        minutes=5
    )


def test_rejected_rows_are_excluded_downstream_and_the_result_loads(batch, tmp_path):
    rows = [json.loads(line) for line in (batch / "examples.jsonl").read_text().splitlines()]
    bad = [rows[5]["id"], rows[9]["id"]]  # any row of the batch, sampled or not
    decision = record_decision(batch, reviewer="ben", verdict="reject", rows=bad, root=tmp_path)
    accepted = accepted_examples(batch, root=tmp_path)
    assert accepted.excluded == bad and decision.id in accepted.decision_ids
    assert [r["id"] for r in accepted.rows] == [r["id"] for r in rows if r["id"] not in bad]
    out = write_accepted(batch, tmp_path / "accepted.jsonl", root=tmp_path)
    assert len(list(ENVS["e4"].iter_tasks(tmp_path / "accepted.jsonl", None))) == len(out.rows) == len(rows) - 2
    record_decision(batch, reviewer="ben", verdict="accept", rows=bad[:1], note="second look", root=tmp_path)
    assert accepted_examples(batch, root=tmp_path).excluded == bad[1:]  # the latest decision on a row wins


def test_a_rejected_batch_excludes_everything_and_pending_can_be_required(batch, tmp_path):
    with pytest.raises(ReviewError, match="review pending"):
        accepted_examples(batch, require_review=True, root=tmp_path)
    record_decision(batch, reviewer="cy", verdict="reject", root=tmp_path)
    accepted = accepted_examples(batch, require_review=True, root=tmp_path)
    assert accepted.rows == [] and len(accepted.excluded) == 60 and accepted.review.state == "rejected"


def test_bad_decisions_are_refused_with_a_reason(batch, tmp_path):
    with pytest.raises(ReviewError, match="verdict must be one of"):
        record_decision(batch, reviewer="x", verdict="maybe", root=tmp_path)
    with pytest.raises(ReviewError, match=r"row id\(s\) \['nope'\] are not in batch abc12345"):
        record_decision(batch, reviewer="x", verdict="reject", rows=["nope"], root=tmp_path)
    with pytest.raises(ReviewError, match="reviewer"):
        record_decision(batch, reviewer=" ", verdict="accept", root=tmp_path)
    with pytest.raises(ReviewError, match="not a synthetic batch folder"):
        record_decision(tmp_path, reviewer="x", verdict="accept", root=tmp_path)
    record_decision(batch, reviewer="x", verdict="accept", root=tmp_path)
    path = tmp_path / "reviews" / "synthetic" / "e4" / "2026-11-07" / "decisions.jsonl"
    path.write_text(path.read_text() + "{broken\n")
    with pytest.raises(ReviewError, match=r"decisions.jsonl:2: not a review decision"):
        review_status(batch, root=tmp_path)
