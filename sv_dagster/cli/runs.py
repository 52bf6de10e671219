"""`sv-dagster runs reap`: run housekeeping."""

from __future__ import annotations

import click

from sv_dagster.cli._console import instance
from sv_dagster.cli._context import verbose_option


@click.group(help="run housekeeping")
@verbose_option
def runs() -> None:
    pass


@runs.command(help="mark runs whose process is gone failed and free their pool slots (every command does this first)")
@verbose_option
def reap() -> int:
    from sv_dagster.runs import reap_dead_runs

    on = instance(reap=False)
    reaped = reap_dead_runs(on)
    for run in reaped:
        print(f"marked failed: run {run.run_id} ({run.job_name}); its process ({run.owner}) is gone")
    print(f"{len(reaped)} dead run(s) reaped on {on.root_directory}")
    return 0
