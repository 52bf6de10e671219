"""Co-training of an attack environment and its counterpart defense environment (E5 and E6:
checkpoint/e5/cotrain_<k>, the attacker, and checkpoint/e6/cotrain_<k>, the defender), alternating.

Cycle k: the attacker continues from its previous checkpoint with GRPO whose reward plays
each sampled attack against the defender of cycle k-1 (a local model; the rule classifier
judges); then that attacker attacks the same defender on the attack environment's train and
dev behaviors (never its test split), and the attacks that succeed become refusal probes the
defender trains on with GRPO (beside the defense environment's own conversations). Attack texts may be unsafe: they pass in memory and through a temporary
folder outside the outputs, as in the tournament; only their count and hash are recorded.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

import dagster as dg

from sv_dagster.assets.common import env_group
from sv_dagster.assets.recipe import Artifact, provenance_asset
from sv_dagster.assets.training import (
    TRAINING_KINDS,
    TrainingRunConfig,
    asset_key_of,
    checkpoint_artifact,
    checkpoint_dir,
    gpu_op_tags,
    resolve_config,
    reward_configs_for,
    run_training_stage,
)
from sv_dagster.core.artifacts.paths import outputs_root
from sv_dagster.core.envs import EnvSpec
from sv_dagster.resources import ExperimentTracking, PipesLauncher
from sv_dagster.training import catalog
from sv_dagster.training.evaluation import evaluate_checkpoint
from sv_shared.redteam import attack_probe_row, successful_attack_text
from sv_shared.sft import SftExample, chat_messages

ATTACK_MAX_TOKENS = 96
"""Reply length of both sides when the cycle's attacker plays its defender: room for a multi-sentence attack."""


def cycle_key(env: EnvSpec, cycle: int) -> str:
    """The co-training checkpoint of `env` after `cycle` (cycle 0: its SFT checkpoint)."""
    return catalog.checkpoint_key(env.short, "sft" if cycle == 0 else f"cotrain_{cycle}")


def build_attacker_asset(attack: EnvSpec, defense: EnvSpec, cycle: int) -> dg.AssetsDefinition:
    a = attack.short

    @provenance_asset(
        key=asset_key_of(cycle_key(attack, cycle)),
        ins={
            "start": dg.AssetIn(key=asset_key_of(cycle_key(attack, cycle - 1))),
            "defender": dg.AssetIn(key=asset_key_of(cycle_key(defense, cycle - 1))),
            "sft_data": dg.AssetIn(key=["sft_data", a]),
        },
        group_name=env_group(attack.short, "training"),
        kinds=TRAINING_KINDS,
        pool="gpu",
        op_tags=gpu_op_tags(),
        tags={"sv/env": a, "sv/stage": f"cotrain_{cycle}"},
        description=f"Co-training cycle {cycle}, attacker: GRPO on {a.upper()} whose reward plays every sampled attack "
        f"against the cycle-{cycle - 1} defender checkpoint.",
    )
    def attacker(
        context: dg.AssetExecutionContext,
        config: TrainingRunConfig,
        start: Artifact,
        defender: Artifact,
        sft_data: Artifact,
        launcher: PipesLauncher,
        tracking: ExperimentTracking,
    ) -> Artifact:
        training = resolve_config(a, config)
        training = training.model_copy(
            update={"grpo": training.grpo.model_copy(update={"max_steps": training.cotrain.attacker_steps})}
        )
        out = checkpoint_dir(context, f"{training.model.name}-{a}", f"cotrain_{cycle}")
        record = run_training_stage(
            context,
            stage="grpo",
            env_short=a,
            config=training,
            out=out,
            model_dir=str(start.files["model"]),
            data={"train": str(sft_data.files["grpo"]), f"tasks/{a}": str(sft_data.files["tasks"])},
            reward_configs=reward_configs_for([a], training, out.parent),
            launcher=launcher,
            tracking=tracking,
            resume=config.resume,
            counterpart_dir=str(defender.files["model"]),
        )
        artifact = checkpoint_artifact(
            training,
            out,
            record,
            stage=f"cotrain_{cycle}",
            env_label=a,
            registry_model=catalog.cotrain_model_name(training, a, cycle),
            sample=bool(sft_data.facts.get("sample")),
        )
        return Artifact(
            **{**artifact.__dict__, "facts": {**artifact.facts, "target_checkpoint": str(defender.files["model"])}}
        )

    return attacker


def _successful_attacks(
    attack: EnvSpec, attacker: Path, defender: Path, behaviors: Path, run_id: str, limit: int | None, seed: int
) -> tuple[list[str], dict[str, Any]]:
    """Play the attacker against the defender on the attack environment's behaviors; the
    successful attacks come back in memory (the stored eval rows hold them only as hashes)."""
    attacks: list[str] = []

    def observe(row: dict[str, Any]) -> None:
        text = successful_attack_text(row)
        if text:
            attacks.append(text)

    run = evaluate_checkpoint(
        attack,
        "cotrain-attacker",
        attacker,
        dataset_path=behaviors,
        outputs_root=outputs_root(),
        run_id=run_id,
        max_tokens=ATTACK_MAX_TOKENS,
        limit=limit,
        seed=seed if limit else None,
        counterpart=("cotrain-defender", defender),
        dataset_info={"sample": True, "cotrain": True},
        observe=observe,
    )
    return attacks, {
        "attack_eval": str(run.run_dir),
        "attack_success_rate": run.summary.get("attack_success_rate"),
        "n_behaviors": run.summary["n_examples"],
    }


BEHAVIOR_SPLITS = ("train", "dev")
"""The attack environment's behaviors co-training attacks on: never its test split, which scores it."""


