"""What the training configs produce: the stages, their asset keys, and the registry
models that evaluate each trained checkpoint.

A checkpoint model is a registry entry with backend `local` whose weights come from an
asset (`checkpoint_asset`), so `eval/<env>/<model>` depends on the exact checkpoint it
scores. They are generated from `configs/training/<env>.yaml`: adding a training config
adds its checkpoints to the registry, and every materialization of a training asset is a
new version of that model in the eval's lineage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from sv_dagster.core.envs import ENVS, EnvSpec, counterpart_pairs, pair_label
from sv_dagster.core.models.registry import ModelSpec, Sampling, load_registry
from sv_dagster.training.config import (
    TRAINING_DIR,
    TrainingConfig,
    TrainingConfigError,
    load_training_config,
    training_config_path,
)
from sv_dagster.training.curriculum import stage2_defaults


@dataclass(frozen=True)
class Stage:
    """One per-environment stage under each of its names."""

    asset: str
    """Its checkpoint asset: `checkpoint/<env>/<asset>`."""
    process: str | None
    """The training process that makes it (`training.stages.STAGES`); None: not trained here."""
    suffix: str
    """Its registry model: `<model>-<env>-<suffix>`."""
    data: str | None = None
    """The sft_data file it trains on."""
    upstream: str | None = None
    """The asset of the stage it starts from."""
    reviewed: bool = False
    """A safety review gates it: its evals read the reviewed checkpoint."""
    doc: str = ""

    @property
    def order(self) -> int:
        """Its row in training tables: its place in the chain, promoted last."""
        return tuple(STAGES.values()).index(self)


BASE = Stage(
    "base",
    "base",
    "base",
    data="sft",
    doc="the starting model: the tiny model built here (tokenizer trained on sft_data, random init) or a named "
    "pretrained model",
)
SFT = Stage(
    "sft",
    "sft",
    "sft",
    data="sft",
    upstream="base",
    doc="supervised fine-tuning (TRL SFTTrainer) on sft_data, stopped by epochs or steps",
)
RLFT1 = Stage(
    "rlft_stage1",
    "grpo",
    "rlft1",
    data="grpo",
    upstream="sft",
    reviewed=True,
    doc="GRPO (TRL GRPOTrainer) on the environment's own rewards (weights from its reward TOML or the experiment), "
    "starting from the SFT checkpoint",
)
PROMOTED = Stage("promoted", None, "promoted", doc="the reviewed stage-1 checkpoint after a human sign-off")
ENV_STAGES = (BASE, SFT, RLFT1)
"""The per-environment chain; stage 2 (curriculum) is across environments."""
STAGES = {stage.asset: stage for stage in (*ENV_STAGES, PROMOTED)}


def checkpoint_key(env: str, stage: str) -> str:
    return f"checkpoint/{env}/{stage}"


def review_key(env: str, stage: str) -> str:
    return f"safety_review/{env}/{stage}"


STAGE2 = "checkpoint/rlft_stage2"
STAGE2_REVIEW = "safety_review/rlft_stage2"


def training_envs() -> list[str]:
    """Installed environments with a training config (`configs/training/<short>.yaml`)."""
    return [short for short in ENVS if training_config_path(short).exists()]


def cotrain_pairs() -> list[tuple[EnvSpec, EnvSpec]]:
    """(attack, defense) pairs that co-train: both environments have a training config."""
    trained = set(training_envs())
    return [(a, d) for a, d in counterpart_pairs() if {a.short, d.short} <= trained]


def stage2_env() -> str | None:
    """The environment whose stage-1 checkpoint starts the stage-2 curriculum: the one
    whose training config lists curriculum environments (at most one may)."""
    owners = [env for env in training_envs() if _config(env).curriculum.envs]
    if len(owners) > 1:
        raise TrainingConfigError(
            f"{TRAINING_DIR}: curriculum.envs is set for {owners}; stage 2 starts from one "
            "environment's checkpoint, so set it in one config only"
        )
    return owners[0] if owners else None


def stage2_config(owner: str) -> TrainingConfig:
    """Stage 2's config as the definitions load it: the owner's, with what each environment it
    mixes needs (`curriculum.stage2_defaults`)."""
    envs = _config(owner).curriculum.envs
    return load_training_config(owner, defaults=stage2_defaults(_config(env) for env in envs))


def sft_mix_envs(env: str) -> list[str]:
    """The environments whose sft_data `env`'s SFT stage mixes in (its config's `sft.mix`);
    each must be another environment that has sft_data (a training config)."""
    mixed = list(_config(env).sft.mix)
    trained = training_envs()
    for other in mixed:
        if other == env or other not in trained:
            raise TrainingConfigError(
                f"{training_config_path(env)}: sft.mix names {other!r}; it takes other environments "
                f"with a training config: {[e for e in trained if e != env]}"
            )
    return mixed


@cache
def _config(env: str) -> TrainingConfig:
    return load_training_config(env)


def training_config(env: str) -> TrainingConfig:
    return _config(env)


def model_name(config: TrainingConfig, env: str, stage: Stage) -> str:
    return f"{config.model.name}-{env}-{stage.suffix}"


def stage_by_model() -> dict[str, Stage]:
    """Each per-environment checkpoint model's stage, by registry name."""
    return {model_name(_config(env), env, stage): stage for env in training_envs() for stage in STAGES.values()}


