"""`sv-dagster signoff`: a human's sign-off on a reviewed checkpoint; promotes it when approved."""

from __future__ import annotations

import time
from pathlib import Path

import click

from sv_dagster.cli._console import console_logs, execute, report
from sv_dagster.cli._context import env_choice, session, verbose_option
from sv_dagster.core.reporting.console import shown


@click.command(help="a human sign-off on a reviewed checkpoint; promotes it when approved")
@click.argument("env", type=env_choice(), metavar="ENV")
@click.option("--reviewer", required=True)
@click.option("--verdict", required=True, type=click.Choice(["approve", "reject"]))
@click.option("--note", default="")
@verbose_option
def signoff(env: str, reviewer: str, verdict: str, note: str) -> int:
    """Job `promote_<env>`: the sign-off is an asset, so it is in the promoted checkpoint's lineage."""
    import dagster as dg

    started = time.perf_counter()
    verbose = session().verbose
    job = session().definitions().resolve_job_def(f"promote_{env}")
    if verdict != "approve":  # a rejection is recorded; there is nothing to promote
        job = job.get_subset(asset_selection={dg.AssetKey(["safety_signoff", env])})
    run_config = {
        **console_logs(verbose),
        "ops": {f"safety_signoff__{env}": {"config": {"reviewer": reviewer, "verdict": verdict, "note": note}}},
    }
    result = execute(job, verbose, run_config)
    if not result.success:
        return report(result, f"promote_{env}", started)
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        path = Path(materialization.metadata["artifact_path"].value)
        print(f"{materialization.asset_key.to_user_string()}: {shown(path)}")
    print("promoted" if verdict == "approve" else "sign-off recorded: rejected (not promoted)")
    return 0