def _training_behaviors(behaviors: Artifact, folder: Path) -> Path:
    """The attack environment's train and dev behaviors in one file under `folder`."""
    sources = [Path(behaviors.files[name]) for name in BEHAVIOR_SPLITS if name in behaviors.files]
    if not sources:
        raise dg.Failure(f"co-training needs train or dev behaviors; the dataset has only {sorted(behaviors.files)}")
    path = folder / "behaviors.jsonl"
    texts = [source.read_text(encoding="utf-8") for source in sources]
    path.write_text("".join(t if t.endswith("\n") else t + "\n" for t in texts if t.strip()), encoding="utf-8")
    return path


def build_defender_asset(attack: EnvSpec, defense: EnvSpec, cycle: int) -> dg.AssetsDefinition:
    a, d = attack.short, defense.short

    @provenance_asset(
        key=asset_key_of(cycle_key(defense, cycle)),
        ins={
            "start": dg.AssetIn(key=asset_key_of(cycle_key(defense, cycle - 1))),
            "attacker": dg.AssetIn(key=asset_key_of(cycle_key(attack, cycle))),
            "sft_data": dg.AssetIn(key=["sft_data", d]),
            "behaviors": dg.AssetIn(key=["dataset", a]),
        },
        group_name=env_group(defense.short, "training"),
        kinds=TRAINING_KINDS,
        pool="gpu",
        op_tags=gpu_op_tags(),
        tags={"sv/env": d, "sv/stage": f"cotrain_{cycle}"},
        description=f"Co-training cycle {cycle}, defender: the cycle-{cycle} attacker attacks the cycle-{cycle - 1} "
        f"defender; the attacks that succeed become refusal probes for the defender's GRPO beside {d.upper()}'s "
        "conversations.",
    )
    def defender(
        context: dg.AssetExecutionContext,
        config: TrainingRunConfig,
        start: Artifact,
        attacker: Artifact,
        sft_data: Artifact,
        behaviors: Artifact,
        launcher: PipesLauncher,
        tracking: ExperimentTracking,
    ) -> Artifact:
        from sv_dagster.training.sft_data import read_rows, write_rows

        training = resolve_config(d, config)
        training = training.model_copy(
            update={"grpo": training.grpo.model_copy(update={"max_steps": training.cotrain.defender_steps})}
        )
        with tempfile.TemporaryDirectory(prefix="sv-cotrain-behaviors-") as held:
            attacks, attack_facts = _successful_attacks(
                attack,
                Path(attacker.files["model"]),
                Path(start.files["model"]),
                _training_behaviors(behaviors, Path(held)),
                f"{context.run_id}-cotrain-{cycle}",
                training.cotrain.behaviors,
                training.seed,
            )
        context.log.info(f"cycle {cycle}: {len(attacks)} successful attack(s) become defender probes")
        out = checkpoint_dir(context, f"{training.model.name}-{d}", f"cotrain_{cycle}")
        with tempfile.TemporaryDirectory(prefix="sv-cotrain-") as scratch:  # attack texts never enter the outputs
            probes = [
                attack_probe_row(f"cotrain-{cycle}-attack-{i:03d}", text, f"cotrain_{cycle}")
                for i, text in enumerate(attacks)
            ]
            probe_lines = "".join(json.dumps(row) + "\n" for row in probes)
            tasks = Path(scratch) / "tasks.jsonl"
            tasks.write_text(Path(sft_data.files["tasks"]).read_text(encoding="utf-8") + probe_lines, encoding="utf-8")
            # The probes' prompts come from the defense environment's own tasks, as in its evals.
            probe_file = Path(scratch) / "probes.jsonl"
            probe_file.write_text(probe_lines, encoding="utf-8")
            probe_tasks = defense.load_tasks(probe_file, None) if probes else []
            rows = read_rows(Path(sft_data.files["grpo"])) + [
                SftExample(chat_messages(task), "", task.key, env=d, difficulty=2, source=f"cotrain_{cycle}").grpo_row()
                for task in probe_tasks
            ]
            grpo = Path(scratch) / "grpo.jsonl"
            write_rows(grpo, rows)
            record = run_training_stage(
                context,
                stage="grpo",
                env_short=d,
                config=training,
                out=out,
                model_dir=str(start.files["model"]),
                data={"train": str(grpo), f"tasks/{d}": str(tasks)},
                reward_configs=reward_configs_for([d], training, out.parent),
                launcher=launcher,
                tracking=tracking,
                resume=config.resume,
            )
        artifact = checkpoint_artifact(
            training,
            out,
            record,
            stage=f"cotrain_{cycle}",
            env_label=d,
            registry_model=catalog.cotrain_model_name(training, d, cycle),
            sample=bool(sft_data.facts.get("sample")),
        )
        digest = hashlib.sha256(json.dumps(attacks).encode()).hexdigest()
        return Artifact(
            **{
                **artifact.__dict__,
                "facts": {
                    **artifact.facts,
                    **attack_facts,
                    "probes_from_attacks": len(attacks),
                    "attacks_sha256": digest,
                },
                "metadata": {
                    **artifact.metadata,
                    "probes_from_attacks": len(attacks),
                    "attacker_success_rate": attack_facts["attack_success_rate"],
                    "attacked_behaviors": attack_facts["n_behaviors"],
                },
            }
        )

    return defender


def cotrain_assets() -> list[dg.AssetsDefinition]:
    """Every cycle of every (attack, defense) pair whose environments both have a training
    config; the attack environment's config sets the number of cycles."""
    assets = []
    for attack, defense in catalog.cotrain_pairs():
        cycles = catalog.training_config(attack.short).cotrain.cycles
        assets += [
            asset
            for k in range(1, cycles + 1)
            for asset in (build_attacker_asset(attack, defense, k), build_defender_asset(attack, defense, k))
        ]
    return assets
