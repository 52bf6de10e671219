"""SFT checkpoints side by side on E6's dev split: what a training setting does to a model's
safety before any review sees it. E1's chain mixes E6's SFT rows into its SFT for exactly this
(docs/training.md, "The default profile and E6's safety mix"), so a cheaper SFT setting has to
keep these figures as well as E1's own dev reward.

Each checkpoint answers every dev conversation (or --limit of them, seeded) against E6's rule
attacker, as `checkpoint/<env>/<stage>` dev evals do, with E6's reply length under the default
profile; the learned safety classifier judges the replies. Records unsafe compliance, over-refusal,
helpfulness and mean reward with their 95% bootstrap CIs.

Usage: python bench/sft_safety.py --dataset DEV_JSONL LABEL=CHECKPOINT_DIR [...] [--write NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import bench_record, write_record  # noqa: E402

METRICS = ("unsafe_compliance_rate", "over_refusal_rate", "helpful_rate", "mean_reward")


def checkpoint_arg(text: str) -> tuple[str, Path]:
    label, sep, path = text.partition("=")
    if not sep or not Path(path, "config.json").is_file():
        raise argparse.ArgumentTypeError(f"{text!r}: expected LABEL=CHECKPOINT_DIR (a folder with config.json)")
    return label, Path(path)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpoints", nargs="+", type=checkpoint_arg, metavar="LABEL=CHECKPOINT_DIR")
    parser.add_argument("--dataset", type=Path, required=True, help="E6's dev split (a dataset/e6 dev.jsonl)")
    parser.add_argument("--limit", type=int, default=None, help="conversations per checkpoint (default: all)")
    parser.add_argument("--write", metavar="NAME", help="record bench/results/<date>-NAME.json")
    args = parser.parse_args()
    if not args.dataset.is_file():
        parser.error(f"--dataset {args.dataset}: no such file")

    from sv_dagster.core.envs import ENVS
    from sv_dagster.training.config import load_training_config
    from sv_dagster.training.evaluation import evaluate_checkpoint

    env = ENVS["e6"]
    max_tokens = load_training_config("e6").eval_max_tokens
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, checkpoint in args.checkpoints:
            run = evaluate_checkpoint(
                env,
                f"sft-{label}",
                checkpoint,
                dataset_path=args.dataset,
                outputs_root=Path(tmp),
                run_id=f"sft-safety-{label}",
                max_tokens=max_tokens,
                limit=args.limit,
                seed=0 if args.limit else None,
                dataset_info={"split": "dev"},
            )
            summary, ci = run.summary, run.summary.get("ci95") or {}
            results[label] = {
                "checkpoint": str(checkpoint),
                "n": summary["n_examples"],
                "n_errors": summary["n_errors"],
                **{key: summary.get(key) for key in METRICS},
                "ci95": {key: ci.get(key) for key in METRICS if ci.get(key)},
            }
            print(json.dumps({label: results[label]}), flush=True)
    command = "python bench/sft_safety.py " + " ".join(sys.argv[1:])
    record = bench_record(command, {"dataset": str(args.dataset), "max_tokens": max_tokens, "checkpoints": results})
    if args.write:
        print(f"written to {write_record(record, args.write).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
