"""The code location: assets, jobs, schedules and resources in one Definitions.

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

from sv_dagster.assets.corpora import corpus_iot23
from sv_dagster.assets.datasets import build_bundled_dataset_asset, dataset_e1
from sv_dagster.assets.evals import build_eval_assets, build_regression_checks, build_rescore_assets
from sv_dagster.assets.recipe import PROVENANCE_TAG
from sv_dagster.assets.reports import build_report_assets
from sv_dagster.assets.tournament import tournament_e5_e6
from sv_dagster.assets.triage import build_triage_assets
from sv_dagster.core.envs import ENVS
from sv_dagster.core.paths import PROJECT_ROOT
from sv_dagster.core.registry import load_registry, registry_path
from sv_dagster.jobs import demo_job, eval_job, program_jobs, rescore_job, tournament_job
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


def data_assets(env_short: str) -> list[dg.AssetsDefinition]:
    """What feeds dataset/<env>: E1 curates a corpus; E2-E6 ship their own task sets."""
    if env_short == "e1":
        return [corpus_iot23, dataset_e1]
    return [build_bundled_dataset_asset(ENVS[env_short])]


def build_definitions() -> dg.Definitions:
    load_dotenv(PROJECT_ROOT / ".env")  # API keys and endpoints; .env is git-ignored
    if os.environ.get("SV_SECRETS_FILE"):  # or a dotenv file kept outside the repository
        load_dotenv(os.environ["SV_SECRETS_FILE"])
    models = load_registry()
    envs = list(ENVS.values())
    evals = [a for env in envs for a in build_eval_assets(env, models)]
    assets = [
        *(a for env in envs for a in data_assets(env.short)),
        *evals,
        *(a for env in envs for a in build_triage_assets(env, models)),
        *(a for env in envs for a in build_rescore_assets(env, models)),
        *build_report_assets([key for assets_def in evals for key in assets_def.keys]),
        tournament_e5_e6,
    ]
    require_provenance(assets)
    jobs = {
        job.name: job
        for job in [
            *(eval_job(env, models) for env in envs),
            *(rescore_job(env, models) for env in envs),
            demo_job(envs, models),
            tournament_job(),
            *program_jobs(envs, models),
        ]
    }
    defs = dg.Definitions(
        assets=assets,
        asset_checks=[c for env in envs for c in build_regression_checks(env, models)],
        jobs=list(jobs.values()),
        schedules=program_schedules(jobs),
        resources={"models": ModelRegistry(registry_path=str(registry_path()))},
    )
    # One policy for every asset: owner shown in the UI.
    return defs.map_asset_specs(func=lambda spec: spec.replace_attributes(owners=[OWNER]))


defs = build_definitions()
