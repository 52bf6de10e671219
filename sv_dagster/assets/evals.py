"""eval/<env>/<model>: one asset per (environment, registry model), so each model's
status and lineage show separately in the UI; adding a model is a registry edit."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.envs import EnvSpec
from sv_dagster.core.paths import outputs_root
from sv_dagster.core.registry import ModelSpec
from sv_dagster.resources import ModelRegistry

def headline_metrics(env: EnvSpec) -> tuple[str, ...]:
    return (*(key for _, key in env.columns), "mean_reward", "n_errors")


class EvalConfig(dg.Config):
    split: str = Field(default="test", description="Dataset split to evaluate: train, dev or test.")
    limit: int | None = Field(default=None, description="Evaluate N examples, drawn by a shuffle under `seed`.")
    concurrency: int | None = Field(default=None, description="Parallel requests (default: the model's max_concurrency).")
    reward_config: str | None = Field(default=None, description="Reward TOML (default: the environment's packaged one).")
    use_cache: bool = Field(
        default=True,
        description="Answer repeated requests (same model, messages, sampling, seed) from the response "
        "cache under the outputs root instead of calling the model again.",
    )
    resume_run_id: str | None = Field(
        default=None,
        description="Continue that run's eval folder, skipping finished examples. Dagster re-execution "
        "of a run does this by itself (it continues the root run's folder).",
    )
    seed: int = Field(default=42, description="Selects the example subset when `limit` is set; one seed, one subset for every model.")
    target_model: str = Field(
        default="heuristic",
        description="Dialogue environments with a model on the other side (E5's target): the registry model "
        "that plays it. `heuristic` is the rule-based defender.",
    )
    include_tools: bool = Field(
        default=True,
        description="Offer the environment's tools to the model (E2's run_opa, run_semgrep, ...) within its tool "
        "budget; false makes it answer from the prompt alone. Environments without tools ignore it.",
    )


def eval_asset_key(env: EnvSpec, model: ModelSpec) -> dg.AssetKey:
    return dg.AssetKey(["eval", env.short, model.key])


def build_eval_asset(env: EnvSpec, model: ModelSpec) -> dg.AssetsDefinition:
    @provenance_asset(
        key=eval_asset_key(env, model),
        ins={"dataset": dg.AssetIn(key=["dataset", env.short])},
        group_name="evals",
        pool=model.pool,
        kinds={"json"},
        tags={"sv/env": env.short, "sv/model": model.key, "sv/backend": model.backend},
        description=f"{env.env_id} evaluated with {model.name} ({model.backend}: {model.model}). {model.description}".strip(),
    )
    def eval_model(context: dg.AssetExecutionContext, config: EvalConfig, dataset: Artifact, models: ModelRegistry) -> Artifact:
        if config.split not in dataset.files:
            raise dg.Failure(f"dataset/{env.short} has no split {config.split!r} (have: {sorted(dataset.files)})")
        from sv_dagster.core.cache import ResponseCache
        from sv_dagster.core.evaluation import evaluate  # imports verifiers (~3 s): only when run

        spec = models.spec(model.name)
        # A re-execution (from failure, or of a killed run) continues its root run's folder.
        resume_from = config.resume_run_id or context.run.root_run_id
        reward_config = Path(config.reward_config) if config.reward_config else None
        target = models.spec(config.target_model) if env.counterpart_env else None
        run = evaluate(
            env,
            spec,
            models.backend(model.name, env.env_id),
            dataset_path=dataset.files[config.split],
            outputs_root=outputs_root(),
            run_id=resume_from or context.run_id,
            resume=resume_from is not None,
            cache=ResponseCache(outputs_root() / "cache" / "responses.sqlite3") if config.use_cache else None,
            limit=config.limit,
            concurrency=config.concurrency,
            reward_config=reward_config,
            seed=config.seed,
            dataset_info={"split": config.split, "sample": dataset.facts.get("sample", False)},
            use_tools=config.include_tools,
            counterpart=models.backend(target.name, env.counterpart_env) if target else None,
            counterpart_model=target,
        )
        summary = run.summary
        context.log.info(
            f"{env.env_id} / {spec.name}: "
            + ", ".join(f"{name}={summary.get(name)}" for name in headline_metrics(env))
        )
        return Artifact(
            path=run.run_dir,
            config={**config.model_dump(), "env": env.env_id, "model": spec.public_dict()},
            seed=config.seed,
            packages=(env.env_id,),
            facts={
                "model_id": spec.model,
                "model_name": spec.name,
                "backend": spec.backend,
                "base_url": spec.base_url,
                "sampling": spec.sampling.as_dict(),
                "reward_config": run.metadata["reward_config"],
                "reward_config_hash": run.metadata["reward_config"]["sha256"],
                "dataset_split": config.split,
                "eval_run_id": run.metadata["run_id"],
                "resumed_examples": run.metadata["counts"]["n_resumed"],
                "response_cache": run.metadata.get("response_cache"),
                "tools": run.metadata.get("tools"),
                "sample": summary["sample"],
                **({"target_model": target.public_dict()} if target else {}),
                **({"safety_classifier": summary["classifier"],
                    "classifier_agreement": summary["classifier_agreement"]} if "classifier" in summary else {}),
            },
            metadata={
                **{name: summary.get(name) for name in headline_metrics(env)},
                "n_examples": summary["n_examples"],
                "summary": dg.MetadataValue.json(summary),
                "results": dg.MetadataValue.path(str(run.results_path)),
            },
            files={"metadata": run.metadata_path, "results": run.results_path, "summary": run.summary_path},
        )

    return eval_model


def build_eval_assets(env: EnvSpec, models: dict[str, ModelSpec]) -> list[dg.AssetsDefinition]:
    return [build_eval_asset(env, spec) for spec in models.values() if spec.supports(env.short)]




def build_regression_check(env: EnvSpec, model: ModelSpec) -> dg.AssetChecksDefinition:
    key = eval_asset_key(env, model)

    @dg.asset_check(
        asset=key,
        name="regression_gate",
        blocking=True,
        description="Fails when accuracy or mean reward drops by more than 3% against the recorded "
        "baseline of this model and environment and a paired test (McNemar / paired bootstrap) "
        "gives p < 0.05. Record a baseline with `sv-dagster baseline record EVAL_DIR`.",
    )
    def regression_gate_check(context) -> dg.AssetCheckResult:  # dagster rejects a string annotation here
        from sv_dagster.core.gate import regression_gate

        entry = context.instance.get_latest_materialization_event(key)
        run_dir = Path(entry.asset_materialization.metadata["artifact_path"].value)
        result = regression_gate(run_dir, outputs_root())
        return dg.AssetCheckResult(
            passed=result.passed,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={
                "eval_dir": dg.MetadataValue.path(str(run_dir)),
                "gate": dg.MetadataValue.json(result.metadata()),
                **{
                    f"{c.metric}_delta": dg.MetadataValue.float(c.delta) for c in result.comparisons
                },
                **{f"{c.metric}_p_value": dg.MetadataValue.float(c.p_value) for c in result.comparisons},
                "failures": dg.MetadataValue.text("; ".join(result.failures) or "none"),
            },
        )

    return regression_gate_check


def build_regression_checks(env: EnvSpec, models: dict[str, ModelSpec]) -> list[dg.AssetChecksDefinition]:
    return [build_regression_check(env, spec) for spec in models.values() if spec.supports(env.short)]


class RescoreConfig(dg.Config):
    reward_config: str | None = Field(default=None, description="Reward TOML (default: the environment's packaged one).")


def rescore_asset_key(env: EnvSpec, model: ModelSpec) -> dg.AssetKey:
    return dg.AssetKey(["rescore", env.short, model.key])


def build_rescore_asset(env: EnvSpec, model: ModelSpec) -> dg.AssetsDefinition:
    @provenance_asset(
        key=rescore_asset_key(env, model),
        ins={"evaluation": dg.AssetIn(key=eval_asset_key(env, model))},
        group_name="evals",
        kinds={"json"},
        tags={"sv/env": env.short, "sv/model": model.key},
        description=f"The stored completions of the latest {env.env_id} / {model.name} eval scored again with "
        "the current verifier and reward config: no model calls. Run it when a verifier or reward config changes.",
    )
    def rescore_model(context: dg.AssetExecutionContext, config: RescoreConfig, evaluation: Artifact) -> Artifact:
        from sv_dagster.core.evaluation import rescore

        reward_config = Path(config.reward_config) if config.reward_config else None
        run = rescore(env, evaluation.path, outputs_root=outputs_root(), run_id=context.run_id, reward_config=reward_config)
        return Artifact(
            path=run.run_dir,
            config={**config.model_dump(), "env": env.env_id, "model": model.name},
            packages=(env.env_id,),
            facts={
                "rescored_from": run.metadata["rescored_from"],
                "reward_config": run.metadata["reward_config"],
                "reward_config_hash": run.metadata["reward_config"]["sha256"],
                "sample": run.summary["sample"],
            },
            metadata={
                **{name: run.summary.get(name) for name in headline_metrics(env)},
                "summary": dg.MetadataValue.json(run.summary),
            },
            files={"metadata": run.metadata_path, "results": run.results_path, "summary": run.summary_path},
        )

    return rescore_model


def build_rescore_assets(env: EnvSpec, models: dict[str, ModelSpec]) -> list[dg.AssetsDefinition]:
    return [build_rescore_asset(env, spec) for spec in models.values() if spec.supports(env.short)]
