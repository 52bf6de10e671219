"""eval/<env>/<model>: one asset per (environment, registry model), so each model's
status and lineage show separately in the UI; adding a model is a registry edit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import Field

from sv_dagster.assets.common import env_group
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.envs import EnvSpec
from sv_dagster.core.eval_request import OOD_SPLIT, EvalRequestError, check_limit, check_split, split_sizes
from sv_dagster.core.evals.progress import EvalProgress
from sv_dagster.core.models.registry import ModelSpec
from sv_dagster.instance import local_artifact_path
from sv_dagster.resources import ModelRegistry, PipesLauncher

if TYPE_CHECKING:
    from sv_dagster.core.evals.evaluation import EvalRun  # imports the model clients: only when an eval runs


def headline_metrics(env: EnvSpec) -> tuple[str, ...]:
    keys = [key for _, key in env.columns]
    return (*keys, *(key for key in ("mean_reward", "n_errors") if key not in keys))


def example_set(run_metadata: dict) -> str:
    """Which examples an eval scored: split, N, and the seed when N is a drawn subset."""
    dataset = run_metadata["dataset"]
    n, size = dataset["n_examples"], dataset.get("split_size")
    drawn = size is None or n < size
    return f"{dataset.get('split', '?')} n={n}" + (f" seed={run_metadata.get('seed')}" if drawn else "")


def metric_metadata(env: EnvSpec, summary: dict, run_metadata: dict) -> dict:
    """Headline metrics keyed by the example set they were measured on, with that set shown.
    The UI plots each numeric metadata key across materializations, so a key must never mix
    a dev run with a test run, or a 7-example subset with the whole split."""
    examples = example_set(run_metadata)
    return {
        "examples": examples,
        **{f"{name} [{examples}]": summary.get(name) for name in headline_metrics(env)},
    }


class EvalOptions(dg.Config):
    """How an eval runs, whatever split it scores (the OOD evals' whole config)."""

    limit: int | None = Field(
        default=None,
        description="Evaluate N examples, drawn by a shuffle under `seed`; "
        "more than the split holds is an error unless `cap_limit`.",
    )
    cap_limit: bool = Field(default=False, description="Take `limit` as a cap: a smaller split is evaluated whole.")
    all_examples: bool = Field(
        default=False,
        description="Evaluate every example of the split, whatever the registry's `limit` for the model "
        "(`--n all`); unset, a run without `limit` takes the registry's N for a limited model.",
    )
    concurrency: int | None = Field(
        default=None, description="Parallel requests (default: the model's max_concurrency)."
    )
    reward_config: str | None = Field(
        default=None, description="Reward TOML (default: the environment's packaged one)."
    )
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
    seed: int = Field(
        default=42, description="Selects the example subset when `limit` is set; one seed, one subset for every model."
    )
    target_model: str = Field(
        default="heuristic",
        description="Dialogue environments with a model on the other side (E5's target): the registry model "
        "that plays it. `heuristic` is the rule-based defender.",
    )
    external: bool = Field(
        default=False,
        description="Run the eval in its own process through Dagster Pipes (the `launcher` resource: a subprocess, a "
        "Kubernetes pod or a Ray job), for large evals; the same code and the same files as in-process.",
    )
    include_tools: bool = Field(
        default=True,
        description="Offer the environment's tools to the model (E2's run_opa, run_semgrep, ...) within its tool "
        "budget; false makes it answer from the prompt alone. Environments without tools ignore it.",
    )


class EvalConfig(EvalOptions):
    split: str = Field(
        default="test", description="Dataset split to evaluate: train, dev, test (or ood where the dataset has one)."
    )


def eval_asset_key(env: EnvSpec, model: ModelSpec) -> dg.AssetKey:
    return dg.AssetKey(["eval", env.short, model.key])


def ood_eval_asset_key(env: EnvSpec, model: ModelSpec) -> dg.AssetKey:
    return dg.AssetKey(["eval_ood", env.short, model.key])


def has_ood_split(env: EnvSpec) -> bool:
    """Whether any source feeding the environment's dataset is marked `ood: true` in the
    source registry (its rows then form the dataset's `ood` split)."""
    from sv_dagster.core.data.corpora import load_sources, sources_for

    return any(spec.ood for spec in sources_for(env.short, load_sources()))


def ood_eval_models(env: EnvSpec, models: dict[str, ModelSpec]) -> list[ModelSpec]:
    """The sweep models evaluated on the environment's `ood` split (none without one)."""
    if not has_ood_split(env):
        return []
    return [spec for spec in models.values() if spec.sweep and spec.supports(env.short)]


def run_external_eval(
    context: dg.AssetExecutionContext,
    launcher: PipesLauncher,
    env: EnvSpec,
    model: ModelSpec,
    target: ModelSpec | None,
    checkpoint: Path | None,
    use_cache: bool,
    models: ModelRegistry,
    arguments: dict,
    total: int | None = None,
) -> EvalRun:
    """Write the eval's spec, launch `python -m sv_dagster.eval_entry` through Pipes, read
    the eval folder it reports. `total`: the examples it will run, for its progress lines."""
    import json

    from sv_dagster.core.evals.evaluation import eval_dir, load_eval_run

    run_dir = eval_dir(arguments["outputs_root"], env, model.name, arguments["run_id"])
    spec = {
        "env": env.short,
        "model": model.name,
        "registry": models.registry_path,
        "checkpoint": str(checkpoint) if checkpoint else None,
        "target_model": target.name if target else None,
        "use_cache": use_cache,
        "total": total,
        **{k: (str(v) if isinstance(v, Path) else v) for k, v in arguments.items()},
    }
    spec_path = run_dir.with_name(run_dir.name + ".spec.json")
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    spec_path.write_text(json.dumps(spec, indent=2, sort_keys=True), encoding="utf-8")
    invocation = launcher.launch(
        context, str(spec_path), {}, module="sv_dagster.eval_entry", gpu=model.backend == "local" or model.served
    )
    reported = [m for m in invocation.get_custom_messages() if isinstance(m, dict) and m.get("kind") == "eval"]
    if not reported:
        raise dg.Failure(f"the external eval of {model.name} ended without reporting its folder ({run_dir})")
    return load_eval_run(Path(reported[-1]["run_dir"]))


def trained_checkpoint(context: dg.AssetExecutionContext, model: ModelSpec) -> Path | None:
    """The checkpoint folder a trained model's eval scores: the one the latest materialization
    of its `checkpoint_asset` recorded. None (the eval is skipped, with the reason logged) when
    that asset was never materialized or its safety review's blocking check failed."""
    assert model.checkpoint_asset is not None  # only trained models' evals ask
    key = dg.AssetKey(model.checkpoint_asset.split("/"))
    event = context.instance.get_latest_materialization_event(key)
    if event is None:
        context.log.warning(f"{model.name}: {key.to_user_string()} has no materialization yet; nothing to evaluate")
        return None
    if key.path[0] == "safety_review":
        record = context.instance.get_latest_asset_check_evaluation_record(dg.AssetCheckKey(key, "automated_review"))
        evaluation = (
            record.event.dagster_event.event_specific_data
            if record and record.event and record.event.dagster_event
            else None
        )
        if evaluation is None or not evaluation.passed:
            context.log.warning(
                f"{model.name}: the checkpoint behind {key.to_user_string()} did not pass its automated "
                "safety review; it is not evaluated"
            )
            return None
    return Path(event.asset_materialization.metadata["checkpoint_path"].value)


def evaluate_split(
    context: dg.AssetExecutionContext,
    env: EnvSpec,
    model: ModelSpec,
    config: EvalOptions,
    split: str,
    dataset: Artifact,
    models: ModelRegistry,
    launcher: PipesLauncher,
    folder_suffix: str = "",
) -> Artifact | None:
    """One eval asset's work: `model` on `split` of `env`'s dataset, its folder
    `<run id><folder_suffix>` (a suffix keeps two evals of one run, test and OOD, apart).
    None when a trained model has no checkpoint to score yet."""
    trained = model.checkpoint_asset is not None
    sizes = split_sizes(dataset.files["metadata"])
    try:
        check_split(split, sizes, f"dataset/{env.short}")
        if not config.cap_limit:
            check_limit(config.limit, split, sizes[split], f"dataset/{env.short}")
    except EvalRequestError as exc:
        raise dg.Failure(description=str(exc)) from None  # a person's mistake: no traceback to show
    checkpoint = trained_checkpoint(context, model) if trained else None
    if trained and checkpoint is None:
        return None
    from sv_dagster.core.evals.evaluation import evaluate  # imports verifiers (~3 s): only when run
    from sv_dagster.core.evals.references import label_prior
    from sv_dagster.core.models.cache import ResponseCache

    spec = models.spec(model.name).for_env(env.short)
    if config.all_examples and config.limit is not None:
        raise dg.Failure(description=f"limit {config.limit} and all_examples ask for different N; set one")
    limit = config.limit
    if limit is None and not config.all_examples and (model_limit := spec.limit_for(env.short)) is not None:
        limit = min(model_limit, sizes[split])  # the registry's N for a slow model: a cap, never an error
        context.log.info(f"{spec.name}: {limit} of the {sizes[split]} {split} examples (the registry's limit)")
    # A re-execution (from failure, or of a killed run) continues its root run's folder.
    resume_from = config.resume_run_id or context.run.root_run_id
    run_id = resume_from or context.run_id
    if not run_id.endswith(folder_suffix):  # a resume_run_id may name the folder itself
        run_id += folder_suffix
    reward_config = Path(config.reward_config) if config.reward_config else None
    target = models.spec(config.target_model) if env.counterpart_env else None
    arguments: dict[str, Any] = dict(
        dataset_path=dataset.files[split],
        outputs_root=outputs_root(),
        run_id=run_id,
        resume=resume_from is not None,
        limit=limit,
        concurrency=config.concurrency,
        reward_config=reward_config,
        seed=config.seed,
        dataset_info={
            "split": split,
            "split_size": sizes[split],
            # The majority reference policy's label: train's (else dev's) majority, not the scored split's.
            "label_prior": label_prior(dataset.files["metadata"], split) if env.reference else None,
            "sample": dataset.facts.get("sample", False),
            **({"user_file": dataset.facts["user_file"]} if dataset.facts.get("user_file") else {}),
        },
        use_tools=config.include_tools,
    )
    size = sizes[split]
    total = min(limit, size) if limit else size  # as iter_tasks takes the subset
    on = "" if split == "test" else f" [{split}]"  # log lines say which split when not the usual one
    if config.external:  # a large eval in its own process (a pod, a Ray job) through Pipes
        run = run_external_eval(
            context, launcher, env, spec, target, checkpoint, config.use_cache, models, arguments, total
        )
    else:
        progress = EvalProgress(total, f"eval {env.short}/{spec.name}{on}", context.log.info)
        run = evaluate(
            env,
            spec,
            models.backend(model.name, env.env_id, checkpoint),
            cache=ResponseCache(outputs_root() / "cache" / "responses.sqlite3") if config.use_cache else None,
            counterpart=models.backend(target.name, env.counterpart_env) if target and env.counterpart_env else None,
            counterpart_model=target,
            progress=progress,
            **arguments,
        )
        progress.finish()
    summary = run.summary
    context.log.info(
        f"{env.env_id} / {spec.name}{on}: " + ", ".join(f"{name}={summary.get(name)}" for name in headline_metrics(env))
    )
    return Artifact(
        path=run.run_dir,
        config={**config.model_dump(), "limit": limit, "split": split, "env": env.env_id, "model": spec.public_dict()},
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
            "dataset_split": split,
            "eval_run_id": run.metadata["run_id"],
            **({"checkpoint_path": str(checkpoint)} if checkpoint else {}),
            "resumed_examples": run.metadata["counts"]["n_resumed"],
            "response_cache": run.metadata.get("response_cache"),
            "tools": run.metadata.get("tools"),
            "sample": summary["sample"],
            **({"target_model": target.public_dict()} if target else {}),
            **(
                {
                    "safety_classifier": summary["classifier"],
                    "classifier_agreement": summary["classifier_agreement"],
                }
                if "classifier" in summary
                else {}
            ),
        },
        metadata={
            **metric_metadata(env, summary, run.metadata),
            "n_examples": summary["n_examples"],
            "summary": dg.MetadataValue.json(summary),
            "results": dg.MetadataValue.path(str(run.results_path)),
        },
        files={"metadata": run.metadata_path, "results": run.results_path, "summary": run.summary_path},
    )


