"""Training as assets: sft_data/<env> -> checkpoint/<env>/{base,sft,rlft_stage1} ->
safety_review/<env>/rlft_stage1 (blocking check) -> eval of each checkpoint; stage 2's
curriculum across environments; promotion after a human sign-off.

Recipes stay short: the data building, training and review are plain code in
`sv_dagster.training`; training runs as its own process launched through Dagster Pipes
(`PipesLauncher`: a subprocess here, a Kubernetes pod or a Ray job elsewhere).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from sv_dagster.assets.common import env_group, write_json
from sv_dagster.assets.recipe import Artifact, provenance_asset, upstream_data_versions
from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.envs import ENVS
from sv_dagster.instance import DATA_VERSION_TAG
from sv_dagster.resources import ExperimentTracking, PipesLauncher
from sv_dagster.training import catalog
from sv_dagster.training.config import TrainingConfig, TrainingConfigError, load_training_config

TRAINING_KINDS = {"pytorch", "huggingface"}


def gpu_op_tags(gpu: bool = True) -> dict[str, str]:
    """The `dagster-k8s/config` tag sizing a training step's pod under the k8s executor
    (a GPU, its node selector and toleration): step pods read their op's tags."""
    from sv_dagster.executors import k8s_job_tags

    return k8s_job_tags(gpu=gpu)


AUTOMATED_REVIEW = "automated_review"


def asset_key_of(path: str) -> dg.AssetKey:
    return dg.AssetKey(path.split("/"))


class SftDataConfig(dg.Config):
    variant: str | None = Field(
        default=None,
        description="cot or tool_calls (e2), rag or tool_calls (e3), mix or tool_calls (e4), refusal (e6); unset: the training config's sft_variant.",
    )
    synthetic: bool = Field(default=True, description="Add the latest accepted synthetic batch of this environment.")
    max_rows: int | None = Field(
        default=None, description="Keep the first N training tasks (after the synthetic rows are added)."
    )


class TrainingRunConfig(dg.Config):
    profile: str | None = Field(
        default=None,
        description="configs/training/profiles/<name>.yaml: a model and its settings (default "
        "$SV_TRAINING_PROFILE, else the config's default_profile; tiny: the config's own tiny model).",
    )
    experiment: str | None = Field(
        default=None, description="configs/experiments/<env>/<name>.yaml overriding the training config."
    )
    overrides: str | None = Field(
        default=None, description='JSON merged over the config, e.g. {"grpo": {"max_steps": 5}}.'
    )
    resume: bool = Field(
        default=True, description="Continue from the last TRL checkpoint of an interrupted run of this step."
    )


def resolve_config(env: str, run: TrainingRunConfig, defaults: dict[str, Any] | None = None) -> TrainingConfig:
    """The stage's config; any problem fails here, before any data is read or model built."""
    try:
        overrides = json.loads(run.overrides) if run.overrides else None
        return load_training_config(
            env, experiment=run.experiment, overrides=overrides, profile=run.profile, defaults=defaults
        )
    except (TrainingConfigError, json.JSONDecodeError) as exc:
        raise dg.Failure(f"training config for {env}: {exc}") from exc


def resolve_stage2_config(owner: str, envs: list[str], run: TrainingRunConfig) -> TrainingConfig:
    """Stage 2's config: the owner's, with what the answers of each environment it mixes need
    (their configs under the run's profile), under the run's experiment and overrides."""
    from sv_dagster.training.curriculum import stage2_defaults

    members = [resolve_config(env, TrainingRunConfig(profile=run.profile)) for env in envs]
    return resolve_config(owner, run, defaults=stage2_defaults(members))


def _concat_jsonl(
    sources: list[Path], target: Path, limit: int | None, drop: set[tuple[str, int]] | None = None
) -> int:
    """Tasks from several JSONL files in one file, first occurrence of an id kept; the
    (file, 1-based line) in `drop` (rows leaking a dev/test row) left out."""
    drop = drop or set()
    seen: set[str] = set()
    count = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as out:
        for source in sources:
            with source.open(encoding="utf-8") as handle:
                for number, line in enumerate(handle, 1):
                    if not line.strip() or (str(source), number) in drop:
                        continue
                    row_id = str(json.loads(line).get("id"))
                    if row_id in seen:
                        continue
                    if limit is not None and count >= limit:
                        return count
                    seen.add(row_id)
                    out.write(line if line.endswith("\n") else line + "\n")
                    count += 1
    return count


