"""`sv-dagster demo` timed against its 15-minute budget, as `make demo` runs it: a fresh
Dagster instance and outputs root, so no tool result, model reply or checkpoint is cached (the
SmolLM2 conversion under ~/.cache is, as on any machine's second demo; the record says
whether it was there). The shell's environment is passed on as it is (run it from a plain shell,
as `make bench-demo` does). Records the demo's own phase times (the lines it prints) beside the
wall time measured here, and each step's time from the demo's runs (steps run one at a time
in-process, so they show where the minutes go).

Usage: python bench/demo.py [--write]
Prints one JSON line; --write also records it as bench/results/<date>-demo.json. Exit 1 when
the demo fails or misses the budget.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import bench_record, write_record  # noqa: E402

BUDGET_SECONDS = 15 * 60

# The lines `sv-dagster demo` prints at the end of each phase and of the whole demo.
PHASE_LINES = {
    "evals_seconds": re.compile(r"^wall time ([\d.]+) s; open the UI", re.M),
    "training_seconds": re.compile(r"^training wall time ([\d.]+) s", re.M),
    "demo_reported_seconds": re.compile(r"^demo finished in ([\d.]+) s", re.M),
}


def phase_times(stdout: str) -> dict[str, float | None]:
    """The demo's own figures; None for a line it did not print."""
    found = {name: pattern.search(stdout) for name, pattern in PHASE_LINES.items()}
    return {name: float(match.group(1)) if match else None for name, match in found.items()}


def step_seconds(dagster_home: Path) -> dict[str, dict[str, float]]:
    """Each run's steps by job, longest first, from the demo's instance."""
    import dagster as dg

    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        runs = sorted(instance.get_runs(), key=lambda run: instance.get_run_record_by_id(run.run_id).create_timestamp)
        times: dict[str, dict[str, float]] = {}
        for run in runs:
            stats = [s for s in instance.get_run_step_stats(run.run_id) if s.start_time and s.end_time]
            steps = {s.step_key: round(s.end_time - s.start_time, 1) for s in stats}
            times[run.job_name] = dict(sorted(steps.items(), key=lambda item: -item[1]))
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--write", action="store_true", help="record bench/results/<date>-demo.json")
    parser.add_argument("--stdout", type=Path, help="also save what the demo printed to this file")
    args = parser.parse_args()

    from sv_dagster.core.models.base_weights import conversion_folder, load_catalog

    conversions_cached = {name: conversion_folder(entry).is_dir() for name, entry in load_catalog().items()}
    cli = Path(sys.executable).parent / "sv-dagster"
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / "dagster.yaml").write_text((ROOT / "configs" / "dagster.yaml").read_text())
        environ = {**os.environ, "DAGSTER_HOME": str(home), "SV_OUTPUTS_DIR": str(Path(tmp) / "outputs")}
        started = time.perf_counter()
        proc = subprocess.run([str(cli), "demo"], cwd=ROOT, env=environ, capture_output=True, text=True)
        wall = time.perf_counter() - started
        steps = step_seconds(home) if proc.returncode == 0 else {}
    if args.stdout:
        args.stdout.write_text(proc.stdout)
    if proc.returncode != 0:
        print(f"bench/demo.py: `sv-dagster demo` exited {proc.returncode}:\n{proc.stderr[-3000:]}", file=sys.stderr)
        return 1
    results = {
        "wall_seconds": wall,
        **phase_times(proc.stdout),
        "base_model_conversions_cached": conversions_cached,
        "step_seconds": steps,
    }
    met = wall <= BUDGET_SECONDS
    record = bench_record(
        "python bench/demo.py" + (" --write" if args.write else ""),
        results,
        targets={"wall_seconds": BUDGET_SECONDS},
        met={"wall_seconds": met},
    )
    print(json.dumps(record))
    if args.write:
        print(f"written to {write_record(record, 'demo').relative_to(ROOT)}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
