"""`sv-dagster` command line.

    sv-dagster demo [--job demo]      run a job in-process on the project's instance and
                                      print each eval's headline metrics and artifact paths
    sv-dagster eval e1 --models heuristic gpt-5-mini [--n 32] [--seed 42] [--include-tools false]
    sv-dagster eval e5 --models gpt-5-mini --target llama-3.1-8b [--n 20]
                                      evaluate registry models (one Dagster run, in the UI)
    sv-dagster baseline record EVAL_DIR
                                      make an eval folder its (env, model)'s regression baseline
    sv-dagster check                  regression gate over the latest evals; exit 1 on a regression
    sv-dagster lineage ASSET_KEY [--partition P] [--json]
                                      the chain from an asset's latest materialization to its
                                      roots: data version, content hash, code version, git commit
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

def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "-" if value is None else str(value)


def format_table(
    rows: list[dict[str, Any]], columns: tuple[tuple[str, str], ...], first: tuple[str, str] = ("model", "model")
) -> str:
    columns = (first, ("n", "n_examples"), *columns)
    header = [title for title, _ in columns]
    body = [[_fmt(row.get(key)) for _, key in columns] for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(header, *body)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)) for line in [header, *body]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
"""Step-by-step DEBUG events stay in the instance (and the UI); the console gets the table."""


def _shown(path: Path) -> Path:
    return path.relative_to(PROJECT_ROOT) if path.is_relative_to(PROJECT_ROOT) else path


def _classifier_line(classifier: str, agreement: dict[str, Any]) -> str:
    if "error" in agreement:
        return f"judged by {classifier}: {agreement['error']}"
    held = agreement.get("held_out") or {}
    return (
        f"judged by {classifier}; agreement with the shipped labelled set: n={agreement.get('n')} "
        f"accuracy {_fmt(agreement.get('accuracy'))} kappa {_fmt(agreement.get('cohen_kappa'))} "
        f"unsafe recall {_fmt(agreement.get('unsafe_recall'))}; held-out batch: n={held.get('n')} "
        f"accuracy {_fmt(held.get('accuracy'))} kappa {_fmt(held.get('cohen_kappa'))} "
        f"unsafe recall {_fmt(held.get('unsafe_recall'))}"
    )


def _tournament_text(path: Path) -> str:
    data = json.loads((path / "tournament.json").read_text())
    lines = [f"\n== tournament: E5 attacker {data['attacker']['name']} vs E6 defender {data['defender']['name']} (SAMPLE data)"]
    rows = [
        {"round": r["round"], "n_examples": r["n_behaviors"], "success": r["attacker_success_rate"],
         "ci": "-" if not r["attacker_success_ci95"] else "[{:.2f}, {:.2f}]".format(*r["attacker_success_ci95"]),
         "known": r["known_attacks"], "unsafe": r["defender_unsafe_rate"], "over": r["defender_over_refusal_rate"]}
        for r in data["rounds"]
    ]
    lines.append(format_table(rows, (("attacker success", "success"), ("95% CI", "ci"), ("known attacks", "known"),
                                     ("defender unsafe", "unsafe"), ("over-refusal", "over")), first=("round", "round")))
    lines.append(f"  {_shown(path)}/{{tournament.json,success_curve.png}}")
    lines.append("  " + _classifier_line(data.get("classifier"), data.get("classifier_agreement") or {}))
    return "\n".join(lines)


def _report(result, title: str, started: float) -> int:
    """Print the eval table of an executed run (or its step failures)."""
    if not result.success:
        for event in result.all_events:
            if event.is_step_failure:
                print(f"FAILED {event.step_key}: {event.step_failure_data.error.message}", file=sys.stderr)
        return 1
    from sv_dagster.core.envs import ENVS

    by_env: dict[str, list[tuple[dict[str, Any], Path]]] = {}
    tournaments: list[Path] = []
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        if materialization.asset_key.path[0] == "tournament":
            tournaments.append(Path(materialization.metadata["artifact_path"].value))
        if materialization.asset_key.path[0] != "eval":
            continue
        run_dir = Path(materialization.metadata["artifact_path"].value)
        summary = json.loads((run_dir / "summary.json").read_text())
        by_env.setdefault(materialization.asset_key.path[1], []).append((summary, run_dir))
    import dagster as dg

    print(f"\n{title}: run {result.run_id} on instance {dg.DagsterInstance.get().root_directory}")
    for short, env in ENVS.items():
        if short not in by_env:
            continue
        entries = by_env[short]
        sample = any(summary.get("sample") for summary, _ in entries)
        print(f"\n== {short}: {env.description}")
        if sample:
            print(f"DATA: bundled SAMPLE ({env.sample_note}), not a real corpus")
        print(format_table([summary for summary, _ in entries], env.columns))
        for summary, path in entries:
            print(f"  {summary['model']}: {_shown(path)}/{{metadata.json,results.jsonl,summary.json}}")
        for summary, _ in entries[:1]:
            if summary.get("classifier"):
                print("  " + _classifier_line(summary["classifier"], summary.get("classifier_agreement") or {}))
    for path in tournaments:
        print(_tournament_text(path))
    print(f"\nwall time {time.perf_counter() - started:.1f} s; open the UI with `make ui` (same instance)")
    return 0


def run_demo(job_name: str) -> int:
    import dagster as dg

    from sv_dagster.definitions import build_definitions

    started = time.perf_counter()
    job = build_definitions().resolve_job_def(job_name)
    result = job.execute_in_process(instance=dg.DagsterInstance.get(), run_config=QUIET, raise_on_error=False)
    return _report(result, job_name, started)


def run_eval_command(
    env_short: str, models: list[str], n: int | None, seed: int, split: str, concurrency: int | None,
    include_tools: bool = True, target: str = "heuristic",
) -> int:
    """`make eval-e1 MODELS="..." N=32`: materialize eval/<env>/<model> for each model,
    as one Dagster run on the project's instance (so it shows in the UI with lineage).
    The dataset is built first only when it has never been materialized."""
    import dagster as dg

    from sv_dagster.assets.evals import eval_asset_key
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.registry import load_registry
    from sv_dagster.definitions import build_definitions

    started = time.perf_counter()
    defs = build_definitions()  # with the registry as it is now
    env, registry = ENVS[env_short], load_registry()
    unknown = [name for name in [*models, target] if name not in registry]
    if unknown:
        print(f"unknown model(s) {unknown}; the registry has {sorted(registry)}", file=sys.stderr)
        return 2
    instance = dg.DagsterInstance.get()
    keys = {eval_asset_key(env, registry[name]) for name in models}
    selection = dg.AssetSelection.assets(*keys)
    if instance.get_latest_materialization_event(dg.AssetKey(["dataset", env.short])) is None:
        selection = selection.upstream()
    op_config = {"limit": n, "seed": seed, "split": split, "concurrency": concurrency, "include_tools": include_tools,
                 "target_model": target}
    run_config = {
        **QUIET,
        "ops": {"__".join(key.path): {"config": op_config} for key in keys},
    }
    job = defs.resolve_implicit_global_asset_job_def()
    subset = job.get_subset(asset_selection=selection.resolve(defs.resolve_asset_graph()))
    result = subset.execute_in_process(instance=instance, run_config=run_config, raise_on_error=False,
                                       tags={"sv/env": env.short, "sv/trigger": "eval-command"})
    return _report(result, f"eval {env_short} ({', '.join(models)})", started)


def run_rescore(source: Path, reward_config: Path | None) -> int:
    import uuid

    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evaluation import rescore
    from sv_dagster.core.paths import outputs_root

    metadata = json.loads((source / "metadata.json").read_text())
    env = next(spec for spec in ENVS.values() if spec.env_id == metadata["env"])
    run_id = f"rescore-{uuid.uuid4().hex[:12]}"
    run = rescore(env, source, outputs_root=outputs_root(), run_id=run_id, reward_config=reward_config)
    print(format_table([json.loads(Path(source, "summary.json").read_text()), run.summary], env.columns))
    print(f"\nre-scored {source} -> {run.run_dir}")
    return 0


def run_check() -> int:
    """`make check`: the regression gate over every eval asset's latest materialization."""
    import dagster as dg

    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.gate import regression_gate
    from sv_dagster.core.paths import outputs_root
    from sv_dagster.core.registry import load_registry

    instance, failed, checked = dg.DagsterInstance.get(), 0, 0
    for env in ENVS.values():
        for spec in load_registry().values():
            entry = instance.get_latest_materialization_event(dg.AssetKey(["eval", env.short, spec.key]))
            if entry is None:
                continue
            run_dir = Path(entry.asset_materialization.metadata["artifact_path"].value)
            result = regression_gate(run_dir, outputs_root())
            checked += 1
            verdict = "PASS" if result.passed else "FAIL"
            detail = "; ".join(result.failures) or result.note or ", ".join(
                f"{c.metric} {c.delta:+.4f} (p={c.p_value:.2g})" for c in result.comparisons
            )
            print(f"{verdict}  eval/{env.short}/{spec.key}  {detail}")
            failed += not result.passed
    print(f"{checked} eval(s) checked, {failed} regression(s)")
    return 1 if failed else 0


