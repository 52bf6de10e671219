"""The spot-check in the Dagster instance: finding a partition's batch, the `spot_check`
asset check's outcome (shared by the check and the review command), and a reviewer's
decision as an observation of the synthetic asset's partition, so the decision is in
lineage next to the data it judges (`sv_dagster.jobs.synthetic.record_review` runs it all)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from sv_dagster.core.data.synthetic.review import (
    Decision,
    ReviewError,
    ReviewStatus,
    batch_metadata,
    decisions_path,
    review_status,
    write_accepted,
)
from sv_dagster.instance import DATA_VERSION_TAG, local_artifact_path

CHECK_NAME = "spot_check"


def synthetic_key(env: str) -> dg.AssetKey:
    return dg.AssetKey(["synthetic", env])


def latest_record(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None = None) -> Any | None:
    """The newest materialization record of `key` (of one partition when given)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None), limit=1
    ).records
    return records[0] if records else None


def record_path(record: Any) -> Path | None:
    """The batch folder a materialization recorded, on this machine (fetched from the
    artifact store first when the outputs root is a URL and it is missing here)."""
    if record is None or "artifact_path" not in record.asset_materialization.metadata:
        return None
    return local_artifact_path(record.asset_materialization.metadata)


def record_version(record: Any) -> str | None:
    return (record.event_log_entry.tags or {}).get(DATA_VERSION_TAG) if record is not None else None


def latest_batch(instance: dg.DagsterInstance, env: str, partition: str) -> tuple[Path, Any]:
    record = latest_record(instance, synthetic_key(env), partition)
    if record is None:
        raise ReviewError(
            f"synthetic/{env} has no materialization for partition {partition} in the instance at "
            f"{instance.root_directory}; materialize it first (job synthetic_daily)"
        )
    path = record_path(record)
    if path is None or not (path / "metadata.json").is_file():
        raise ReviewError(f"synthetic/{env} partition {partition}: its batch folder {path} is gone")
    return path, record


def check_outcome(
    batch_dir: Path, status: ReviewStatus | None = None
) -> tuple[bool, dg.AssetCheckSeverity, str, dict[str, Any]]:
    """(passed, severity, description, metadata) of the spot check for a batch: passes once
    the sample is reviewed (a batch-level accept, or a decision on every sampled row); a
    batch rejected as a whole fails with ERROR; a pending review fails with WARN."""
    meta = batch_metadata(batch_dir)
    status = status or review_status(batch_dir)
    command = meta.get("review", {}).get("command", "")
    if status.state == "done":
        description = (
            f"reviewed: {status.reviewed}/{status.sampled} sampled rows; "
            f"{len(status.rejected_rows)} row(s) rejected and excluded downstream"
        )
        passed, severity = True, dg.AssetCheckSeverity.WARN
    elif status.state == "rejected":
        description = (
            f"batch rejected by {status.last.reviewer if status.last else '?'}: every row is excluded downstream"
        )
        passed, severity = False, dg.AssetCheckSeverity.ERROR
    else:
        description = (
            f"pending human review: {status.reviewed}/{status.sampled} sampled rows decided; "
            f"record a decision with `{command}`"
        )
        passed, severity = False, dg.AssetCheckSeverity.WARN
    last = status.last
    metadata: dict[str, Any] = {
        "state": status.state,
        "batch_id": meta["batch_id"],
        "sampled_rows": status.sampled,
        "reviewed_rows": status.reviewed,
        "rejected_rows": len(status.rejected_rows),
        "rejected_ids": dg.MetadataValue.json(status.rejected_rows[:50]),
        "decision_ids": dg.MetadataValue.json(status.decision_ids),
        "review_queue": dg.MetadataValue.path(str(Path(batch_dir) / "spot_check.jsonl")),
        "decisions_file": dg.MetadataValue.path(str(decisions_path(meta["env"], meta["partition"]))),
        "review_command": dg.MetadataValue.text(command),
    }
    if last is not None:
        metadata.update(last_reviewer=last.reviewer, last_verdict=last.verdict, last_time=last.time)
    return passed, severity, description, metadata


def observe_decision(instance: dg.DagsterInstance, decision: Decision, status: ReviewStatus) -> None:
    """The decision as an observation of the synthetic asset's partition (runless: a
    reviewer's act, not a computation), so it sits in the asset's event history."""
    instance.report_runless_asset_event(
        dg.AssetObservation(
            asset_key=synthetic_key(decision.env),
            partition=decision.partition,
            description=f"spot-check decision {decision.id}: {decision.verdict} by {decision.reviewer}",
            metadata={
                "decision_id": decision.id,
                "reviewer": decision.reviewer,
                "time": decision.time,
                "verdict": decision.verdict,
                "rows": dg.MetadataValue.json(list(decision.rows)),
                "note": decision.note,
                "batch_id": decision.batch_id,
                "batch_data_version": decision.data_version or "",
                "review_state": status.state,
            },
            tags={"sv/review": decision.verdict},
        )
    )


def accepted_batch(instance: dg.DagsterInstance, env: str, into: Path) -> dict[str, Any] | None:
    """The synthetic rows a training run may use: the latest materialized batch of `env`
    (any daily partition), minus every row a spot-check reviewer rejected (all of it when
    the batch was rejected), written to `into`. The decisions applied are returned, so
    `sft_data` records them in its provenance; a batch whose review is pending is used and
    marked so. None when no batch was materialized."""
    record = latest_record(instance, synthetic_key(env))
    path = record_path(record)
    if path is None or not (path / "metadata.json").is_file():
        return None
    accepted = write_accepted(path, into)
    meta = batch_metadata(path)
    return {
        "path": str(into),
        "batch_dir": str(path),
        "partition": accepted.partition,
        "batch_id": accepted.batch_id,
        "data_version": record_version(record),
        "n_rows": len(accepted.rows),
        "n_excluded": len(accepted.excluded),
        "review_state": accepted.review.state,
        "decision_ids": accepted.decision_ids,
        "sample": bool(meta.get("sample", True)),
    }
