"""`sv-dagster check` and `baseline record`: the regression gate over the latest evals, and
the baselines it compares with."""

from __future__ import annotations

from pathlib import Path

import click

from sv_dagster.cli._context import eval_folder, verbose_option

NO_BASELINE_EXIT = 3
"""`sv-dagster check`'s exit status when no gate failed but some had nothing to compare with."""


@click.command(help="regression gate over the latest evals (exit 1 on a regression, 3 if some have no baseline)")
@verbose_option
def check() -> int:
    return run_check()


def run_check() -> int:
    """The regression gate over every eval asset's latest materialization. Exit 1 on a
    regression, else NO_BASELINE_EXIT when some eval had no baseline, else 0."""
    import dagster as dg

    from sv_dagster.core.artifacts.paths import outputs_root
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evals.gate import FAIL, NO_BASELINE, regression_gate
    from sv_dagster.training.catalog import load_models

    on = dg.DagsterInstance.get()
    states: list[str] = []
    for env in ENVS.values():
        for spec in load_models().values():
            entry = on.get_latest_materialization_event(dg.AssetKey(["eval", env.short, spec.key]))
            if entry is None or entry.asset_materialization is None:
                continue
            run_dir = Path(str(entry.asset_materialization.metadata["artifact_path"].value))
            result = regression_gate(run_dir, outputs_root())
            states.append(result.state)
            detail = (
                "; ".join(result.failures)
                or result.note
                or ", ".join(f"{c.metric} {c.delta:+.4f} (p={c.p_value:.2g})" for c in result.comparisons)
            )
            print(f"{result.state:<11}  eval/{env.short}/{spec.key}  {detail}")
    failed, unchecked = states.count(FAIL), states.count(NO_BASELINE)
    print(f"{len(states)} eval(s) checked, {failed} regression(s), {unchecked} without a baseline to compare with")
    return 1 if failed else NO_BASELINE_EXIT if unchecked else 0


@click.group(help="record an eval folder as its model's baseline")
@verbose_option
def baseline() -> None:
    pass


@baseline.command(help="make an eval folder its (env, model)'s regression baseline")
@click.argument("eval_dir", type=click.Path(path_type=Path))
@verbose_option
def record(eval_dir: Path) -> int:
    from sv_dagster.core.artifacts.paths import outputs_root
    from sv_dagster.core.evals.gate import record_baseline

    print(f"baseline recorded: {record_baseline(eval_folder(eval_dir), outputs_root())}")
    return 0