def _eval_asset_kwargs(env: EnvSpec, model: ModelSpec) -> dict:
    """What an eval asset of `model` on `env` declares whatever split it scores."""
    trained = model.checkpoint_asset is not None
    return dict(
        ins={"dataset": dg.AssetIn(key=["dataset", env.short])},
        deps=[dg.AssetKey(model.checkpoint_asset.split("/"))] if model.checkpoint_asset is not None else [],
        output_required=not trained,
        pool=model.pool,
        kinds={"json"},
        tags={"sv/env": env.short, "sv/model": model.key, "sv/backend": model.backend},
    )


def build_eval_asset(env: EnvSpec, model: ModelSpec) -> dg.AssetsDefinition:
    @provenance_asset(
        key=eval_asset_key(env, model),
        group_name=env_group(env.short, "evals"),
        description=f"{env.env_id} evaluated with {model.name} ({model.backend}: {model.model}). {model.description}".strip(),
        **_eval_asset_kwargs(env, model),
    )
    def eval_model(
        context: dg.AssetExecutionContext,
        config: EvalConfig,
        dataset: Artifact,
        models: ModelRegistry,
        launcher: PipesLauncher,
    ) -> Artifact | None:
        return evaluate_split(context, env, model, config, config.split, dataset, models, launcher)

    return eval_model