def run_baseline(eval_dir: Path) -> int:
    from sv_dagster.core.gate import record_baseline
    from sv_dagster.core.paths import outputs_root

    print(f"baseline recorded: {record_baseline(eval_dir, outputs_root())}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from sv_dagster.core.envs import ENVS

    parser = argparse.ArgumentParser(prog="sv-dagster", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run a job in-process and print its eval table")
    demo.add_argument("--job", default="demo")
    evals = commands.add_parser("eval", help="evaluate registry models on one environment")
    evals.add_argument("env", choices=sorted(ENVS))
    evals.add_argument("--models", nargs="+", required=True, help="registry names")
    evals.add_argument("--n", type=int, default=None, help="examples per model (seeded subset)")
    evals.add_argument("--seed", type=int, default=42)
    evals.add_argument("--split", default="test")
    evals.add_argument("--concurrency", type=int, default=None)
    evals.add_argument("--target", default="heuristic",
                       help="E5: the registry model the attacker talks to (default: the rule-based defender)")
    evals.add_argument("--include-tools", choices=["true", "false"], default="true",
                       help="offer the environment's tools to the model (E2); false = answer from the prompt alone")
    again = commands.add_parser("rescore", help="re-score stored completions with the current verifier")
    again.add_argument("eval_dir", type=Path)
    again.add_argument("--reward-config", type=Path, default=None)
    commands.add_parser("check", help="regression gate over the latest evals (exit 1 on a regression)")
    baseline = commands.add_parser("baseline", help="record an eval folder as its model's baseline")
    baseline.add_argument("action", choices=["record"])
    baseline.add_argument("eval_dir", type=Path)
    trace = commands.add_parser("lineage", help="print an asset's lineage to its roots, from the instance's event log")
    trace.add_argument("asset_key", help="e.g. eval/e1/heuristic or reports/monthly")
    trace.add_argument("--partition", default=None)
    trace.add_argument("--json", action="store_true", help="machine-readable output")
    args = parser.parse_args(argv)
    if args.command == "check":
        return run_check()
    if args.command == "baseline":
        return run_baseline(args.eval_dir)
    if args.command == "demo":
        return run_demo(args.job)
    if args.command == "eval":
        models = [name for chunk in args.models for name in chunk.split()]
        return run_eval_command(args.env, models, args.n, args.seed, args.split, args.concurrency,
                                args.include_tools == "true", args.target)
    if args.command == "lineage":
        from sv_dagster.core.lineage import main_lineage

        return main_lineage(args.asset_key, args.partition, args.json)
    if args.command == "rescore":
        return run_rescore(args.eval_dir, args.reward_config)
    return 2


if __name__ == "__main__":
    sys.exit(main())
