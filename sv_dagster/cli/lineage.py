"""`sv-dagster lineage` and `audit`: where a materialization or a report's row came from, and
every number of a report checked against the files it cites."""

from __future__ import annotations

import click

from sv_dagster.cli._context import session, verbose_option


@click.command(help="print an asset's lineage to its roots, from the instance's event log")
@click.argument("asset_key")
@click.option("--partition", default=None)
@click.option("--json", "as_json", is_flag=True, help="the full graph, machine-readable")
@click.option("--run", "run_id", default=None, help="the materialization this run made (an id prefix is enough)")
@click.option("--data-version", default=None, help="the materialization with this data version (a prefix)")
@click.option(
    "--row",
    type=int,
    default=None,
    help="ASSET_KEY is a report: trace the table row on this line (as `audit` prints it)",
)
@verbose_option
def lineage(asset_key, partition, as_json, run_id, data_version, row) -> int:
    """ASSET_KEY: e.g. eval/e1/heuristic or reports/monthly, or a report's .md with --row."""
    from sv_dagster.instance.lineage import main_lineage

    return main_lineage(
        asset_key,
        partition,
        as_json,
        run_id=run_id,
        data_version=data_version,
        row=row,
        build_definitions=session().definitions,
    )


@click.command(help="check every number in a report against the files it cites")
@click.argument("report")
@verbose_option
def audit(report: str) -> int:
    """REPORT: a report's .md (or its .html, or a monthly report's folder)."""
    from sv_dagster.core.reporting.audit import main_audit

    return main_audit(report)