def build_ood_eval_asset(env: EnvSpec, model: ModelSpec) -> dg.AssetsDefinition:
    """eval_ood/<env>/<model>: the same eval on the dataset's `ood` split, so in- and
    out-of-distribution figures are two series that never mix."""

    @provenance_asset(
        key=ood_eval_asset_key(env, model),
        # A group of its own: the UI labels nodes by the key's last part (the model).
        group_name=env_group(env.short, "ood_evals"),
        description=f"{env.env_id} evaluated with {model.name} on its out-of-distribution split (`ood`: the "
        "sources marked `ood: true` in the source registry).",
        **_eval_asset_kwargs(env, model),
    )
    def eval_ood_model(
        context: dg.AssetExecutionContext,
        config: EvalOptions,
        dataset: Artifact,
        models: ModelRegistry,
        launcher: PipesLauncher,
    ) -> Artifact | None:
        return evaluate_split(
            context, env, model, config, OOD_SPLIT, dataset, models, launcher, folder_suffix=f"-{OOD_SPLIT}"
        )

    return eval_ood_model


def build_eval_assets(env: EnvSpec, models: dict[str, ModelSpec]) -> list[dg.AssetsDefinition]:
    return [build_eval_asset(env, spec) for spec in models.values() if spec.supports(env.short)]


