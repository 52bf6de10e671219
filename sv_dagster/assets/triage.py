"""triage/<env>/<model>: low-reward examples of the latest eval grouped by cause, written
as `outputs/notes/<date>-triage-<env>-<model>.md` to start the iteration notes."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg

from sv_dagster.assets.common import env_group, write_json
from sv_dagster.assets.evals import eval_asset_key
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.artifacts.redaction import write_redacted
from sv_dagster.core.envs import EnvSpec
from sv_dagster.core.evals.runner import read_results
from sv_dagster.core.evals.triage import triage, triage_markdown
from sv_dagster.core.models.registry import ModelSpec


def triage_asset_key(env: EnvSpec, model: ModelSpec) -> dg.AssetKey:
    return dg.AssetKey(["triage", env.short, model.key])


def build_triage_asset(env: EnvSpec, model: ModelSpec) -> dg.AssetsDefinition:
    @provenance_asset(
        key=triage_asset_key(env, model),
        ins={"evaluation": dg.AssetIn(key=eval_asset_key(env, model))},
        group_name=env_group(env.short, "triage"),
        kinds={"markdown"},
        tags={"sv/env": env.short, "sv/model": model.key},
        description=f"Low-reward examples of {env.env_id} / {model.name} grouped by cause "
        "(error, refusal, schema violation, tool misuse, overconfident error, wrong label, abstention; "
        "answers without a label: the reward component that lost the most).",
    )
    def triage_model(context: dg.AssetExecutionContext, evaluation: Artifact) -> Artifact:
        report = triage(read_results(evaluation.files["results"]), tool_reward=env.tool_reward)
        notes = outputs_root() / "notes"
        notes.mkdir(parents=True, exist_ok=True)
        path = notes / f"{datetime.now(UTC):%Y-%m-%d}-triage-{env.short}-{model.key}.md"
        write_redacted(
            path,
            triage_markdown(
                report,
                env=env.env_id,
                model=model.name,
                eval_dir=str(evaluation.path),
                sample=bool(evaluation.facts.get("sample")),
            ),
        )
        write_json(path.with_suffix(".json"), report)
        return Artifact(
            path=path,
            config={"env": env.env_id, "model": model.name},
            facts={"eval_dir": str(evaluation.path), "sample": evaluation.facts.get("sample", False)},
            metadata={
                "counts": report["counts"],
                "n_low_reward": report["n_low_reward"],
                "notes": dg.MetadataValue.path(str(path)),
                "preview": dg.MetadataValue.md(path.read_text()[:4000]),
            },
            files={"notes": path, "report": path.with_suffix(".json")},
        )

    return triage_model


def build_triage_assets(env: EnvSpec, models: dict[str, ModelSpec]) -> list[dg.AssetsDefinition]:
    return [build_triage_asset(env, spec) for spec in models.values() if spec.supports(env.short)]
