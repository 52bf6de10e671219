"""Schedules. They start STOPPED: turn them on in the UI (or with
`dagster schedule start`) on the machine that runs the daemon."""

from __future__ import annotations

import dagster as dg


def nightly_regression(job: dg.UnresolvedAssetJobDefinition) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name=f"nightly_{job.name}",
        job=job,
        cron_schedule="0 3 * * *",
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Nightly regression: re-run {job.name} on the default models.",
    )
