"""Training throughput through the pipeline's own training entry point, beside plain TRL
on the same model, data and machine (`python bench/training.py`, or `make bench` via
bench/run.py --only training).

- SFT: tokens per second (non-pad tokens TRL counted) and, on a GPU, MFU
  (6 x parameters x tokens/s over the GPU's dense bf16 peak; 989 TFLOP/s for an H100).
- GRPO: completions per hour (prompts x generations per step / seconds per step).
- `--grpo-vs-trl`: the pipeline's GRPO (SharedPromptGRPOTrainer, a group's prompt computed
  once) against TRL's own GRPOTrainer on the same model, rows, settings and reward, in one
  process, one after the other; each step's time split into generation, reward, the loss's
  forward and the rest (backward and the optimizer), and the compute bound: the machine's
  matmul FLOP/s measured in the same run over the training FLOPs a completion costs (6 x
  parameters x its prompt+completion tokens with full fine-tuning, 4 x with LoRA, whose
  frozen weights get no gradient; plus 2 x parameters x tokens to sample it).

The model is the embedded tiny model on CPU (`--model tiny`, the default here), the
pretrained SmolLM2-135M-Instruct of configs/training/profiles/smollm2-cpu.yaml (`--model
smollm2`: its steps, batch and lengths; `--rows 64` is plenty), or the random-init ~0.5B
Qwen-shape model of configs/training/profiles/gpu-0.5b.yaml (`--model qwen-0.5b`, for GPU
hosts; no download). Every path trains on E1's SFT rows built from the bundled sample flows.
`--write` records the result as bench/results/<date>-training-<model>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import bench_record, write_record  # noqa: E402

H100_BF16_FLOPS = 989e12
PROFILES = {
    "tiny": None,
    "smollm2": "smollm2-cpu",
    "qwen-0.5b": "gpu-0.5b",  # bf16, liger kernels, static-cache generation
    "qwen-0.5b-cpu": "qwen-0.5b-cpu",  # Qwen2.5-Coder-0.5B-Instruct from the catalog, LoRA
}


def _rows(folder: Path, n: int) -> dict[str, Path]:
    from sv_dagster.core.envs import ENVS
    from sv_dagster.training.sft_data import build_examples, write_rows
    from sv_env_network_logs.flows import render_flow_question
    from sv_env_network_logs.samples import sample_flows

    tasks = folder / "tasks.jsonl"
    with tasks.open("w") as handle:
        for i, flow in enumerate(sample_flows(n, seed=11)):
            handle.write(
                json.dumps(
                    {
                        "id": f"b{i}",
                        "question": render_flow_question(flow),
                        "answer": flow["label"],
                        "info": {"scenario": flow["scenario"]},
                    }
                )
                + "\n"
            )
    examples = build_examples("e1", ENVS["e1"].load_tasks(tasks, None))
    write_rows(folder / "sft.jsonl", (e.sft_row() for e in examples))
    write_rows(folder / "grpo.jsonl", (e.grpo_row() for e in examples))
    return {"tasks": tasks, "sft": folder / "sft.jsonl", "grpo": folder / "grpo.jsonl"}


def _pipeline(stage: str, config, folder: Path, model_dir: Path | None, data: dict[str, str]) -> dict:
    """One stage through `python -m sv_dagster.training.entry` (the process Dagster launches)."""
    from sv_dagster.training.stages import StageSpec

    out = folder / stage
    spec = StageSpec(
        stage=stage,
        env="e1",
        config=config.model_dump(),
        out_dir=str(out),
        model_dir=str(model_dir) if model_dir else None,
        data=data,
        resume=False,
    )
    spec_path = folder / f"{stage}.spec.json"
    spec_path.write_text(spec.to_json())
    proc = subprocess.run(
        [sys.executable, "-m", "sv_dagster.training.entry", str(spec_path)], capture_output=True, text=True
    )
    if proc.returncode:
        raise RuntimeError(proc.stdout[-2000:] + proc.stderr[-3000:])
    return json.loads((out / "checkpoint.json").read_text())


def _params(model_dir: Path) -> int:
    from transformers import AutoModelForCausalLM

    return sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(model_dir).parameters())


def _plain_trl_sft(model_dir: Path, rows: Path, epochs: float, batch: int, max_steps: int | None = None) -> dict:
    """TRL's SFTTrainer with its defaults, the same model, rows and step budget."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    data = Dataset.from_list([{k: json.loads(line)[k] for k in ("prompt", "completion")} for line in rows.open()])
    cuda = torch.cuda.is_available()
    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(
            output_dir=out,
            num_train_epochs=epochs,
            max_steps=max_steps or -1,
            per_device_train_batch_size=batch,
            report_to=[],
            save_strategy="no",
            use_cpu=not cuda,
            bf16=cuda,
            disable_tqdm=True,
            logging_steps=50,
        )
        trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
        started = time.time()
        result = trainer.train()
        seconds = time.time() - started
    return {"seconds": seconds, "tokens": result.metrics.get("num_tokens") or trainer.state.num_input_tokens_seen}


