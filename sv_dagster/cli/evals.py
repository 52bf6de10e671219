"""`sv-dagster eval`, `resume` and `rescore`: evaluate registry models on one environment,
continue a killed eval run, score stored completions again."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from sv_dagster.cli._console import console_logs, execute, instance, report
from sv_dagster.cli._context import (
    CommandError,
    SeveralValues,
    env_choice,
    eval_folder,
    positive_int,
    session,
    verbose_option,
)
from sv_dagster.core.reporting.console import shown


@click.command("eval", cls=SeveralValues, several=("--models",), help="evaluate registry models on one environment")
@click.argument("env", type=env_choice(), metavar="ENV")
@click.option("--models", multiple=True, required=True, help="registry names")
@click.option(
    "--n",
    default=None,
    help="examples per model (a seeded subset), at most the split's size (more is an error); "
    "'all' for the whole split for every model; unset, the whole split except for a model whose "
    "registry entry sets a `limit` for this environment (its N)",
)
@click.option("--seed", type=int, default=42)
@click.option(
    "--dataset",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="evaluate your own JSONL file (its rows are the test split of dataset/<env>; each line the "
    "environment's own row or {question, answer, meta|info}); bad lines are listed and left out",
)
@click.option("--split", default="test")
@click.option("--concurrency", default=None, callback=positive_int, help="parallel requests (default: the model's own)")
@click.option(
    "--target",
    default="heuristic",
    help="E5: the registry model the attacker talks to (default: the rule-based defender)",
)
@click.option(
    "--include-tools",
    type=click.Choice(["true", "false"]),
    default="true",
    help="offer the environment's tools to the model (E2); false = answer from the prompt alone",
)
@verbose_option
def eval_command(env, models, n, seed, dataset, split, concurrency, target, include_tools) -> int:
    from sv_dagster.core.eval_request import parse_n

    return run_eval_command(
        env,
        [name for chunk in models for name in chunk.split()],
        parse_n(n) if n is not None else None,
        seed,
        split,
        concurrency,
        include_tools == "true",
        target,
        session().verbose,
        dataset,
    )


def run_eval_command(
    env_short: str,
    models: list[str],
    n: int | str | None,
    seed: int,
    split: str,
    concurrency: int | None,
    include_tools: bool = True,
    target: str = "heuristic",
    verbose: bool = False,
    dataset_file: Path | None = None,
) -> int:
    """eval/<env>/<model> for each model, as one Dagster run on the project's instance (so it
    shows in the UI with lineage), after dataset/<env> is built when it must be
    (instance.datasets.dataset_plan); split and N are checked against the built dataset before
    the eval run starts. `n`: a number of examples, `ALL` (the whole split, a model's registry
    `limit` notwithstanding) or None (the whole split, or the registry's `limit` of a model
    that has one)."""
    import dagster as dg

    from sv_dagster.assets.evals import eval_asset_key
    from sv_dagster.core.envs import ENVS, env_by_id
    from sv_dagster.core.eval_request import ALL, check_limit, check_models, check_split, split_sizes
    from sv_dagster.instance.datasets import corpus_file_note, dataset_plan, user_file_note
    from sv_dagster.training.catalog import load_models

    started = time.perf_counter()
    defs = session().definitions()
    env, registry = ENVS[env_short], load_models()
    on = instance()
    # Each check raises a user error, which `main` prints as one line: nothing has run yet.
    check_models(env.short, models, registry)
    if env.counterpart_env:  # the model on the other side of the dialogue (E5's target)
        other = env_by_id(env.counterpart_env).short
        check_models(other, [target], registry, label="--target model", side=f" (the side {env.short} talks to)")
    user = None
    if dataset_file is not None:
        from sv_dagster.core.data.user_dataset import usable_user_rows

        user = usable_user_rows(env.short, dataset_file)  # every row, before any run or model call
        for line in user.reject_lines():
            print(f"left out {line}", file=sys.stderr)
        print(
            f"--dataset {shown(user.path)}: {len(user.rows)} usable row(s), {len(user.rejects)} left out "
            f"(sha256 {user.sha256[:12]})",
            file=sys.stderr,
        )
    dataset_key = dg.AssetKey(["dataset", env.short])
    plan = dataset_plan(on, dataset_key, defs.resolve_asset_graph().get(dataset_key).parent_keys, user)
    for why in plan.reasons:
        print(f"{why}: building it and dataset/{env.short} again", file=sys.stderr)
    if plan.build:
        code = _build_dataset(defs, on, dataset_key, plan.corpora, user, verbose, started)
        if code:
            return code
    dataset = on.get_latest_materialization_event(dataset_key)
    metadata_file = Path(dataset.asset_materialization.metadata["artifact_path"].value) / "metadata.json"
    if metadata_file.exists():  # else (an outputs root on another machine) the eval asset checks them
        sizes = split_sizes(metadata_file)
        check_split(split, sizes, f"dataset/{env.short}")
        check_limit(n if isinstance(n, int) else None, split, sizes[split], f"dataset/{env.short}")
    keys = {eval_asset_key(env, registry[name]) for name in models}
    op_config = {
        "limit": None if n == ALL else n,
        "all_examples": n == ALL,  # over a model's registry `limit` too
        "seed": seed,
        "split": split,
        "concurrency": concurrency,
        "include_tools": include_tools,
        "target_model": target,
    }
    run_config = {**console_logs(verbose), "ops": {"__".join(key.path): {"config": op_config} for key in keys}}
    job = defs.resolve_implicit_global_asset_job_def()
    subset = job.get_subset(asset_selection=dg.AssetSelection.assets(*keys).resolve(defs.resolve_asset_graph()))
    tags = {"sv/env": env.short, "sv/trigger": "eval-command"}
    result = execute(subset, verbose, run_config, tags, on=on)
    note = user_file_note(dataset) or corpus_file_note(on, dataset, env.sample_note)
    return report(result, f"eval {env_short} ({', '.join(models)})", started, data_note=note)


def _build_dataset(defs, on, dataset_key, corpora: list, user, verbose: bool, started: float) -> int:
    """dataset/<env> (with `corpora`) as a run of its own, from the user's file when one is
    given; 0, or the failed run's report's exit status."""
    import dagster as dg

    selection = dg.AssetSelection.assets(dataset_key, *corpora)
    config = {"user_file": str(user.path)} if user is not None else {}
    run_config = {**console_logs(verbose), "ops": {"__".join(dataset_key.path): {"config": config}}}
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection=selection.resolve(defs.resolve_asset_graph())
    )
    result = execute(job, verbose, run_config, {"sv/env": dataset_key.path[1], "sv/trigger": "eval-command"}, on=on)
    return 0 if result.success else report(result, f"{dataset_key.to_user_string()} for the eval", started)


@click.command(help="continue a killed or failed eval run in its own results folder")
@click.argument("run_id")
@verbose_option
def resume(run_id: str) -> int:
    """The killed run's eval assets again, each continuing the killed run's results folder
    (`resume_run_id`), as one new run."""
    import dagster as dg

    from sv_dagster.runs import plan_resume

    started = time.perf_counter()
    on = instance()
    defs = session().definitions()
    plan = plan_resume(on, run_id, defs.resolve_asset_graph().get_all_asset_keys())  # a user error: `main`
    selection: dg.AssetSelection = dg.AssetSelection.assets(*plan.eval_keys)
    datasets = {dg.AssetKey(["dataset", key.path[1]]) for key in plan.eval_keys}
    if any(on.get_latest_materialization_event(key) is None for key in datasets):
        selection = selection.upstream()  # killed before its dataset was built
    job = defs.resolve_implicit_global_asset_job_def()
    subset = job.get_subset(asset_selection=selection.resolve(defs.resolve_asset_graph()))
    verbose = session().verbose
    result = execute(subset, verbose, {**plan.run_config, **console_logs(verbose)}, plan.tags, on=on)
    return report(result, f"resume of run {run_id}", started)


@click.command(help="re-score stored completions with the current verifier")
@click.argument("eval_dir", type=click.Path(path_type=Path))
@click.option("--reward-config", type=click.Path(path_type=Path), default=None)
@verbose_option
def rescore(eval_dir: Path, reward_config: Path | None) -> int:
    import uuid

    from sv_dagster.core.artifacts.paths import outputs_root
    from sv_dagster.core.envs import env_by_id
    from sv_dagster.core.evals.evaluation import rescore as rescore_folder
    from sv_dagster.core.reporting.figures import format_table

    if reward_config is not None and not reward_config.is_file():
        raise CommandError(f"--reward-config {reward_config}: no such file")
    metadata = json.loads((eval_folder(eval_dir) / "metadata.json").read_text())
    env = env_by_id(metadata["env"])
    run_id = f"rescore-{uuid.uuid4().hex[:12]}"
    run = rescore_folder(env, eval_dir, outputs_root=outputs_root(), run_id=run_id, reward_config=reward_config)
    print(format_table([json.loads(Path(eval_dir, "summary.json").read_text()), run.summary], env.columns))
    print(f"\nre-scored {eval_dir} -> {run.run_dir}")
    return 0