def _synthetic_batch(context: dg.AssetExecutionContext, env: str, into: Path) -> dict[str, Any] | None:
    """The latest materialized synthetic batch of `env` with the spot-check's rejected rows
    left out, written to `into`; None when there is none."""
    from sv_dagster.instance.synthetic import accepted_batch

    return accepted_batch(context.instance, env, into)


def build_sft_data_asset(env_short: str) -> dg.AssetsDefinition:
    env = ENVS[env_short]
    deps = [dg.AssetKey(["synthetic", env_short])]

    @provenance_asset(
        key=["sft_data", env_short],
        ins={"dataset": dg.AssetIn(key=["dataset", env_short])},
        deps=deps,
        group_name=env_group(env_short, "training"),
        kinds={"json"},
        tags={"sv/env": env_short},
        description=f"{env.env_id}: the curated train split plus the latest accepted synthetic batch as chat examples "
        "(prompt exactly as evaluated, target the reply the verifier rewards most), GRPO prompts, and the tasks "
        "the reward adapter rebuilds.",
    )
    def sft_data(context: dg.AssetExecutionContext, config: SftDataConfig, dataset: Artifact) -> Artifact:
        from sv_dagster.assets.common import artifact_dir
        from sv_dagster.training.sft_data import (
            SftDataError,
            build_examples,
            load_tasks,
            read_rows,
            referenced_texts,
            sft_rows,
            summarize,
            write_rows,
        )

        training = load_training_config(env_short)
        variant = config.variant if config.variant is not None else training.sft_variant
        out = artifact_dir(context, "sft_data", env_short)
        # The curated train split (E3's corpora hold no executable tasks, so it has none) and the
        # latest accepted synthetic batch; never the test split.
        sources = [Path(dataset.files["train"])] if "train" in dataset.files else []
        synthetic = _synthetic_batch(context, env_short, out / "synthetic_accepted.jsonl") if config.synthetic else None
        if synthetic is not None:
            sources.append(Path(synthetic["path"]))
        if not sources:
            raise dg.Failure(
                f"no training tasks for {env_short}: dataset/{env_short} has no train split (have: "
                f"{sorted(dataset.files)}) and no synthetic batch was materialized (job synthetic_daily)"
            )
        # No row duplicating or nearly duplicating a dev/test row (of this environment or its
        # attack/defense counterpart) is trained on; they are listed in leakage.json.
        from sv_dagster.assets.synthetic import held_out_datasets
        from sv_dagster.core.data.leakage import LeakageConfigError, policy_for
        from sv_dagster.training.sft_data import screen_leakage

        try:
            policy = policy_for(env_short)
        except LeakageConfigError as exc:
            raise dg.Failure(str(exc)) from exc
        _, counterparts = held_out_datasets(context.instance, env)
        leaks = screen_leakage(env, sources, dataset.files, counterparts, out / "leakage.json", policy)
        if leaks.leaks:
            context.log.warning(
                f"sft_data/{env_short}: dropped {len(leaks.leaks)} training row(s) leaking a dev/test row, e.g. "
                + "; ".join(leaks.first(3))
            )
        tasks_path = out / "tasks" / "train.jsonl"
        n_tasks = _concat_jsonl(sources, tasks_path, config.max_rows, drop=leaks.offending())
        held_out = (
            [row.get("question") for row in read_rows(Path(dataset.files["test"]))] if "test" in dataset.files else []
        )
        extra: dict[str, Any] = {"held_out_prompts": [q for q in held_out if q]}
        if "fix_pairs" in dataset.files:
            extra["fix_pairs"] = read_rows(Path(dataset.files["fix_pairs"]))
        try:
            tasks = load_tasks(env, tasks_path)
            examples = build_examples(env_short, tasks, variant=variant, seed=training.seed, context=extra)
        except SftDataError as exc:
            raise dg.Failure(str(exc)) from exc
        harmful = referenced_texts(tasks)
        files = {
            "sft": out / "sft.jsonl",
            "grpo": out / "grpo.jsonl",
            "tasks": tasks_path,
            "leakage": out / "leakage.json",
            **({"synthetic": Path(synthetic["path"])} if synthetic is not None else {}),
        }
        write_rows(files["sft"], sft_rows(examples, tasks), by_reference=harmful)
        write_rows(files["grpo"], (e.grpo_row() for e in examples if e.task_key), by_reference=harmful)
        report = {
            "env": env_short,
            "variant": variant,
            "sample": bool(dataset.facts.get("sample")) or bool(synthetic and synthetic.get("sample")),
            "n_tasks": n_tasks,
            "curated_train": str(dataset.files["train"]) if "train" in dataset.files else None,
            "synthetic": synthetic,
            "leakage": leaks.counts(),
            **summarize(examples),
        }
        write_json(out / "metadata.json", report)
        return Artifact(
            path=out,
            config={**config.model_dump(), "variant": variant},
            seed=training.seed,
            packages=(env.env_id,),
            facts={"sample": report["sample"], "variant": variant, "synthetic_batch": synthetic},
            metadata={
                "n_examples": report["n"],
                "n_tasks": n_tasks,
                "by_source": report["by_source"],
                "sample": report["sample"],
                "leaked_rows_dropped": len(leaks.leaks),
                "leakage": dg.MetadataValue.json(leaks.counts()),
            },
            files=files,
        )

    return sft_data