def build_ood_eval_assets(env: EnvSpec, models: dict[str, ModelSpec]) -> list[dg.AssetsDefinition]:
    return [build_ood_eval_asset(env, spec) for spec in ood_eval_models(env, models)]


def build_regression_check(env: EnvSpec, model: ModelSpec) -> dg.AssetChecksDefinition:
    key = eval_asset_key(env, model)

    @dg.asset_check(
        asset=key,
        name="regression_gate",
        blocking=True,
        description="Fails when accuracy or mean reward drops by more than 3% against the recorded "
        "baseline of this model and environment and a paired test (McNemar / paired bootstrap) "
        "gives p < 0.05. A warning (NO BASELINE) when there is nothing to compare with: no baseline, "
        "one of another split, or no example shared. Record a baseline with "
        "`sv-dagster baseline record EVAL_DIR`.",
    )
    def regression_gate_check(context) -> dg.AssetCheckResult:  # dagster rejects a string annotation here
        from sv_dagster.core.evals.gate import NO_BASELINE, PASS, regression_gate

        entry = context.instance.get_latest_materialization_event(key)
        run_dir = local_artifact_path(entry.asset_materialization.metadata)
        result = regression_gate(run_dir, outputs_root())
        return dg.AssetCheckResult(
            # NO BASELINE fails as a warning: shown as such, and (not being an error) it
            # does not block what depends on the eval.
            passed=result.state == PASS,
            severity=dg.AssetCheckSeverity.WARN if result.state == NO_BASELINE else dg.AssetCheckSeverity.ERROR,
            description=result.note or None,
            metadata={
                "state": dg.MetadataValue.text(result.state),
                "eval_dir": dg.MetadataValue.path(str(run_dir)),
                "gate": dg.MetadataValue.json(result.metadata()),
                **{f"{c.metric}_delta": dg.MetadataValue.float(c.delta) for c in result.comparisons},
                **{f"{c.metric}_p_value": dg.MetadataValue.float(c.p_value) for c in result.comparisons},
                "failures": dg.MetadataValue.text("; ".join(result.failures) or "none"),
            },
        )

    return regression_gate_check


