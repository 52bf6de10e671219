"""Schedules (UTC). They start STOPPED: turn them on in the UI, or with
`dagster schedule start`, on the machine that runs the daemon."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

STOPPED = dg.DefaultScheduleStatus.STOPPED


def program_schedules(jobs: dict[str, dg.UnresolvedAssetJobDefinition]) -> list[dg.ScheduleDefinition]:
    @dg.schedule(
        name="biweekly_full_eval_schedule",
        job=jobs["biweekly_full_eval"],
        cron_schedule="0 4 * * 3",
        execution_timezone="UTC",
        default_status=STOPPED,
        description="Every other Wednesday 04:00 UTC (even ISO weeks): full evals and the tournament.",
    )
    def biweekly(context: dg.ScheduleEvaluationContext):
        week = context.scheduled_execution_time.isocalendar()[1]
        if week % 2:
            return dg.SkipReason(f"ISO week {week} is odd; the full eval runs on even weeks")
        return dg.RunRequest(
            run_key=f"biweekly-{context.scheduled_execution_time:%G-W%V}",
            tags={"sv/schedule": "biweekly_full_eval", "sv/iso_week": f"{week}"},
        )

    @dg.schedule(
        name="monthly_report_schedule",
        job=jobs["monthly_report"],
        cron_schedule="0 7 1 * *",
        execution_timezone="UTC",
        default_status=STOPPED,
        description="1st of the month 07:00 UTC: the report of the month that just ended.",
    )
    def monthly(context: dg.ScheduleEvaluationContext):
        previous = (context.scheduled_execution_time.replace(day=1) - timedelta(days=1)).strftime("%Y-%m")
        return dg.RunRequest(
            run_key=f"monthly-{previous}",
            run_config={"ops": {"reports__monthly": {"config": {"month": previous}}}},
            tags={"sv/schedule": "monthly_report", "sv/month": previous},
        )

    return [
        dg.ScheduleDefinition(
            name="weekly_sweep_schedule",
            job=jobs["weekly_sweep"],
            cron_schedule="0 6 * * 1",
            execution_timezone="UTC",
            default_status=STOPPED,
            tags={"sv/schedule": "weekly_sweep"},
            description="Mondays 06:00 UTC: quick sweep (N=10) and the weekly report.",
        ),
        biweekly,
        monthly,
        dg.ScheduleDefinition(
            name="nightly_regression_schedule",
            job=jobs["nightly_regression"],
            cron_schedule="0 3 * * *",
            execution_timezone="UTC",
            default_status=STOPPED,
            tags={"sv/schedule": "nightly_regression"},
            description="Daily 03:00 UTC: regression evals of the nightly models, gated against baselines.",
        ),
    ]
