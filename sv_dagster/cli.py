"""`sv-dagster` command line.

    sv-dagster demo [--job eval_e1]   run a job in-process on the project's instance and
                                      print each eval's headline metrics and artifact paths
    sv-dagster rescore EVAL_DIR [--reward-config TOML]
                                      score an eval folder's stored completions again with the
                                      current verifier (no model calls); writes a new folder
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from sv_dagster.core.paths import PROJECT_ROOT

DEMO_COLUMNS = (
    ("model", "model"),
    ("n", "n_examples"),
    ("accuracy", "accuracy"),
    ("ECE", "ece"),
    ("cost-wtd acc", "cost_weighted_accuracy"),
    ("F1", "f1"),
    ("abstain", "abstain_rate"),
    ("errors", "n_errors"),
)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "-" if value is None else str(value)


def format_table(rows: list[dict[str, Any]]) -> str:
    header = [title for title, _ in DEMO_COLUMNS]
    body = [[_fmt(row.get(key)) for _, key in DEMO_COLUMNS] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(header, *body)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)) for line in [header, *body]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def run_demo(job_name: str) -> int:
    import dagster as dg

    from sv_dagster.definitions import defs

    started = time.perf_counter()
    instance = dg.DagsterInstance.get()
    job = defs.resolve_job_def(job_name)
    # Step-by-step DEBUG events stay in the instance (and the UI); the console gets the table.
    quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    result = job.execute_in_process(instance=instance, run_config=quiet, raise_on_error=False)
    if not result.success:
        for event in result.all_events:
            if event.is_step_failure:
                print(f"FAILED {event.step_key}: {event.step_failure_data.error.message}", file=sys.stderr)
        return 1
    rows, paths, sample = [], [], False
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        if materialization.asset_key.path[0] != "eval":
            continue
        run_dir = Path(materialization.metadata["artifact_path"].value)
        summary = json.loads((run_dir / "summary.json").read_text())
        sample = sample or bool(summary.get("sample"))
        rows.append(summary)
        paths.append(run_dir)
    print(f"\n{job_name}: run {result.run_id} on instance {instance.root_directory}")
    if sample:
        print("DATA: bundled SAMPLE (synthetic flows in the IoT-23 schema), not the real corpus\n")
    print(format_table(rows))
    print()
    for row, path in zip(rows, paths):
        shown = path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path
        print(f"{row['model']}: {shown}/{{metadata.json,results.jsonl,summary.json}}")
    print(f"\nwall time {time.perf_counter() - started:.1f} s; open the UI with `make ui` (same instance)")
    return 0


def run_rescore(source: Path, reward_config: Path | None) -> int:
    import uuid

    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evaluation import rescore
    from sv_dagster.core.paths import outputs_root

    metadata = json.loads((source / "metadata.json").read_text())
    env = next(spec for spec in ENVS.values() if spec.env_id == metadata["env"])
    run_id = f"rescore-{uuid.uuid4().hex[:12]}"
    run = rescore(env, source, outputs_root=outputs_root(), run_id=run_id, reward_config=reward_config)
    print(format_table([json.loads(Path(source, "summary.json").read_text()), run.summary]))
    print(f"\nre-scored {source} -> {run.run_dir}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sv-dagster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run a job in-process and print its eval table")
    demo.add_argument("--job", default="eval_e1")
    again = commands.add_parser("rescore", help="re-score stored completions with the current verifier")
    again.add_argument("eval_dir", type=Path)
    again.add_argument("--reward-config", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return run_demo(args.job)
    if args.command == "rescore":
        return run_rescore(args.eval_dir, args.reward_config)
    return 2


if __name__ == "__main__":
    sys.exit(main())
