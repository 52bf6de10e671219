"""Jobs. `eval_eN` materializes environment N's path (corpus -> dataset -> eval -> triage) for the
registry's default models; other models' eval assets are materialized from the UI or
with an explicit selection."""

from __future__ import annotations

import dagster as dg

from sv_dagster.assets.evals import eval_asset_key
from sv_dagster.assets.triage import triage_asset_key
from sv_dagster.core.envs import EnvSpec
from sv_dagster.core.registry import ModelSpec


def eval_job(env: EnvSpec, models: dict[str, ModelSpec]) -> dg.UnresolvedAssetJobDefinition:
    chosen = [m for m in models.values() if m.default and m.supports(env.short)]
    defaults = [eval_asset_key(env, m) for m in chosen]
    if not defaults:
        raise ValueError(f"no default model in the registry evaluates {env.short}; mark one `default: true`")
    return dg.define_asset_job(
        name=f"eval_{env.short}",
        selection=dg.AssetSelection.assets(*defaults).upstream()
        | dg.AssetSelection.assets(*(triage_asset_key(env, m) for m in chosen)),
        description=f"{env.env_id}: corpus -> dataset -> eval for the default models "
        f"({', '.join(m.name for m in models.values() if m.default)}).",
        tags={"sv/env": env.short},
    )