def matmul_flops(size: int = 2048, repeats: int = 8) -> float:
    """This machine's float32 matmul rate now (FLOP/s), best of `repeats`."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best


def timed_trainer(base: type) -> type:
    """`base` with each step's time split into where it goes (seconds summed over the run)."""

    class Timed(base):
        timings: dict[str, float] = {}

        def _timed(self, name, method, *args, **kwargs):
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - started

        def _generate_single_turn(self, *args, **kwargs):
            return self._timed("generation", super()._generate_single_turn, *args, **kwargs)

        def _calculate_rewards(self, *args, **kwargs):
            return self._timed("reward", super()._calculate_rewards, *args, **kwargs)

        def _prepare_inputs(self, *args, **kwargs):
            return self._timed("prepare_inputs", super()._prepare_inputs, *args, **kwargs)

        def compute_loss(self, *args, **kwargs):
            return self._timed("loss_forward", super().compute_loss, *args, **kwargs)

        def training_step(self, *args, **kwargs):
            return self._timed("training_step", super().training_step, *args, **kwargs)

    Timed.__name__ = f"Timed{base.__name__}"
    return Timed


def time_split(timings: dict[str, float]) -> dict[str, float]:
    """Where the steps' time went, from `timed_trainer`'s sums. transformers' `training_step`
    runs TRL's `_prepare_inputs` (sampling, rewards, the old policy's log-probs), then the
    loss forward, backward and the optimizer's update; each part is what is left of its
    enclosing timer once the parts inside it are taken out."""
    step, prepare = timings.get("training_step", 0.0), timings.get("prepare_inputs", 0.0)
    generation, reward, loss = (timings.get(name, 0.0) for name in ("generation", "reward", "loss_forward"))
    return {
        "generation": generation,
        "reward": reward,
        "other_sampling": max(0.0, prepare - generation - reward),
        "loss_forward": loss,
        "backward_and_update": max(0.0, step - prepare - loss),
    }


def grpo_vs_trl(config, folder: Path, model_dir: Path, data: dict[str, str], parameters: int) -> dict:
    """The same GRPO stage twice in this process: the pipeline's trainer, then TRL's own."""
    from trl import GRPOTrainer

    from sv_dagster.training.shared_prompt import SharedPromptGRPOTrainer
    from sv_dagster.training.stages import StageSpec, run_grpo

    results = {}
    for name, base in (("pipeline", SharedPromptGRPOTrainer), ("plain_trl", GRPOTrainer)):
        timed = timed_trainer(base)
        timed.timings = {}
        spec = StageSpec(
            stage="grpo",
            env="e1",
            config=config.model_dump(),
            out_dir=str(folder / f"grpo-{name}"),
            model_dir=str(model_dir),
            data={"train": data["grpo"], "tasks/e1": data["tasks"]},
            resume=False,
        )
        started = time.perf_counter()
        record = run_grpo(spec, lambda kind, payload: None, trainer_class=timed)
        wall = time.perf_counter() - started
        seconds = record["metrics"]["train_runtime"]
        completions = record["completions_scored"]
        split = time_split(dict(timed.timings))
        results[name] = {
            "steps": record["steps"],
            "completions": completions,
            "train_seconds": seconds,
            "stage_seconds": wall,
            "completions_per_hour": completions / seconds * 3600,
            "seconds_per_step": seconds / max(1, record["steps"]),
            "time_split_s": split,
            "shared_prompt_rows": record.get("shared_prompt_rows"),
        }
    return results