def stage_order() -> Callable[[str], int]:
    """A sort key for registry models: by their stage's row in training tables, other models
    last (the model names are read once, not per row)."""
    orders = {model: stage.order for model, stage in stage_by_model().items()}
    return lambda model: orders.get(model, len(STAGES))


def stage2_model_name(config: TrainingConfig) -> str:
    return f"{config.model.name}-rlft2"


def cotrain_model_name(config: TrainingConfig, env: str, cycle: int) -> str:
    return f"{config.model.name}-{env}-cotrain{cycle}"


CHECKPOINT_CONCURRENCY = 32
"""Concurrent requests to a checkpoint trained here: its server (or the local backend) batches them."""


CHECKPOINT_TIMEOUT_S = 900.0
"""Per request: a CPU server works through its batched requests in turn, beside a training
stage, so a slow reply is queueing, not a hang (the pool restarts a server that died)."""


def checkpoint_spec(name: str, model: str, max_tokens: int) -> ModelSpec:
    """A `local` model: greedy decoding, `max_tokens` per reply, seed 0."""
    return ModelSpec(
        name=name,
        backend="local",
        model=model,
        max_concurrency=CHECKPOINT_CONCURRENCY,
        sampling=Sampling(temperature=0.0, max_tokens=max_tokens, seed=0, timeout_s=CHECKPOINT_TIMEOUT_S),
    )


def _spec(
    name: str, asset: str, envs: tuple[str, ...], config: TrainingConfig, description: str, **flags: Any
) -> ModelSpec:
    # Each environment's own `test_eval_limit` (stage 2 spans several environments).
    limits = tuple((env, n) for env in envs if (n := (config if envs == (env,) else _config(env)).test_eval_limit))
    return replace(
        checkpoint_spec(name, config.model.base, config.eval_max_tokens),
        backend="openai",  # served on loopback from the checkpoint its asset recorded, asked over HTTP
        envs=envs,
        limits=limits,
        description=description,
        checkpoint_asset=asset,
        **flags,
    )


def checkpoint_models() -> dict[str, ModelSpec]:
    models: dict[str, ModelSpec] = {}
    for env in training_envs():
        config = _config(env)
        base = config.model.base
        for stage in ENV_STAGES:
            asset = (review_key if stage.reviewed else checkpoint_key)(env, stage.asset)
            name = model_name(config, env, stage)
            models[name] = _spec(
                name,
                asset,
                (env,),
                config,
                f"{base} after {stage.asset} on {env} (trained here; lineage names the checkpoint).",
            )
        name = model_name(config, env, PROMOTED)
        models[name] = _spec(
            name,
            checkpoint_key(env, PROMOTED.asset),
            (env,),
            config,
            f"The promoted {env} checkpoint (passed the automated review and a human sign-off). Skipped until one is promoted.",
            sweep=True,
            nightly=True,
        )
    for attack, defense in cotrain_pairs():
        for cycle in range(1, _config(attack.short).cotrain.cycles + 1):
            for env, role in ((attack.short, "attacker"), (defense.short, "defender")):
                config = _config(env)
                name = cotrain_model_name(config, env, cycle)
                models[name] = _spec(
                    name,
                    checkpoint_key(env, f"cotrain_{cycle}"),
                    (env,),
                    config,
                    f"The co-trained {role} after cycle {cycle} ({pair_label(attack, defense)} co-training).",
                )
    owner = stage2_env()
    if owner is not None:
        config = stage2_config(owner)
        name = stage2_model_name(config)
        models[name] = _spec(
            name,
            STAGE2_REVIEW,
            tuple(config.curriculum.envs),
            config,
            f"{config.model.base} after the stage-2 curriculum over {', '.join(config.curriculum.envs)}.",
        )
    return models


def load_models(path: str | Path | None = None) -> dict[str, ModelSpec]:
    """The model registry (`path`, else configs/models.yaml or $SV_MODEL_REGISTRY) plus one
    model per trained stage of each training config: base, SFT, RLFT stage 1, the promoted
    checkpoint; stage 2; the co-trained attacker and defender."""
    return load_registry(path, checkpoint_models())