def build_regression_checks(env: EnvSpec, models: dict[str, ModelSpec]) -> list[dg.AssetChecksDefinition]:
    return [build_regression_check(env, spec) for spec in models.values() if spec.supports(env.short)]


class RescoreConfig(dg.Config):
    reward_config: str | None = Field(
        default=None, description="Reward TOML (default: the environment's packaged one)."
    )


def rescore_asset_key(env: EnvSpec, model: ModelSpec) -> dg.AssetKey:
    return dg.AssetKey(["rescore", env.short, model.key])


def build_rescore_asset(env: EnvSpec, model: ModelSpec) -> dg.AssetsDefinition:
    @provenance_asset(
        key=rescore_asset_key(env, model),
        ins={"evaluation": dg.AssetIn(key=eval_asset_key(env, model))},
        group_name=env_group(env.short, "rescores"),
        kinds={"json"},
        tags={"sv/env": env.short, "sv/model": model.key},
        description=f"The stored completions of the latest {env.env_id} / {model.name} eval scored again with "
        "the current verifier and reward config: no model calls. Run it when a verifier or reward config changes.",
    )
    def rescore_model(context: dg.AssetExecutionContext, config: RescoreConfig, evaluation: Artifact) -> Artifact:
        from sv_dagster.core.evals.evaluation import rescore

        reward_config = Path(config.reward_config) if config.reward_config else None
        run = rescore(
            env, evaluation.path, outputs_root=outputs_root(), run_id=context.run_id, reward_config=reward_config
        )
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
                **metric_metadata(env, run.summary, run.metadata),
                "summary": dg.MetadataValue.json(run.summary),
            },
            files={"metadata": run.metadata_path, "results": run.results_path, "summary": run.summary_path},
        )

    return rescore_model


def build_rescore_assets(env: EnvSpec, models: dict[str, ModelSpec]) -> list[dg.AssetsDefinition]:
    return [build_rescore_asset(env, spec) for spec in models.values() if spec.supports(env.short)]