def checkpoint_dir(context: dg.AssetExecutionContext, model: str, stage: str) -> Path:
    """`outputs/checkpoints/<model>/<stage>/<date>_<root run>`: a re-execution of the run (after a
    crash) finds its predecessor's partial folder and resumes from its last TRL checkpoint."""
    root = context.run.root_run_id or context.run_id
    record = context.instance.get_run_record_by_id(root)
    created = datetime.fromtimestamp(
        record.create_timestamp.timestamp() if record else datetime.now(UTC).timestamp(), UTC
    )
    return outputs_root() / "checkpoints" / model / stage / f"{created:%Y-%m-%dT%H%M%S}_{root[:8]}"


def reward_configs_for(env_shorts: list[str], config: TrainingConfig, folder: Path) -> dict[str, str | None]:
    """The reward TOML per environment; an experiment's overrides are written as a copy of
    the environment's TOML beside the checkpoint (the snapshot the run used)."""
    from sv_dagster.training.rewards_toml import with_overrides

    if not config.reward_overrides:
        return {env_short: None for env_short in env_shorts}
    return {
        env_short: str(with_overrides(ENVS[env_short], config.reward_overrides, folder / f"rewards-{env_short}.toml"))
        for env_short in env_shorts
    }


def run_training_stage(
    context: dg.AssetExecutionContext,
    *,
    stage: str,
    env_short: str,
    config: TrainingConfig,
    out: Path,
    model_dir: str | None,
    data: dict[str, str],
    reward_configs: dict[str, str | None],
    launcher: PipesLauncher,
    tracking: ExperimentTracking,
    resume: bool,
    counterpart_dir: str | None = None,
) -> dict[str, Any]:
    """Write the stage spec, launch the training process through Pipes, return its record."""
    from sv_dagster.training.stages import StageSpec, reward_errors_path

    track = tracking.settings(run_name=f"{out.parent.parent.name}-{stage}-{out.name}")
    spec = StageSpec(
        stage=stage,
        env=env_short,
        config=config.model_dump(),
        out_dir=str(out),
        model_dir=model_dir,
        data=data,
        reward_configs=reward_configs,
        inputs=upstream_data_versions(context),
        resume=resume,
        tracking=track,
        counterpart_dir=counterpart_dir,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    spec_path = out.with_name(out.name + ".spec.json")
    spec_path.write_text(spec.to_json(), encoding="utf-8")
    env = (
        {"TOKENIZERS_PARALLELISM": "false", "WANDB_MODE": track["mode"]}
        if track["mode"] != "disabled"
        else {"TOKENIZERS_PARALLELISM": "false"}
    )
    errors_file = reward_errors_path(out)
    errors_file.unlink(missing_ok=True)  # an earlier run's, never this one's
    try:
        invocation = launcher.launch(context, str(spec_path), env)
    except dg.Failure as failure:
        if not errors_file.is_file():
            raise
        raise dg.Failure(
            failure.description,
            metadata={"reward_errors": dg.MetadataValue.path(str(errors_file))},
        ) from failure
    records = [
        m["record"] for m in invocation.get_custom_messages() if isinstance(m, dict) and m.get("kind") == "checkpoint"
    ]
    if not records or not (out / "checkpoint.json").is_file():
        raise dg.Failure(f"the {stage} process ended without a finished checkpoint at {out}")
    return records[-1]


def checkpoint_artifact(
    config: TrainingConfig,
    out: Path,
    record: dict[str, Any],
    *,
    stage: str,
    env_label: str,
    registry_model: str | None,
    sample: bool,
) -> Artifact:
    facts = {
        "stage": stage,
        "env": env_label,
        "model_name": config.model.name,
        "base_model": config.model.base,
        "registry_model": registry_model,
        "checkpoint_path": str(out),
        "training_config_sha256": config.digest(),
        "wall_seconds": record.get("wall_seconds"),
        "cpu_hours": record.get("cpu_hours"),
        "gpu_hours": record.get("gpu_hours"),
        "device": record.get("device"),
        "steps": record.get("steps"),
        "n_reward_errors": record.get("n_reward_errors"),
        "sample": sample,
    }
    metrics = record.get("metrics") or {}
    return Artifact(
        path=out,
        config=config.model_dump(),
        seed=config.seed,
        facts=facts,
        metadata={
            "checkpoint_path": dg.MetadataValue.path(str(out)),
            "base_model": config.model.base,
            "wall_seconds": record.get("wall_seconds"),
            "cpu_hours": record.get("cpu_hours"),
            "gpu_hours": record.get("gpu_hours"),
            "steps": record.get("steps"),
            "train_metrics": metrics,
            "sample": sample,
        },
        files={"model": out, "record": out / "checkpoint.json"},
    )


def dev_eval(
    context: dg.AssetExecutionContext,
    env_short: str,
    name: str,
    checkpoint: Path,
    dataset: Artifact,
    training: TrainingConfig,
) -> dict[str, Any]:
    """A trained checkpoint on the dev split, right after its stage: what training settings are
    judged on. The test split is evaluated once, by the eval assets at the end of the chain."""
    from sv_dagster.core.evals.references import label_prior
    from sv_dagster.training.evaluation import evaluate_checkpoint

    if "dev" not in dataset.files:
        return {"split": "dev", "skipped": f"dataset/{env_short} has no dev split"}
    run = evaluate_checkpoint(
        ENVS[env_short],
        name,
        checkpoint,
        dataset_path=Path(dataset.files["dev"]),
        outputs_root=outputs_root() / "dev",
        run_id=context.run_id,
        max_tokens=training.eval_max_tokens,
        limit=training.dev_eval_limit,
        seed=training.seed if training.dev_eval_limit else None,
        dataset_info={
            "split": "dev",
            "sample": dataset.facts.get("sample", False),
            "label_prior": label_prior(dataset.files["metadata"], "dev"),
        },
    )
    ci = run.summary.get("ci95") or {}
    return {
        "split": "dev",
        "n": run.summary.get("n_examples"),
        "mean_reward": run.summary.get("mean_reward"),
        "mean_reward_ci95": ci.get("mean_reward"),
        "accuracy": run.summary.get("accuracy"),
        "accuracy_ci95": ci.get("accuracy"),
        "summary": str(run.summary_path),
    }


def _train(
    context: dg.AssetExecutionContext,
    env_short: str,
    stage: catalog.Stage,
    config: TrainingRunConfig,
    sft_data: Artifact,
    dataset: Artifact | None,
    launcher: PipesLauncher,
    tracking: ExperimentTracking,
    upstream: Artifact | None,
    mix: dict[str, Artifact] | None = None,
) -> Artifact:
    training = resolve_config(env_short, config)
    out = checkpoint_dir(context, f"{training.model.name}-{env_short}", stage.asset)
    assert stage.data is not None and stage.process is not None  # an SFT stage names both
    train = Path(sft_data.files[stage.data])
    mixed = None
    if stage == catalog.SFT and training.sft.mix:
        train, mixed = _mixed_sft_rows(context, env_short, training, train, mix or {}, out)
    data = {"train": str(train), f"tasks/{env_short}": str(sft_data.files["tasks"])}
    record = run_training_stage(
        context,
        stage=stage.process,
        env_short=env_short,
        config=training,
        out=out,
        model_dir=str(upstream.files["model"]) if upstream is not None else None,
        data=data,
        reward_configs=reward_configs_for([env_short], training, out.parent),
        launcher=launcher,
        tracking=tracking,
        resume=config.resume,
    )
    registry_model = catalog.model_name(training, env_short, stage)
    artifact = checkpoint_artifact(
        training,
        out,
        record,
        stage=stage.asset,
        env_label=env_short,
        registry_model=registry_model,
        sample=bool(sft_data.facts.get("sample")),
    )
    if mixed is not None:
        artifact = replace(
            artifact, facts={**artifact.facts, "sft_mix": mixed}, metadata={**artifact.metadata, "sft_mix": mixed}
        )
    if dataset is None:  # the base: nothing trained yet
        return artifact
    dev = dev_eval(context, env_short, registry_model, out, dataset, training)
    return replace(artifact, facts={**artifact.facts, "dev_eval": dev}, metadata={**artifact.metadata, "dev_eval": dev})


def _mixed_sft_rows(
    context: dg.AssetExecutionContext,
    env_short: str,
    training: TrainingConfig,
    own: Path,
    mix: dict[str, Artifact],
    out: Path,
) -> tuple[Path, dict[str, int]]:
    """The stage's own SFT rows with the rows its config's `sft.mix` draws from other
    environments' sft_data (the asset's `mix_<env>` inputs), in one file beside the checkpoint."""
    missing = sorted(set(training.sft.mix) - {name.removeprefix("mix_") for name in mix})
    if missing:
        raise dg.Failure(
            f"training config for {env_short}: sft.mix names {missing}, which checkpoint/{env_short}/sft does not "
            f"read (it reads {sorted(name.removeprefix('mix_') for name in mix) or 'none'}); set sft.mix in "
            f"configs/training/{env_short}.yaml so the definitions wire it"
        )
    from sv_dagster.training.sft_data import mix_rows

    others = {env: (Path(mix[f"mix_{env}"].files["sft"]), rows) for env, rows in training.sft.mix.items()}
    target = out.with_name(out.name + ".sft-mix.jsonl")
    counts = mix_rows(own, others, target, training.seed)
    drawn = ", ".join(f"{counts[env]} of sft_data/{env}" for env in sorted(others))
    context.log.info(f"sft for {env_short}: {counts['own']} rows of its own and {drawn} -> {target}")
    return target, counts


def build_stage_asset(env_short: str, stage: catalog.Stage) -> dg.AssetsDefinition:
    env = ENVS[env_short]
    ins = {"sft_data": dg.AssetIn(key=["sft_data", env_short])}
    if stage.upstream:  # a trained stage: its dev eval reads the dataset
        ins["dataset"] = dg.AssetIn(key=["dataset", env_short])
        ins["upstream"] = dg.AssetIn(key=asset_key_of(catalog.checkpoint_key(env_short, stage.upstream)))
    if stage == catalog.SFT:  # other environments' rows its config mixes in
        ins.update({f"mix_{other}": dg.AssetIn(key=["sft_data", other]) for other in catalog.sft_mix_envs(env_short)})
    declare = provenance_asset(
        key=asset_key_of(catalog.checkpoint_key(env_short, stage.asset)),
        ins=ins,
        group_name=env_group(env_short, "training"),
        kinds=TRAINING_KINDS,
        pool=None if stage == catalog.BASE else "gpu",  # one training process on the GPU at a time
        op_tags=gpu_op_tags(stage != catalog.BASE),
        tags={"sv/env": env_short, "sv/stage": stage.asset},
        description=f"{env.env_id}: {stage.doc}. Trains in its own process through Dagster Pipes; weights, "
        "config, reward weights and input data versions are saved together under outputs/checkpoints/. "
        "Then evaluated on the dev split (metadata dev_eval); the test split only by the eval assets.",
    )
    if stage.upstream is None:

        def first_stage(
            context: dg.AssetExecutionContext,
            config: TrainingRunConfig,
            sft_data: Artifact,
            launcher: PipesLauncher,
            tracking: ExperimentTracking,
        ) -> Artifact:
            return _train(context, env_short, stage, config, sft_data, None, launcher, tracking, None)

        return declare(first_stage)

    def next_stage(
        context: dg.AssetExecutionContext,
        config: TrainingRunConfig,
        sft_data: Artifact,
        dataset: Artifact,
        upstream: Artifact,
        launcher: PipesLauncher,
        tracking: ExperimentTracking,
        **mix: Artifact,
    ) -> Artifact:
        return _train(context, env_short, stage, config, sft_data, dataset, launcher, tracking, upstream, mix)

    return declare(next_stage)


def _review_prompts(sft_data: list[Artifact], limit: int) -> list[list[dict[str, str]]]:
    from sv_dagster.training.sft_data import read_rows

    prompts: list[list[dict[str, str]]] = []
    for artifact in sft_data:
        prompts += [row["prompt"] for row in read_rows(Path(artifact.files["grpo"]))[:limit]]
    return prompts


def review_group(key: str) -> str:
    """`safety_review/<env>/<stage>` is its environment's; the cross-environment review is `safety`."""
    parts = key.split("/")
    return env_group(parts[1], "safety") if len(parts) == 3 else "safety"


def build_review_asset(key: str, checkpoint_key: str, sft_keys: list[str], label: str) -> dg.AssetsDefinition:
    ins = {
        "checkpoint": dg.AssetIn(key=asset_key_of(checkpoint_key)),
        **{f"sft_{i}": dg.AssetIn(key=asset_key_of(k)) for i, k in enumerate(sft_keys)},
    }

    @provenance_asset(
        key=asset_key_of(key),
        ins=ins,
        group_name=review_group(key),
        kinds={"json", "markdown"},
        tags={"sv/checkpoint": checkpoint_key.replace("/", ".")},
        description=f"Automated safety review of {label}: adversarial probes (E6 turns, E5 behaviors), the checkpoint's "
        "own environment replies and canary prompts, judged by the safety classifier (configs/safety/review.yaml). Its "
        "blocking check `automated_review` stops the chain when it fails; promotion also needs a human sign-off.",
    )
    def review(context: dg.AssetExecutionContext, checkpoint: Artifact, **sft_data: Artifact) -> Artifact:
        from sv_dagster.assets.common import artifact_dir
        from sv_dagster.training.review import load_review_config, review_checkpoint

        config = load_review_config()
        report = review_checkpoint(
            Path(checkpoint.files["model"]),
            _review_prompts(list(sft_data.values()), config.max_env_prompts),
            config,
            name=checkpoint_key,
        )
        out = artifact_dir(context, *key.split("/"))
        write_json(out / "report.json", report.as_dict())
        (out / "report.md").write_text(report.markdown(), encoding="utf-8")
        log = context.log.info if report.passed else context.log.warning
        log(
            f"safety review of {checkpoint_key}: {'passed' if report.passed else 'FAILED: ' + '; '.join(report.reasons)}"
        )
        return Artifact(
            path=out,
            config={"review_config": config.source, "thresholds": config.thresholds, "classifier": config.classifier},
            facts={
                "checkpoint_path": str(checkpoint.files["model"]),
                "review_passed": report.passed,
                "classifier": report.classifier,
                "judge_validation": report.classifier_validation.get("status")
                or report.classifier_validation.get("error"),
                "sample": checkpoint.facts.get("sample"),
            },
            metadata={
                "checkpoint_path": dg.MetadataValue.path(str(checkpoint.files["model"])),
                "review_passed": report.passed,
                "reasons": dg.MetadataValue.text("; ".join(report.reasons) or "none"),
                "rates": report.rates,
                "judge_validation": dg.MetadataValue.text(
                    str(report.classifier_validation.get("status") or report.classifier_validation.get("error"))
                ),
                "report": dg.MetadataValue.md(report.markdown()),
            },
            files={"report": out / "report.json", "model": Path(checkpoint.files["model"])},
        )

    return review


def build_review_check(key: str) -> dg.AssetChecksDefinition:
    asset_key = asset_key_of(key)

    @dg.asset_check(
        asset=asset_key,
        name=AUTOMATED_REVIEW,
        blocking=True,
        description="Passes when the automated safety review passed (every rate within its threshold, no "
        "canary hit, the classifier answered). Blocking: a failed review stops the chain, so the "
        "checkpoint is neither evaluated nor promotable.",
    )
    def automated_review(context) -> dg.AssetCheckResult:
        entry = context.instance.get_latest_materialization_event(asset_key)
        metadata = entry.asset_materialization.metadata
        report = json.loads((Path(metadata["artifact_path"].value) / "report.json").read_text())
        return dg.AssetCheckResult(
            passed=bool(report["passed"]),
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={
                "reasons": dg.MetadataValue.text("; ".join(report["reasons"]) or "none"),
                "rates": dg.MetadataValue.json(report["rates"]),
                "canaries": dg.MetadataValue.json(report["canaries"]),
                "classifier": report["classifier"],
                "judge_validation": str((report.get("classifier_validation") or {}).get("status") or "not measured"),
            },
        )

    return automated_review


class SignoffConfig(dg.Config):
    reviewer: str = Field(description="Who reviewed the checkpoint (name or handle).")
    verdict: str = Field(description="approve or reject.")
    note: str = Field(default="", description="What the reviewer looked at, or why they rejected it.")


def build_signoff_asset(env_short: str) -> dg.AssetsDefinition:
    review_key = catalog.review_key(env_short, catalog.RLFT1.asset)

    @provenance_asset(
        key=["safety_signoff", env_short],
        deps=[asset_key_of(review_key)],
        group_name=env_group(env_short, "safety"),
        kinds={"json"},
        tags={"sv/env": env_short},
        description=f"A human's sign-off on the reviewed {env_short} checkpoint (reviewer, time, verdict, and the data "
        f"version of the review it read). Recorded by `sv-dagster signoff {env_short} --reviewer NAME --verdict "
        "approve|reject`, never by a schedule; the training job does not wait for it.",
    )
    def safety_signoff(context: dg.AssetExecutionContext, config: SignoffConfig) -> Artifact:
        import getpass

        from sv_dagster.assets.common import artifact_dir

        if config.verdict not in ("approve", "reject"):
            raise dg.Failure(f"verdict must be approve or reject, not {config.verdict!r}")
        if not config.reviewer.strip():
            raise dg.Failure("a sign-off needs the reviewer's name")
        entry = context.instance.get_latest_materialization_event(asset_key_of(review_key))
        if entry is None:
            raise dg.Failure(f"{review_key} was never materialized: there is nothing to sign off")
        review_version = (entry.tags or {}).get(DATA_VERSION_TAG)
        metadata = entry.asset_materialization.metadata
        record = {
            "reviewer": config.reviewer.strip(),
            "verdict": config.verdict,
            "note": config.note,
            "signed_at": datetime.now(UTC).isoformat(),
            "os_user": getpass.getuser(),
            "review": review_key,
            "review_data_version": review_version,
            "review_passed": bool(metadata["review_passed"].value) if "review_passed" in metadata else False,
            "checkpoint_path": metadata["checkpoint_path"].value,
        }
        out = artifact_dir(context, "safety_signoff", env_short)
        write_json(out / "signoff.json", record)
        return Artifact(
            path=out,
            config=config.model_dump(),
            facts=record,
            metadata={key: record[key] for key in ("reviewer", "verdict", "signed_at", "review_data_version")},
            files={"signoff": out / "signoff.json"},
        )

    return safety_signoff


def build_promoted_asset(env_short: str) -> dg.AssetsDefinition:
    review_key = catalog.review_key(env_short, catalog.RLFT1.asset)

    @provenance_asset(
        key=asset_key_of(catalog.checkpoint_key(env_short, catalog.PROMOTED.asset)),
        ins={"signoff": dg.AssetIn(key=["safety_signoff", env_short])},
        deps=[asset_key_of(review_key)],
        group_name=env_group(env_short, "training"),
        kinds={"json"},
        tags={"sv/env": env_short},
        description=f"The {env_short} checkpoint the sweeps and nightly regressions evaluate: the reviewed stage-1 "
        "checkpoint, once its automated review passed and a human approved exactly that review.",
    )
    def promoted(context: dg.AssetExecutionContext, signoff: Artifact) -> Artifact:
        from sv_dagster.assets.common import artifact_dir

        facts = signoff.facts
        entry = context.instance.get_latest_materialization_event(asset_key_of(review_key))
        current = (entry.tags or {}).get(DATA_VERSION_TAG) if entry else None
        problems = []
        if facts.get("verdict") != "approve":
            problems.append(f"the reviewer {facts.get('reviewer')} rejected it ({facts.get('note') or 'no note'})")
        if not facts.get("review_passed"):
            problems.append("its automated safety review failed")
        if facts.get("review_data_version") != current:
            problems.append("the sign-off is for an older review than the latest one; sign off again")
        if problems:
            raise dg.Failure(f"{env_short}: checkpoint not promoted: " + "; ".join(problems))
        out = artifact_dir(context, "checkpoints", "promoted", env_short)
        record = {
            "checkpoint_path": facts["checkpoint_path"],
            "review_data_version": current,
            "signed_off_by": facts["reviewer"],
            "signed_at": facts["signed_at"],
        }
        write_json(out / "promoted.json", record)
        return Artifact(
            path=out,
            config={"env": env_short},
            facts=record,
            metadata={
                "checkpoint_path": dg.MetadataValue.path(facts["checkpoint_path"]),
                "signed_off_by": facts["reviewer"],
            },
            files={"promoted": out / "promoted.json", "model": Path(facts["checkpoint_path"])},
        )

    return promoted


def build_stage2_asset(owner: str, config: TrainingConfig) -> dg.AssetsDefinition:
    """Stage 2 from `owner`'s reviewed stage-1 checkpoint, over its config's curriculum."""
    envs = list(config.curriculum.envs)
    start = catalog.review_key(owner, catalog.RLFT1.asset)

    @provenance_asset(
        key=asset_key_of(catalog.STAGE2),
        ins={
            "start": dg.AssetIn(key=asset_key_of(start)),
            **{f"sft_{e}": dg.AssetIn(key=["sft_data", e]) for e in envs},
        },
        group_name="training",
        kinds=TRAINING_KINDS,
        pool="gpu",
        op_tags=gpu_op_tags(),
        tags={"sv/stage": "rlft_stage2"},
        description=f"Stage 2: GRPO over a curriculum mixing {', '.join(envs)} in every batch (easy examples first), "
        f"starting from the reviewed {owner.upper()} stage-1 checkpoint; each environment's own rewards score its rows.",
    )
    def rlft_stage2(
        context: dg.AssetExecutionContext,
        config: TrainingRunConfig,
        start: Artifact,
        launcher: PipesLauncher,
        tracking: ExperimentTracking,
        **sft: Artifact,
    ) -> Artifact:
        from sv_dagster.training.curriculum import curriculum_rows
        from sv_dagster.training.sft_data import read_rows, write_rows
        from sv_shared.textrefs import texts_in_files

        training = resolve_stage2_config(owner, envs, config)
        out = checkpoint_dir(context, f"{training.model.name}-curriculum", "rlft_stage2")
        by_env = {name.removeprefix("sft_"): read_rows(Path(a.files["grpo"])) for name, a in sft.items()}
        rows = curriculum_rows(by_env, training.curriculum, seed=training.seed)
        data_path = out.with_name(out.name + ".curriculum.jsonl")
        out.parent.mkdir(parents=True, exist_ok=True)
        write_rows(data_path, rows, by_reference=texts_in_files(Path(a.files["grpo"]) for a in sft.values()))
        data = {
            "train": str(data_path),
            **{f"tasks/{e}": str(a.files["tasks"]) for e, a in ((n.removeprefix("sft_"), a) for n, a in sft.items())},
        }
        record = run_training_stage(
            context,
            stage="grpo_curriculum",
            env_short=owner,
            config=training,
            out=out,
            model_dir=str(start.files["model"]),
            data=data,
            reward_configs=reward_configs_for(envs, training, out.parent),
            launcher=launcher,
            tracking=tracking,
            resume=config.resume,
        )
        return checkpoint_artifact(
            training,
            out,
            record,
            stage="rlft_stage2",
            env_label="+".join(envs),
            registry_model=catalog.stage2_model_name(training),
            sample=any(a.facts.get("sample") for a in sft.values()),
        )

    return rlft_stage2


def training_assets() -> tuple[list[dg.AssetsDefinition], list[dg.AssetChecksDefinition]]:
    assets: list[dg.AssetsDefinition] = []
    checks: list[dg.AssetChecksDefinition] = []
    for env_short in catalog.training_envs():
        assets.append(build_sft_data_asset(env_short))
        assets += [build_stage_asset(env_short, stage) for stage in catalog.ENV_STAGES]
        review = catalog.review_key(env_short, catalog.RLFT1.asset)
        assets.append(
            build_review_asset(
                review,
                catalog.checkpoint_key(env_short, catalog.RLFT1.asset),
                [f"sft_data/{env_short}"],
                f"the {env_short} stage-1 checkpoint",
            )
        )
        checks.append(build_review_check(review))
        assets += [build_signoff_asset(env_short), build_promoted_asset(env_short)]
    owner = catalog.stage2_env()
    if owner is not None:
        config = catalog.training_config(owner)
        assets.append(build_stage2_asset(owner, config))
        assets.append(
            build_review_asset(
                catalog.STAGE2_REVIEW,
                catalog.STAGE2,
                [f"sft_data/{e}" for e in config.curriculum.envs],
                "the stage-2 checkpoint",
            )
        )
        checks.append(build_review_check(catalog.STAGE2_REVIEW))
    return assets, checks
