"""study/<name>: a hypothesis of the research plan tested by training over seeds
(configs/studies/<name>.yaml), with dev curves, one test eval per checkpoint and paired
tests between stages. Jobs `study_<name>`; the analysis is `sv_dagster.training.study`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from sv_dagster.assets.common import artifact_dir, write_json
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.assets.training import (
    TrainingRunConfig,
    _mixed_sft_rows,
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
from sv_dagster.training.config import TrainingConfig
from sv_dagster.training.study import Arm, StudyConfig, list_studies, load_study


class StudyRunConfig(dg.Config):
    profile: str | None = Field(default=None, description="Training profile (default as for rlft_<env>).")
    seeds: list[int] | None = Field(default=None, description="Seeds to train (default: the study config's).")
    grpo_steps: int | None = Field(default=None, description="GRPO steps per seed (default: the study config's).")
    eval_every: int | None = Field(default=None, description="GRPO steps between dev-curve points.")
    dev_limit: int | None = Field(default=None, description="Dev examples per curve point (default: the study's).")
    overrides: str | None = Field(
        default=None,
        description='JSON merged over the study\'s training settings, e.g. {"grpo": {"learning_rate": 1e-6}}.',
    )
    resume: bool = Field(default=True, description="Continue an interrupted stage from its last TRL checkpoint.")


def _plan(study: StudyConfig, config: StudyRunConfig) -> StudyConfig:
    from sv_dagster.training.config import merge_config

    changes: dict[str, Any] = {
        key: value
        for key, value in {
            "seeds": config.seeds,
            "eval_every": config.eval_every,
            "dev_limit": config.dev_limit,
        }.items()
        if value is not None
    }
    if config.overrides:
        try:
            changes["training"] = merge_config(study.training, json.loads(config.overrides))
        except json.JSONDecodeError as exc:
            raise dg.Failure(f"study run config: overrides is not JSON: {exc}") from exc
    return study.model_copy(update=changes)


class _Evaluator:
    """Evaluates a study's checkpoints on its dataset's dev or test split, under the study's
    own outputs folder (apart from the eval assets' runs), greedy as every checkpoint eval."""

    def __init__(self, env_short: str, study: str, dataset: Artifact, run_id: str, tokens: int, dev_limit: int | None):
        self.env_short, self.study, self.dataset, self.run_id = env_short, study, dataset, run_id
        self.tokens, self.dev_limit = tokens, dev_limit

    def __call__(self, label: str, checkpoint: Path, split: str):
        from sv_dagster.core.evals.references import label_prior
        from sv_dagster.training.evaluation import evaluate_checkpoint

        limit = self.dev_limit if split == "dev" else None
        return evaluate_checkpoint(
            ENVS[self.env_short],
            f"study-{self.study}-{label}",
            checkpoint,
            dataset_path=Path(self.dataset.files[split]),
            outputs_root=outputs_root() / "studies",
            run_id=f"{self.run_id}-{split}",
            max_tokens=self.tokens,
            dataset_info={
                "split": split,
                "sample": bool(self.dataset.facts.get("sample")),
                "label_prior": label_prior(self.dataset.files["metadata"], split),
            },
            limit=limit,
            seed=42 if limit else None,
        )


def _evaluate_run(
    evaluate: _Evaluator, tag: str, trained: dict[str, Any], base_rows: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """One run's dev curve (the SFT checkpoint, each GRPO snapshot, the final weights), its
    test evals and the paired tests between its stages; returns its record and test rows."""
    from sv_dagster.core.evals.runner import read_results
    from sv_dagster.training import study as plain

    checkpoints = {"sft": Path(trained["sft"]["checkpoint"]), "grpo": Path(trained["grpo"]["checkpoint"])}
    sft_dev: list[dict[str, Any]] | None = None
    curve = []
    for step, label, path in [(0, "sft", checkpoints["sft"]), *trained["points"]]:
        ev = evaluate(f"{tag}-{label}", path, "dev")
        rows = read_results(ev.results_path)
        sft_dev = rows if sft_dev is None else sft_dev
        curve.append(plain.curve_point(step, label, ev.summary, plain.replies_changed(sft_dev, rows), ev.run_dir))
    tests = {stage: evaluate(f"{tag}-{stage}", path, "test") for stage, path in checkpoints.items()}
    rows_of = {"base": base_rows, **{stage: read_results(ev.results_path) for stage, ev in tests.items()}}
    record = {
        "sft": trained["sft"],
        "grpo": trained["grpo"],
        "curve": curve,
        "test": {stage: plain.eval_row(ev.summary, ev.run_dir) for stage, ev in tests.items()},
        "comparisons": {
            f"{cand}_vs_{basis}": plain.compare_stages(rows_of[basis], rows_of[cand])
            for cand, basis in plain.STAGE_PAIRS
        },
        "diagnostics": plain.diagnostics(trained["grpo"].get("signal"), curve),
    }
    return record, {stage: rows_of[stage] for stage in ("sft", "grpo")}


def build_study_asset(name: str) -> dg.AssetsDefinition:
    study = load_study(name)
    env_short = study.env
    mixed = catalog.sft_mix_envs(env_short)

    @provenance_asset(
        key=["study", name],
        ins={
            "dataset": dg.AssetIn(key=["dataset", env_short]),
            "sft_data": dg.AssetIn(key=["sft_data", env_short]),
            "base": dg.AssetIn(key=asset_key_of(catalog.checkpoint_key(env_short, catalog.BASE.asset))),
            **{f"mix_{other}": dg.AssetIn(key=["sft_data", other]) for other in mixed},
        },
        group_name="training",  # with stage 2: programs over several stages
        kinds={"json", "markdown"},
        pool="gpu",
        op_tags=gpu_op_tags(),
        tags={"sv/env": env_short, "sv/hypothesis": study.hypothesis},
        description=f"{study.hypothesis} on {env_short}: {study.title}. Per seed base -> SFT -> GRPO, a dev curve every "
        f"{study.eval_every} GRPO steps, each checkpoint once on test, paired tests between stages; report and plot.",
    )
    def study_asset(
        context: dg.AssetExecutionContext,
        config: StudyRunConfig,
        dataset: Artifact,
        sft_data: Artifact,
        base: Artifact,
        launcher: PipesLauncher,
        tracking: ExperimentTracking,
        **mix: Artifact,
    ) -> Artifact:
        from sv_dagster.core.evals.runner import read_results
        from sv_dagster.training import study as plain

        if "dev" not in dataset.files:
            raise dg.Failure(f"study/{name}: dataset/{env_short} has no dev split to draw the curve on")
        plan = _plan(study, config)
        out = artifact_dir(context, "studies", name)
        configs = {
            (arm, seed): resolve_config(
                env_short,
                TrainingRunConfig(
                    profile=config.profile,
                    overrides=json.dumps(plain.seed_overrides(plan, seed, arm=arm, grpo_steps=config.grpo_steps)),
                ),
            )
            for arm, seed in plan.runs()
        }  # every run's config checked before any training
        first = next(iter(configs.values()))
        evaluate = _Evaluator(env_short, name, dataset, context.run_id, first.eval_max_tokens, plan.dev_limit)
        base_path = Path(base.files["model"])
        base_dev, base_test = evaluate("base", base_path, "dev"), evaluate("base", base_path, "test")
        test_rows: dict[tuple[str, int], dict[str, list[dict[str, Any]]]] = {}
        seeds = []
        for (arm, seed), training in configs.items():
            tag = f"s{seed}" if len(plan.arms) == 1 else f"{arm}-s{seed}"  # its folders' and evals' names
            trained = _train_run(
                context, name, env_short, tag, training, plan.arms[arm], sft_data, base, mix, launcher, tracking, config
            )
            record, test_rows[(arm, seed)] = _evaluate_run(evaluate, tag, trained, read_results(base_test.results_path))
            seeds.append({"arm": arm, "seed": seed, "label": plan.label(arm, seed), **record})
            context.log.info(
                f"study/{name} {plan.label(arm, seed)}: "
                + ", ".join(
                    f"{pair} {c['metric']} {c['delta']:+.3f} ({c['verdict']})"
                    for pair, found in record["comparisons"].items()
                    for c in found
                    if c["metric"] == "mean_reward"
                )
            )
        g = first.grpo
        summary: dict[str, Any] = {
            "study": name,
            "hypothesis": plan.hypothesis,
            "env": env_short,
            "title": plan.title,
            "claim": plan.claim,
            "model": first.model.name,
            "base_model": first.model.base,
            "eval_every": plan.eval_every,
            "dev_limit": plan.dev_limit,
            "grpo_steps": g.max_steps,
            "grpo_learning_rate": g.learning_rate,
            "completions_per_step": g.prompts_per_step * g.num_generations,
            "training_configs": {plan.label(*run): training.model_dump() for run, training in configs.items()},
            "sample": bool(dataset.facts.get("sample")),
            "base_test": plain.eval_row(base_test.summary, base_test.run_dir),
            "base_dev": plain.eval_row(base_dev.summary, base_dev.run_dir),
            "references": plain.reference_rows(base_test.summary),
            "dev_references": plain.reference_rows(base_dev.summary),
            "seeds": seeds,
            "arms": {arm: spec.model_dump() for arm, spec in plan.arms.items()},
            "arm_comparisons": plain.arm_comparisons(plan, test_rows) if len(plan.arms) > 1 else {},
            "plot": str(out / "dev_curve.png"),
            "command": f"dagster job execute -j study_{name}",
        }
        write_json(out / "study.json", summary)
        markdown = plain.render_study(out)
        wall = sum(s["sft"]["wall_seconds"] + s["grpo"]["wall_seconds"] for s in seeds)
        return Artifact(
            path=out,
            config={"study": plan.model_dump(), "run": config.model_dump()},
            seed=plan.seeds[0],
            facts={
                "study": name,
                "hypothesis": plan.hypothesis,
                "env": env_short,
                "seeds": plan.seeds,
                "base_model": first.model.base,
                "training_wall_seconds": wall,
                "sample": summary["sample"],
            },
            metadata={"report": dg.MetadataValue.md(markdown), "training_wall_seconds": wall},
            files={"report": out / "study.md", "json": out / "study.json", "plot": out / "dev_curve.png"},
        )

    return study_asset


def _train_run(
    context: dg.AssetExecutionContext,
    name: str,
    env_short: str,
    tag: str,
    training: TrainingConfig,
    arm: Arm,
    sft_data: Artifact,
    base: Artifact,
    mix: dict[str, Artifact],
    launcher: PipesLauncher,
    tracking: ExperimentTracking,
    config: StudyRunConfig,
) -> dict[str, Any]:
    """SFT then GRPO of one run (an arm and a seed); returns their records and the dev-curve
    checkpoints (`points`: step, label, folder) the GRPO snapshots and final weights give."""
    model = f"{training.model.name}-{env_short}"
    sft_out = checkpoint_dir(context, model, f"study-{name}-{tag}-sft")
    train_rows = Path(sft_data.files["sft"])
    if not arm.synthetic_sft:
        train_rows = _without_synthetic(context, sft_data, sft_out)
    if training.sft.mix:
        train_rows, _ = _mixed_sft_rows(context, env_short, training, train_rows, mix, sft_out)
    tasks = {f"tasks/{env_short}": str(sft_data.files["tasks"])}

    def train(stage: str, out: Path, start: Path, data: dict[str, str], rewards: dict[str, str | None]):
        return run_training_stage(
            context,
            stage=stage,
            env_short=env_short,
            config=training,
            out=out,
            model_dir=str(start),
            data={**data, **tasks},
            reward_configs=rewards,
            launcher=launcher,
            tracking=tracking,
            resume=config.resume,
        )

    sft = train("sft", sft_out, Path(base.files["model"]), {"train": str(train_rows)}, {})
    grpo_out = checkpoint_dir(context, model, f"study-{name}-{tag}-grpo")
    grpo = train(
        "grpo",
        grpo_out,
        sft_out,
        {"train": str(sft_data.files["grpo"])},
        reward_configs_for([env_short], training, grpo_out.parent),
    )
    steps = grpo.get("steps") or 0
    points = [
        (s["step"], f"step{s['step']}", Path(s["path"])) for s in grpo.get("snapshots") or [] if s["step"] < steps
    ]
    points.append((steps, "grpo", grpo_out))  # the final weights (a snapshot at the last step is the same)
    keep = ("wall_seconds", "steps", "cpu_hours", "gpu_hours", "signal", "completions_scored", "n_reward_errors")
    return {
        "sft": {"checkpoint": str(sft_out), **{k: sft.get(k) for k in ("wall_seconds", "steps", "cpu_hours")}},
        "grpo": {"checkpoint": str(grpo_out), **{k: grpo.get(k) for k in keep}},
        "points": points,
    }


def _without_synthetic(context: dg.AssetExecutionContext, sft_data: Artifact, out: Path) -> Path:
    """sft_data's SFT rows minus those made from its synthetic batch, in a file beside `out`.
    Rows are read and written as stored: harmful texts stay text-store markers."""
    from sv_dagster.training.sft_data import write_rows
    from sv_dagster.training.study import without_synthetic

    def stored(path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    rows = stored(Path(sft_data.files["sft"]))
    batch = sft_data.files.get("synthetic")
    ids = {str(task["id"]) for task in stored(Path(batch))} if batch else set()
    kept = without_synthetic(rows, ids)
    if not kept:
        raise dg.Failure(f"{sft_data.files['sft']}: every SFT row comes from the synthetic batch {batch}")
    target = out.with_name(out.name + ".sft-no-synthetic.jsonl")
    write_rows(target, kept)
    context.log.info(f"SFT without the synthetic batch: {len(kept)} of {len(rows)} rows -> {target}")
    return target


def study_assets() -> list[dg.AssetsDefinition]:
    return [build_study_asset(name) for name in list_studies()]


def study_keys() -> dict[str, dg.AssetKey]:
    return {name: dg.AssetKey(["study", name]) for name in list_studies()}


def study_env(name: str) -> str:
    return load_study(name).env
