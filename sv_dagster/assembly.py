"""The definitions, assembled on request: assets, jobs, schedules and resources in one Definitions.

`sv_dagster.definitions` (the code location Dagster loads) builds them at import; a
command that builds its own imports `build_definitions` from here, so it builds once.

Provenance is applied in one place: every asset is declared through
`sv_dagster.assets.recipe.provenance_asset`, and `require_provenance` below refuses to load
a definition set with any asset declared otherwise.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable

import dagster as dg
from dotenv import load_dotenv

from sv_dagster.assets.ablation import ablation_assets, ablation_jobs
from sv_dagster.assets.cotrain import cotrain_assets
from sv_dagster.assets.datasets import build_data_assets
from sv_dagster.assets.evals import (
    build_eval_assets,
    build_ood_eval_assets,
    build_regression_checks,
    build_rescore_assets,
    eval_asset_key,
    ood_eval_asset_key,
)
from sv_dagster.assets.recipe import PROVENANCE_TAG
from sv_dagster.assets.reports import build_report_assets
from sv_dagster.assets.study import study_assets, study_env, study_keys
from sv_dagster.assets.synthetic import build_synthetic_assets
from sv_dagster.assets.tournament import tournament_assets, tournament_keys
from sv_dagster.assets.training import training_assets
from sv_dagster.assets.triage import build_triage_assets
from sv_dagster.core.artifacts.paths import PROJECT_ROOT
from sv_dagster.core.artifacts.redaction import install_log_redaction
from sv_dagster.core.envs import ENVS
from sv_dagster.core.models.registry import registry_path
from sv_dagster.jobs import demo_job, eval_job, program_jobs, rescore_job, tournament_jobs
from sv_dagster.jobs.synthetic import synthetic_job, synthetic_schedule
from sv_dagster.jobs.training import study_jobs, training_jobs
from sv_dagster.resources import ExperimentTracking, ModelRegistry, PipesLauncher
from sv_dagster.schedules import program_schedules
from sv_dagster.training.catalog import load_models

OWNER = "team:sv-research"

# We use two non-stable APIs on purpose (Output.data_version, Definitions.map_asset_specs);
# dagster is pinned, and the definitions snapshot test catches a behaviour change.
warnings.filterwarnings("ignore", category=dg.PreviewWarning)
warnings.filterwarnings("ignore", category=dg.BetaWarning)


def require_provenance(assets: Iterable[dg.AssetsDefinition]) -> None:
    missing = [
        key.to_user_string()
        for assets_def in assets
        for key in assets_def.keys
        if assets_def.tags_by_key.get(key, {}).get(PROVENANCE_TAG) is None
    ]
    if missing:
        raise ValueError(f"assets declared without provenance_asset: {missing}")


def build_definitions() -> dg.Definitions:
    load_dotenv(PROJECT_ROOT / ".env")  # API keys and endpoints; .env is git-ignored
    if os.environ.get("SV_SECRETS_FILE"):  # or a dotenv file kept outside the repository
        load_dotenv(os.environ["SV_SECRETS_FILE"])
    install_log_redaction()  # every process that loads the code location: CLI, webserver, daemon, step workers
    models = load_models()
    envs = list(ENVS.values())
    evals = [a for env in envs for a in build_eval_assets(env, models)]
    eval_keys = [key for assets_def in evals for key in assets_def.keys]
    # Evals of models trained here depend on their checkpoint and may make nothing in a run
    # (no promoted checkpoint yet): nothing else depends on them but their triage.
    untrained = {
        eval_asset_key(env, m)
        for env in envs
        for m in models.values()
        if m.checkpoint_asset is None and m.supports(env.short)
    }
    # eval_ood/<env>/<model>: the sweep models on the `ood` split, where a source is marked `ood: true`.
    ood_evals = [a for env in envs for a in build_ood_eval_assets(env, models)]
    ood_keys = [key for assets_def in ood_evals for key in assets_def.keys]
    untrained |= {ood_eval_asset_key(env, m) for env in envs for m in models.values() if m.checkpoint_asset is None}
    # corpus/<id> for every source (configs/sources.yaml and the environments' own), dataset/<env>,
    # and their blocking suites.
    data, data_checks = build_data_assets(envs)
    # synthetic/<env> (daily partitions); a generator that reads defender failures picks its own from these
    # (not from trained models' evals: those checkpoints train on synthetic data, a cycle).
    failure_keys = [k for k in eval_keys if k in untrained] + tournament_keys()
    synthetic, synthetic_checks = build_synthetic_assets(failure_keys)
    # sft_data -> checkpoints -> safety reviews -> promotion, from configs/training/.
    training, training_checks = training_assets()
    training += [*cotrain_assets(), *ablation_assets(), *study_assets()]
    assets = [
        *data,
        *synthetic,
        *training,
        *evals,
        *ood_evals,
        *(a for env in envs for a in build_triage_assets(env, models)),
        *(a for env in envs for a in build_rescore_assets(env, models)),
        *build_report_assets(
            [key for key in [*eval_keys, *ood_keys] if key in untrained],
            [
                key
                for a in training
                for key in a.keys
                if key.path[0] in ("checkpoint", "ablation") and key.path[-1] != "promoted"
            ],
            optional_eval_keys=[key for key in [*eval_keys, *ood_keys] if key not in untrained],
            promoted_keys=[
                key for a in training for key in a.keys if key.path[0] == "checkpoint" and key.path[-1] == "promoted"
            ],
        ),
        *tournament_assets(),
    ]
    require_provenance(assets)
    jobs = {
        job.name: job
        for job in [
            *(eval_job(env, models) for env in envs),
            *(rescore_job(env, models) for env in envs),
            demo_job(envs, models),
            *tournament_jobs(),
            *program_jobs(envs, models),
            synthetic_job(),
            *training_jobs(models),
            *ablation_jobs(),
            *study_jobs({name: (study_env(name), key) for name, key in study_keys().items()}),
        ]
    }
    # Deployment choices from the environment (docs/deploy.md): the executor (SV_EXECUTOR)
    # and, for an fsspec artifact root (SV_OUTPUTS_DIR=s3://...), an IO manager in that store.
    from sv_dagster.assets.recipe import artifact_io_managers
    from sv_dagster.executors import executor_from_env

    defs = dg.Definitions(
        assets=assets,
        asset_checks=[
            *data_checks,
            *synthetic_checks,
            *training_checks,
            *(c for env in envs for c in build_regression_checks(env, models)),
        ],
        jobs=list(jobs.values()),
        schedules=[*program_schedules(jobs), synthetic_schedule(jobs["synthetic_daily"])],
        resources={
            "models": ModelRegistry(registry_path=str(registry_path())),
            "launcher": PipesLauncher(),
            "tracking": ExperimentTracking(),
            **artifact_io_managers(),
        },
        executor=executor_from_env(),
    )
    # One policy for every asset: owner shown in the UI.
    return defs.map_asset_specs(func=lambda spec: spec.replace_attributes(owners=[OWNER]))
