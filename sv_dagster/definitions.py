"""The code location: assets, jobs, schedules and resources in one Definitions.

Provenance is applied in one place: every asset is declared through
`sv_dagster.assets.recipe.provenance_asset`, and `require_provenance` below refuses to load
a definition set with any asset declared otherwise.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable

import dagster as dg
from dotenv import load_dotenv

from sv_dagster.assets.corpora import corpus_iot23
from sv_dagster.assets.datasets import dataset_e1
from sv_dagster.assets.evals import build_eval_assets, build_regression_checks, build_rescore_assets
from sv_dagster.assets.recipe import PROVENANCE_TAG
from sv_dagster.assets.reports import build_report_assets
from sv_dagster.assets.triage import build_triage_assets
from sv_dagster.core.envs import ENVS
from sv_dagster.core.paths import PROJECT_ROOT
from sv_dagster.core.registry import load_registry, registry_path
from sv_dagster.jobs import eval_job, program_jobs, rescore_job
from sv_dagster.resources import ModelRegistry
from sv_dagster.schedules import program_schedules

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
    models = load_registry()
    e1 = ENVS["e1"]
    evals = build_eval_assets(e1, models)
    assets = [
        corpus_iot23,
        dataset_e1,
        *evals,
        *build_triage_assets(e1, models),
        *build_rescore_assets(e1, models),
        *build_report_assets([key for assets_def in evals for key in assets_def.keys]),
    ]
    require_provenance(assets)
    jobs = {job.name: job for job in [eval_job(e1, models), rescore_job(e1, models), *program_jobs([e1], models)]}
    defs = dg.Definitions(
        assets=assets,
        asset_checks=build_regression_checks(e1, models),
        jobs=list(jobs.values()),
        schedules=program_schedules(jobs),
        resources={"models": ModelRegistry(registry_path=str(registry_path()))},
    )
    # One policy for every asset: owner shown in the UI.
    return defs.map_asset_specs(func=lambda spec: spec.replace_attributes(owners=[OWNER]))


defs = build_definitions()
