"""The research program's jobs and schedules: weekly sweep, nightly regression, monthly
report (with plots), and the ticks and run requests of each schedule."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from sv_dagster.assembly import build_definitions
from tests.integration.test_definitions import EXPECTED_SCHEDULES


@pytest.fixture(scope="module")
def defs() -> dg.Definitions:
    return build_definitions()


def test_schedules_are_utc_and_stopped_by_default(defs):
    schedules = {s.name: s for s in defs.schedules}
    assert set(schedules) == set(EXPECTED_SCHEDULES)  # crons and jobs: the definitions snapshot
    assert all(
        s.execution_timezone == "UTC" and s.default_status == dg.DefaultScheduleStatus.STOPPED
        for s in schedules.values()
    )


def ticks(schedule: dg.ScheduleDefinition, start: datetime, n: int) -> list[datetime]:
    from dagster._utils.schedules import cron_string_iterator

    iterator = cron_string_iterator(start.timestamp(), schedule.cron_schedule, "UTC")
    return [next(iterator) for _ in range(n)]


def test_next_ticks(defs):
    start = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)  # a Sunday
    by_name = {s.name: s for s in defs.schedules}
    assert [t.strftime("%a %d %H:%M") for t in ticks(by_name["weekly_sweep_schedule"], start, 2)] == [
        "Mon 23 06:00",
        "Mon 30 06:00",
    ]
    assert [t.strftime("%m-%d %H:%M") for t in ticks(by_name["monthly_report_schedule"], start, 2)] == [
        "12-01 07:00",
        "01-01 07:00",
    ]
    assert [t.strftime("%d %H:%M") for t in ticks(by_name["nightly_regression_schedule"], start, 2)] == [
        "23 03:00",
        "24 03:00",
    ]
    assert [t.strftime("%d") for t in ticks(by_name["biweekly_full_eval_schedule"], start, 2)] == ["25", "02"]


def test_run_requests(defs):
    by_name = {s.name: s for s in defs.schedules}
    with dg.DagsterInstance.ephemeral() as instance:

        def evaluate(name: str, when: datetime):
            context = dg.build_schedule_context(instance=instance, scheduled_execution_time=when)
            return by_name[name].evaluate_tick(context)

        even = evaluate("biweekly_full_eval_schedule", datetime(2026, 11, 25, 4, tzinfo=UTC))  # ISO week 48
        odd = evaluate("biweekly_full_eval_schedule", datetime(2026, 12, 2, 4, tzinfo=UTC))  # ISO week 49
        assert len(even.run_requests) == 1 and even.run_requests[0].tags["sv/iso_week"] == "48"
        assert not odd.run_requests and "odd" in odd.skip_message
        monthly = evaluate("monthly_report_schedule", datetime(2026, 12, 1, 7, tzinfo=UTC))
        (request,) = monthly.run_requests
        assert request.run_config["ops"]["reports__monthly"]["config"]["month"] == "2026-11"
        weekly = evaluate("weekly_sweep_schedule", datetime(2026, 11, 23, 6, tzinfo=UTC))
        assert len(weekly.run_requests) == 1 and weekly.run_requests[0].tags["sv/schedule"] == "weekly_sweep"


def test_weekly_sweep_nightly_and_monthly_jobs_run_offline(defs, isolated: Path):
    instance = dg.DagsterInstance.get()
    defs = build_definitions()
    weekly = defs.resolve_job_def("weekly_sweep").execute_in_process(instance=instance)
    assert weekly.success
    summary_dir = Path(
        instance.get_latest_materialization_event(dg.AssetKey(["eval", "e1", "heuristic"]))
        .asset_materialization.metadata["artifact_path"]
        .value
    )
    assert json.loads((summary_dir / "summary.json").read_text())["n_examples"] == 10  # the quick sweep's N
    # E1's OOD split (the sources marked `ood: true`) is evaluated beside test, in a folder of its own.
    ood_event = instance.get_latest_materialization_event(dg.AssetKey(["eval_ood", "e1", "heuristic"]))
    assert ood_event is not None and ood_event.run_id == summary_dir.name
    ood_dir = Path(ood_event.asset_materialization.metadata["artifact_path"].value)
    assert ood_dir.name == f"{summary_dir.name}-ood"
    assert json.loads((ood_dir / "metadata.json").read_text())["dataset"]["split"] == "ood"
    assert json.loads((ood_dir / "summary.json").read_text())["n_examples"] == 10
    # Only environments whose sources include an OOD one get an OOD eval.
    assert {key.path[1] for key in instance.get_asset_keys() if key.path[0] == "eval_ood"} == {"e1"}

    nightly = defs.resolve_job_def("nightly_regression").execute_in_process(instance=instance)
    assert nightly.success
    checks = nightly.get_asset_check_evaluations()
    gates = [e for e in checks if e.check_name == "regression_gate"]
    assert gates and all(e.passed for e in checks if e.check_name != "regression_gate")  # the data suites
    # No baseline is recorded on a fresh instance: every gate warns, none passes or blocks.
    assert all(
        not e.passed and e.severity == dg.AssetCheckSeverity.WARN and e.metadata["state"].value == "NO BASELINE"
        for e in gates
    )

    week = datetime.now(UTC).isocalendar()
    weekly_md = (isolated / "outputs" / "reports" / "weekly" / f"{week[0]}-W{week[1]:02d}.md").read_text()
    assert "| e1 | heuristic |" in weekly_md and "SAMPLE" in weekly_md and "summary.json" in weekly_md
    weekly_ood = weekly_md.split("## Out-of-distribution (OOD)", 1)[1].split("\n## ", 1)[0]
    assert "| e1 | heuristic | 10 | 10 |" in weekly_ood  # n (test), n (ood): the sweep's test run beside it

    tournament = defs.resolve_job_def("tournament_e5_e6").execute_in_process(
        instance=instance, run_config={"ops": {"tournament__e5_e6": {"config": {"rounds": 2, "limit": 6}}}}
    )
    assert tournament.success

    monthly = defs.resolve_job_def("monthly_report").execute_in_process(instance=instance)
    assert monthly.success
    month_dir = isolated / "outputs" / "reports" / "monthly" / f"{datetime.now(UTC):%Y-%m}"
    pngs = sorted(p.name for p in month_dir.glob("*.png"))
    assert pngs == [
        "attacker-success.png",
        "cost-per-model.png",
        "reliability-e1.png",
        "reliability-e4.png",
        "reward-trend-e1.png",
        "reward-trend-e2.png",
        "reward-trend-e3.png",
        "reward-trend-e4.png",
        "reward-trend-e5.png",
        "reward-trend-e6.png",
    ]  # no reliability diagram where answers carry no label
    for png in month_dir.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    page = (month_dir / "report.html").read_text()
    assert "<table>" in page and 'src="reliability-e1.png"' in page and "summary.json" in page
    report = (month_dir / "report.md").read_text()
    # Weekly and nightly, each on e1..e6, and the weekly OOD eval of e1 (not the tournament's own).
    assert "13 eval materializations this month (1 on the ood split)." in report
    ood_section = report.split("## Out-of-distribution (OOD)", 1)[1].split("\n## ", 1)[0]
    header = next(line for line in ood_section.splitlines() if line.startswith("| env |"))
    assert {"n (test)", "n (ood)", "accuracy (ood)", "F1 gap", "FNR (ood)", "ECE gap"} <= {
        cell.strip() for cell in header.split("|")
    }
    # The OOD eval is read beside the test eval of its own run: the sweep's N on both sides.
    [row] = [line for line in ood_section.splitlines() if line.startswith("| e1 | heuristic |")]
    assert row.startswith("| e1 | heuristic | 10 | 10 |") and "[ood](" in row and "[test](" in row
    assert "## Attacker success" in report and "| heuristic | heuristic |" in report and "tournament.json" in report
    board = json.loads((isolated / "outputs" / "reports" / "scoreboard" / "e1.json").read_text())
    assert board["rows"][0]["model"] == "heuristic" and board["rows"][0]["n_examples"] == 49
    # The OOD eval is ranked only among OOD evals, in a table after the test split's.
    assert [(r["split"], r["rank"], r["n_examples"]) for r in board["rows"]] == [("test", 1, 49), ("ood", 1, 10)]
    # Every sourced row of the program's reports renders again from the files it cites.
    from sv_dagster.core.reporting.audit import audit_report

    weekly_path = isolated / "outputs" / "reports" / "weekly" / f"{week[0]}-W{week[1]:02d}.md"
    for path in (month_dir / "report.md", weekly_path, isolated / "outputs" / "reports" / "scoreboard" / "e1.md"):
        result = audit_report(path)
        assert result.ok and result.rows >= 1, (path, result.problems)
