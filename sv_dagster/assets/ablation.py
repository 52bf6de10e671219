"""ablation/<env>: every experiment in configs/experiments/<env>/ trained and evaluated
against the same baseline (the env's stage-1 checkpoint), reported as paired deltas.
Jobs `ablation_<env>`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from sv_dagster.assets.common import artifact_dir, write_json
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.assets.training import (
    TrainingRunConfig,
    asset_key_of,
    checkpoint_dir,
    gpu_op_tags,
    resolve_config,
    reward_configs_for,
    run_training_stage,
)
from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.envs import ENVS
from sv_dagster.resources import ExperimentTracking, PipesLauncher
from sv_dagster.training import catalog
from sv_dagster.training.config import list_experiments
from sv_dagster.training.evaluation import evaluate_checkpoint


class AblationConfig(dg.Config):
    experiments: list[str] | None = Field(
        default=None, description="Experiment names (default: every file in configs/experiments/<env>/)."
    )
    limit: int | None = Field(default=None, description="Evaluate on N test examples (seeded subset; default all).")
    overrides: str | None = Field(
        default=None,
        description='JSON merged over every variant\'s config, e.g. {"grpo": '
        '{"max_steps": 5}} (the baseline was trained by rlft_<env> with its own).',
    )
    seed: int = 42


def _evaluate(
    env_short: str, name: str, checkpoint: Path, dataset: Artifact, run_id: str, config: AblationConfig, max_tokens: int
):
    return evaluate_checkpoint(
        ENVS[env_short],
        name,
        checkpoint,
        dataset_path=Path(dataset.files["test"]),
        outputs_root=outputs_root(),
        run_id=run_id,
        max_tokens=max_tokens,
        limit=config.limit,
        seed=config.seed,
        dataset_info={"split": "test", "sample": bool(dataset.facts.get("sample"))},
    )


def build_ablation_asset(env_short: str) -> dg.AssetsDefinition:
    @provenance_asset(
        key=["ablation", env_short],
        ins={
            "dataset": dg.AssetIn(key=["dataset", env_short]),
            "sft_data": dg.AssetIn(key=["sft_data", env_short]),
            "base": dg.AssetIn(key=asset_key_of(catalog.checkpoint_key(env_short, catalog.BASE.asset))),
            "sft": dg.AssetIn(key=asset_key_of(catalog.checkpoint_key(env_short, catalog.SFT.asset))),
            "baseline": dg.AssetIn(key=asset_key_of(catalog.checkpoint_key(env_short, catalog.RLFT1.asset))),
        },
        group_name="ablations",
        kinds={"json", "markdown"},
        pool="gpu",
        op_tags=gpu_op_tags(),
        tags={"sv/env": env_short},
        description=f"Ablations for {env_short}: each experiment (configs/experiments/{env_short}/) trained from the "
        "baseline's own starting point and evaluated with it on the same test examples; paired deltas with CIs and "
        "p-values, and what each variant cost.",
    )
    def ablation(
        context: dg.AssetExecutionContext,
        config: AblationConfig,
        dataset: Artifact,
        sft_data: Artifact,
        base: Artifact,
        sft: Artifact,
        baseline: Artifact,
        launcher: PipesLauncher,
        tracking: ExperimentTracking,
    ) -> Artifact:
        from sv_dagster.core.evals.runner import read_results
        from sv_dagster.training.ablation import (
            VariantResult,
            as_dicts,
            changed_fields,
            paired_deltas,
            report_markdown,
            retrains_sft,
        )
        from sv_dagster.training.sft_data import build_examples, load_tasks, read_rows, referenced_texts, write_rows

        names = config.experiments or list_experiments(env_short)
        if not names:
            raise dg.Failure(f"no experiments under configs/experiments/{env_short}/")
        default = resolve_config(env_short, TrainingRunConfig(overrides=config.overrides))
        # Every experiment's config is checked before any training starts.
        variants_cfg = {
            name: resolve_config(env_short, TrainingRunConfig(experiment=name, overrides=config.overrides))
            for name in names
        }
        out = artifact_dir(context, "ablations", env_short)
        tokens = default.eval_max_tokens
        base_eval = _evaluate(
            env_short,
            f"ablation-{env_short}-baseline",
            Path(baseline.files["model"]),
            dataset,
            f"{context.run_id}-baseline",
            config,
            tokens,
        )
        base_rows = read_results(base_eval.results_path)
        variants: list[VariantResult] = []
        for name, variant in variants_cfg.items():
            model = f"{variant.model.name}-{env_short}"
            wall = cpu = gpu = 0.0
            start = Path(sft.files["model"])
            if retrains_sft(default, variant):
                rows_path = out / f"{name}-sft.jsonl"
                tasks = load_tasks(ENVS[env_short], Path(sft_data.files["tasks"]))
                examples = build_examples(
                    env_short,
                    tasks,
                    variant=variant.sft_variant,
                    seed=variant.seed,
                    context={"fix_pairs": read_rows(Path(dataset.files["fix_pairs"]))}
                    if "fix_pairs" in dataset.files
                    else {},
                )
                write_rows(rows_path, (e.sft_row() for e in examples), by_reference=referenced_texts(tasks))
                sft_out = checkpoint_dir(context, model, f"ablation-{name}-sft")
                record = run_training_stage(
                    context,
                    stage="sft",
                    env_short=env_short,
                    config=variant,
                    out=sft_out,
                    model_dir=str(base.files["model"]),
                    data={"train": str(rows_path)},
                    reward_configs={},
                    launcher=launcher,
                    tracking=tracking,
                    resume=True,
                )
                wall, cpu, gpu = record["wall_seconds"], record["cpu_hours"], record["gpu_hours"]
                start = sft_out
            grpo_out = checkpoint_dir(context, model, f"ablation-{name}")
            record = run_training_stage(
                context,
                stage="grpo",
                env_short=env_short,
                config=variant,
                out=grpo_out,
                model_dir=str(start),
                data={"train": str(sft_data.files["grpo"]), f"tasks/{env_short}": str(sft_data.files["tasks"])},
                reward_configs=reward_configs_for([env_short], variant, grpo_out.parent),
                launcher=launcher,
                tracking=tracking,
                resume=True,
            )
            run = _evaluate(
                env_short, f"ablation-{env_short}-{name}", grpo_out, dataset, f"{context.run_id}-{name}", config, tokens
            )
            variants.append(
                VariantResult(
                    experiment=name,
                    description=variant.description,
                    changes=changed_fields(default, variant),
                    checkpoint=str(grpo_out),
                    eval_dir=str(run.run_dir),
                    wall_seconds=wall + record["wall_seconds"],
                    cpu_hours=cpu + record["cpu_hours"],
                    gpu_hours=gpu + record["gpu_hours"],
                    deltas=paired_deltas(base_rows, read_results(run.results_path)),
                )
            )
            context.log.info(
                f"{env_short}/{name}: "
                + ", ".join(f"{d['metric']} {d['delta']:+.3f} (p={d['p_value']:.2g})" for d in variants[-1].deltas)
            )
        summary: dict[str, Any] = {
            "env": env_short,
            "baseline": {
                "checkpoint": str(baseline.files["model"]),
                "eval_dir": str(base_eval.run_dir),
                "summary": base_eval.summary,
            },
            "variants": as_dicts(variants),
        }
        write_json(out / "ablations.json", summary)
        markdown = report_markdown(env_short, summary["baseline"], variants)
        (out / "ablations.md").write_text(markdown, encoding="utf-8")
        return Artifact(
            path=out,
            config=config.model_dump(),
            seed=config.seed,
            facts={
                "experiments": names,
                "baseline_checkpoint": str(baseline.files["model"]),
                "env": env_short,
                "base_model": default.model.base,
                "cpu_hours": sum(v.cpu_hours for v in variants),
                "gpu_hours": sum(v.gpu_hours for v in variants),
                "wall_seconds": sum(v.wall_seconds for v in variants),
                "sample": bool(dataset.facts.get("sample")),
            },
            metadata={
                "report": dg.MetadataValue.md(markdown),
                "cpu_hours": sum(v.cpu_hours for v in variants),
                "gpu_hours": sum(v.gpu_hours for v in variants),
                "wall_seconds": sum(v.wall_seconds for v in variants),
            },
            files={"report": out / "ablations.md", "json": out / "ablations.json"},
        )

    return ablation


def ablation_assets() -> list[dg.AssetsDefinition]:
    return [build_ablation_asset(env) for env in catalog.training_envs() if list_experiments(env)]


def ablation_jobs() -> list[dg.UnresolvedAssetJobDefinition]:
    return [
        dg.define_asset_job(
            name=f"ablation_{env}",
            selection=dg.AssetSelection.assets(dg.AssetKey(["ablation", env])),
            tags={"sv/env": env, "sv/program": "ablation"},
            description=f"Train and evaluate every {env} experiment against the {env} stage-1 baseline (run rlft_{env} first).",
        )
        for env in catalog.training_envs()
        if list_experiments(env)
    ]