def grpo_bound(config, data: dict[str, str], model_dir: Path, parameters: int, rate: float) -> dict:
    """FLOPs a completion costs by the textbook count, and the completions/hour the measured
    matmul rate allows at that count."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    prompts = [json.loads(line)["prompt"] for line in Path(data["grpo"]).open()]
    lengths = [
        len(tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=False))
        for p in prompts
    ]
    prompt_tokens = sum(lengths) / len(lengths)
    completion_tokens = config.grpo.max_completion_length
    tokens = prompt_tokens + completion_tokens
    per_token = 4 if config.model.lora else 6  # LoRA: forward + activation gradients, no weight gradients
    train_flops = per_token * parameters * tokens
    sample_flops = 2 * parameters * tokens
    flops = train_flops + sample_flops
    return {
        "matmul_flops_per_s": rate,
        "prompt_tokens_mean": prompt_tokens,
        "completion_tokens_max": completion_tokens,
        "flops_per_completion": flops,
        "flops_formula": f"{per_token} x params x tokens (train) + 2 x params x tokens (sample)",
        "bound_completions_per_hour": rate / flops * 3600,
    }


def main() -> int:
    import torch

    from sv_dagster.training.config import load_training_config

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=list(PROFILES), default="tiny")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--grpo-steps", type=int, default=10)
    parser.add_argument("--grpo-vs-trl", action="store_true", help="GRPO only: the pipeline's against plain TRL")
    parser.add_argument("--write", action="store_true", help="record bench/results/<date>-training-<model>.json")
    args = parser.parse_args()
    if args.grpo_vs_trl:
        return compare_grpo(args)
    cuda = torch.cuda.is_available()
    overrides = {
        "sft": {"epochs": 1.0, "max_seconds": 3600},
        "grpo": {"max_steps": args.grpo_steps, "max_seconds": 3600},
    }
    config = load_training_config("e1", overrides=overrides, profile=PROFILES[args.model])
    with tempfile.TemporaryDirectory(prefix="sv-bench-training-") as tmp:
        folder = Path(tmp)
        data = {k: str(v) for k, v in _rows(folder, args.rows).items()}
        _pipeline("base", config, folder, None, {"train": data["sft"]})
        parameters = _params(folder / "base")
        sft = _pipeline("sft", config, folder, folder / "base", {"train": data["sft"]})
        grpo = _pipeline("grpo", config, folder, folder / "sft", {"train": data["grpo"], "tasks/e1": data["tasks"]})
        plain = _plain_trl_sft(folder / "base", Path(data["sft"]), 1.0, config.sft.batch_size, config.sft.max_steps)
    sft_seconds = sft["metrics"]["train_runtime"]
    sft_tokens_per_s = (sft.get("tokens") or 0) / sft_seconds
    plain_tokens_per_s = (plain["tokens"] or 0) / plain["seconds"]
    grpo_seconds = grpo["metrics"]["train_runtime"]
    completions = grpo["steps"] * config.grpo.prompts_per_step * config.grpo.num_generations
    result = {
        "model": args.model,
        "parameters": parameters,
        "device": sft["device"],
        "sft_rows": args.rows,
        "sft_tokens_per_s": sft_tokens_per_s,
        "plain_trl_sft_tokens_per_s": plain_tokens_per_s,
        "sft_speedup_vs_plain_trl": sft_tokens_per_s / plain_tokens_per_s if plain_tokens_per_s else None,
        "grpo_steps": grpo["steps"],
        "grpo_s_per_step": grpo_seconds / max(1, grpo["steps"]),
        "grpo_completions_per_hour": completions / grpo_seconds * 3600,
        "grpo_completion_tokens": config.grpo.max_completion_length,
    }
    if cuda:
        result["sft_mfu"] = 6 * parameters * sft_tokens_per_s / H100_BF16_FLOPS
        result["plain_trl_sft_mfu"] = 6 * parameters * plain_tokens_per_s / H100_BF16_FLOPS
    print(json.dumps(result))
    if args.write:
        record = bench_record("python bench/training.py" + "".join(f" {a}" for a in sys.argv[1:]), result)
        print(f"written to {write_record(record, f'training-{args.model}').relative_to(ROOT)}")
    return 0


def compare_grpo(args) -> int:
    """--grpo-vs-trl: base (and, on a catalog model, its conversion), then the comparison from
    the base checkpoint, the same rows and settings for both."""
    from sv_dagster.training.config import load_training_config

    overrides = {"grpo": {"max_steps": args.grpo_steps, "max_seconds": 7200, "save_steps": 10_000}}
    config = load_training_config("e1", overrides=overrides, profile=PROFILES[args.model])
    with tempfile.TemporaryDirectory(prefix="sv-bench-grpo-") as tmp:
        folder = Path(tmp)
        data = {k: str(v) for k, v in _rows(folder, args.rows).items()}
        _pipeline("base", config, folder, None, {"train": data["sft"]})
        parameters = _params(folder / "base")
        rate_before = matmul_flops()
        runs = grpo_vs_trl(config, folder, folder / "base", data, parameters)
        rate = max(rate_before, matmul_flops())
        bound = grpo_bound(config, data, folder / "base", parameters, rate)
    pipeline, plain = runs["pipeline"], runs["plain_trl"]
    result = {
        "model": args.model,
        "parameters": parameters,
        "lora": config.model.lora.model_dump() if config.model.lora else None,
        "settings": {
            "prompts_per_step": config.grpo.prompts_per_step,
            "num_generations": config.grpo.num_generations,
            "max_completion_length": config.grpo.max_completion_length,
            "steps": args.grpo_steps,
        },
        "pipeline": pipeline,
        "plain_trl": plain,
        "speedup_vs_plain_trl": pipeline["completions_per_hour"] / plain["completions_per_hour"],
        "bound": bound,
        "pipeline_share_of_bound": pipeline["completions_per_hour"] / bound["bound_completions_per_hour"],
        "plain_trl_share_of_bound": plain["completions_per_hour"] / bound["bound_completions_per_hour"],
    }
    targets = {"speedup_vs_plain_trl": 3.0, "pipeline_share_of_bound": 0.6}
    met = {name: result[name] >= target for name, target in targets.items()}
    record = bench_record(
        "python bench/training.py" + "".join(f" {a}" for a in sys.argv[1:]), result, targets=targets, met=met
    )
    print(json.dumps(record))
    if args.write:
        print(f"written to {write_record(record, f'grpo-{args.model}').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
