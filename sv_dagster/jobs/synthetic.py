"""`synthetic_daily`: the six synthetic/<env> batches of one day (a partitioned job), its
STOPPED daily schedule, the demo's run of it, and the review run that records a
reviewer's decision.

The job holds only the synthetic assets: their seeds (curated datasets, evals, the
tournament) are read from the instance as last materialized, and a missing one is recorded
in the batch's provenance, never rebuilt here. The spot checks run with the job and fail
(non-blocking) until a reviewer decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg

from sv_dagster.assets.synthetic import SYNTHETIC_PARTITIONS, build_spot_check, synthetic_keys

if TYPE_CHECKING:  # what build_schedule_from_partitioned_job gives for an asset job; not exported
    from dagster._core.definitions.partitions.partitioned_schedule import UnresolvedPartitionedAssetScheduleDefinition
from sv_dagster.core.data.synthetic.review import (
    Decision,
    ReviewError,
    ReviewStatus,
    decisions_path,
    record_decision,
    review_status,
)
from sv_dagster.core.envs import ENVS
from sv_dagster.instance.synthetic import CHECK_NAME, latest_batch, observe_decision, record_version, synthetic_key
from sv_dagster.runs import owner_tags

SYNTHETIC_JOB = "synthetic_daily"
DEMO_PARTITION = "2026-11-22"
"""The day `make demo` generates: pinned, because each batch's seed derives from its partition,
so a fresh clone prints the synthetic and training tables of docs/demo.md on any day."""


def synthetic_job() -> dg.UnresolvedAssetJobDefinition:
    return dg.define_asset_job(
        name=SYNTHETIC_JOB,
        selection=dg.AssetSelection.assets(*synthetic_keys()),
        partitions_def=SYNTHETIC_PARTITIONS,
        description="One day's synthetic batches of every environment (templates -> optional seed models -> schema validation -> "
        "the environment's verifier -> 5% spot-check queue). Needs a partition key (YYYY-MM-DD).",
        tags={"sv/program": SYNTHETIC_JOB},
    )


def synthetic_schedule(
    job: dg.UnresolvedAssetJobDefinition,
) -> UnresolvedPartitionedAssetScheduleDefinition | dg.ScheduleDefinition:
    """02:00 UTC every day, for the day that just ended; STOPPED until turned on."""
    return dg.build_schedule_from_partitioned_job(
        job,
        name=f"{SYNTHETIC_JOB}_schedule",
        hour_of_day=2,
        minute_of_hour=0,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        tags={"sv/schedule": SYNTHETIC_JOB},
        description="Daily 02:00 UTC: the previous day's synthetic batches (spot-check queues await review).",
    )


def run_synthetic_demo(
    instance: dg.DagsterInstance, job: dg.JobDefinition, partition: str | None = None, run_config: dict | None = None
) -> tuple[bool, str]:
    """Execute `synthetic_daily` (`job`, resolved from the code location by the caller) in-process
    for one partition (default: the latest) and return (success, a short table of the batches)
    for the demo's output."""
    partition = partition or SYNTHETIC_PARTITIONS.get_last_partition_key()
    result = job.execute_in_process(
        instance=instance, partition_key=partition, run_config=run_config or {}, raise_on_error=False, tags=owner_tags()
    )
    if not result.success:
        failures = [
            e.step_failure_data.error.message.strip()
            for e in result.all_events
            if e.is_step_failure and e.step_failure_data.error is not None
        ]
        return False, f"synthetic_daily {partition}: FAILED\n" + "\n".join(f"  {m[:300]}" for m in failures)
    lines = [
        f"\n== synthetic: {SYNTHETIC_JOB} partition {partition} (SAMPLE templates; spot-check pending review)",
        f"{'env':4} {'accepted':>8} {'rejected':>8} {'review':>6}  label balance",
    ]
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        meta: Mapping[str, Any] = materialization.metadata
        balance = ", ".join(f"{k} {v}" for k, v in meta["label_balance"].value.items())
        lines.append(
            f"{materialization.asset_key.path[1]:4} {meta['accepted'].value:>8} {meta['rejected'].value:>8} "
            f"{meta['review_rows'].value:>6}  {balance}"
        )
    lines.append(
        f"  review: sv-dagster review synthetic <env> --partition {partition} --reviewer NAME --verdict accept|reject"
    )
    return True, "\n".join(lines)


def record_review(
    instance: dg.DagsterInstance,
    env: str,
    partition: str,
    *,
    reviewer: str,
    verdict: str,
    rows: Sequence[str] = (),
    note: str = "",
) -> tuple[Decision, ReviewStatus, bool]:
    """A reviewer's decision on the partition's latest batch: appended to the decisions file,
    then a run of the `spot_check` check for that partition (its evaluation, recorded in a
    run of its own, now reads the decision), and the decision as an observation of the
    partition. (decision, review status, whether the check passed)."""
    batch_dir, record = latest_batch(instance, env, partition)
    decision = record_decision(
        batch_dir, reviewer=reviewer, verdict=verdict, rows=rows, note=note, data_version=record_version(record)
    )
    key = synthetic_key(env)
    # A runless check evaluation cannot repeat for one partition (Dagster's SQLite schema keys
    # runless evaluations by check and partition), so each decision re-runs the check instead.
    job = dg.define_asset_job(
        f"review_synthetic_{env}",
        selection=dg.AssetSelection.checks(dg.AssetCheckKey(key, CHECK_NAME)),
        partitions_def=SYNTHETIC_PARTITIONS,
        tags={"sv/review": decision.id},
    )
    defs = dg.Definitions(
        assets=[dg.AssetSpec(key, partitions_def=SYNTHETIC_PARTITIONS)],
        asset_checks=[build_spot_check(ENVS[env])],
        jobs=[job],
    )
    result = defs.resolve_job_def(job.name).execute_in_process(
        instance=instance,
        tags={"dagster/partition": partition, "sv/review": decision.id, **owner_tags()},
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
    )
    [evaluation] = result.get_asset_check_evaluations()
    status = review_status(batch_dir)
    observe_decision(instance, decision, status)
    return decision, status, evaluation.passed


def main_review(env: str, partition: str, reviewer: str, verdict: str, rows: Sequence[str] = (), note: str = "") -> int:
    """`sv-dagster review synthetic ...`: record the decision on the project's instance and
    print what it did (exit 1 with the reason when it cannot be recorded)."""
    import sys

    instance = dg.DagsterInstance.get()
    try:
        decision, status, passed = record_review(
            instance, env, partition, reviewer=reviewer, verdict=verdict, rows=rows, note=note
        )
    except ReviewError as exc:
        print(f"review not recorded: {exc}", file=sys.stderr)
        return 1
    scope = f"rows {', '.join(decision.rows)}" if decision.rows else "the whole batch"
    print(
        f"recorded {decision.id}: {verdict} of {scope} in synthetic/{env} {partition} (batch {decision.batch_id}) "
        f"by {decision.reviewer} at {decision.time}"
    )
    print(
        f"  spot_check: {'passed' if passed else 'failed'} ({status.state}: {status.reviewed}/{status.sampled} sampled "
        f"rows decided, {len(status.rejected_rows)} row(s) excluded downstream)"
    )
    print(
        f"  decisions file: {_shown(decisions_path(env, partition))}; events in {_shown(Path(instance.root_directory))}"
    )
    return 0


def _shown(path: Path) -> Path:
    from sv_dagster.core.artifacts.paths import PROJECT_ROOT

    return path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path
