"""Training throughput through the pipeline's own training entry point, beside plain TRL
on the same model, data and machine (`python bench/training.py`, or `make bench` via
bench/run.py --only training).

- SFT: tokens per second (non-pad tokens TRL counted) and, on a GPU, MFU
  (6 x parameters x tokens/s over the GPU's dense bf16 peak; 989 TFLOP/s for an H100).
- GRPO: completions per hour (prompts x generations per step / seconds per step).

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


def main() -> int:
    import torch

    from sv_dagster.training.config import load_training_config

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=list(PROFILES), default="tiny")
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--grpo-steps", type=int, default=10)
    parser.add_argument("--write", action="store_true", help="record bench/results/<date>-training-<model>.json")
    args = parser.parse_args()
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


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
