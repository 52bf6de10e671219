"""`sv-dagster review synthetic`: a human spot-check decision on a synthetic batch."""

from __future__ import annotations

import click

from sv_dagster.cli._context import SeveralValues, env_choice, verbose_option


@click.group(help="record a human spot-check decision on a synthetic batch")
@verbose_option
def review() -> None:
    pass


@review.command(
    cls=SeveralValues,
    several=("--rows",),
    help="record a spot-check decision on a synthetic batch (decisions file + asset check evaluation "
    "and observation in the instance)",
)
@click.argument("env", type=env_choice(), metavar="ENV")
@click.option("--partition", required=True, help="the batch's day, YYYY-MM-DD")
@click.option("--reviewer", required=True)
@click.option("--verdict", required=True, type=click.Choice(["accept", "reject"]))
@click.option("--rows", multiple=True, help="row ids the verdict is about (default: the whole batch)")
@click.option("--note", default="")
@verbose_option
def synthetic(env, partition, reviewer, verdict, rows, note) -> int:
    from sv_dagster.jobs.synthetic import main_review

    return main_review(env, partition, reviewer, verdict, list(rows), note)
