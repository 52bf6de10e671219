"""E1 evals per hour of SmolLM2-135M-Instruct on the pipeline's own eval path
(`sv_dagster.core.evals.evaluation.evaluate`: prompts, model calls, parsing, scoring, result
files), side by side in one run on the same examples:

- served: the registry entry `smollm2-135m` as `make demo` runs it, the checkpoint served on
  loopback and asked over HTTP through the `openai` backend (its max_concurrency and sampling);
- in-process: the same checkpoint through the `local` backend (transformers in the eval's own
  process, concurrent requests gathered into batches), what trained checkpoints used before
  they were served.

Each path's start (the server's start, the weights' load) is timed apart from its evals, and
evals/hour counts only the evals. Both decode greedily with the entry's max_tokens.

Usage: python bench/served_evals.py [--n 32] [--write]
Prints one JSON line; --write also records it as bench/results/<date>-served-evals.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import bench_record, write_record  # noqa: E402


def _run(spec, backend, start, n: int, outputs: Path, run_id: str) -> dict:
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evals.evaluation import evaluate

    started = time.perf_counter()
    start()  # the server's start, or the weights' load
    start_s = time.perf_counter() - started
    started = time.perf_counter()
    run = evaluate(ENVS["e1"], spec, backend, dataset_path=None, outputs_root=outputs, run_id=run_id, limit=n, seed=42)
    eval_s = time.perf_counter() - started
    replies = [json.loads(line)["completion"] for line in run.results_path.read_text().splitlines()]
    return {
        "start_seconds": start_s,
        "eval_seconds": eval_s,
        "evals_per_hour": n / eval_s * 3600,
        "n": run.summary["n_examples"],
        "format_rate": run.summary.get("format_rate"),
        "mean_reward": run.summary.get("mean_reward"),
        "n_errors": run.summary.get("n_errors"),
        "replies": replies,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--write", action="store_true", help="record bench/results/<date>-served-evals.json")
    args = parser.parse_args()

    from sv_dagster.core.models.backends import make_backend
    from sv_dagster.core.models.registry import load_registry
    from sv_dagster.core.models.serving import ServerPool
    from sv_dagster.resources.serving import ModelServing

    served_spec = load_registry()["smollm2-135m"]
    serving = ModelServing()
    folder = serving.resolve(str(served_spec.serve))  # converts once if needed (not timed)
    local_spec = replace(served_spec, name="smollm2-135m-in-process", backend="local", model=str(folder), serve=None)
    local_backend = make_backend(local_spec, "sv-env-network-logs")
    pool = ServerPool()  # the server as a run's `models` resource holds it
    served_backend = make_backend(
        served_spec, "sv-env-network-logs", server_options=serving.options(), resolve=serving.resolve, pool=pool
    )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            served = _run(
                served_spec,
                served_backend,
                lambda: pool.serve(folder, **serving.options()),
                args.n,
                Path(tmp),
                "served",
            )
            local = _run(
                local_spec,
                local_backend,
                lambda: asyncio.run(local_backend.preflight()),
                args.n,
                Path(tmp),
                "in-process",
            )
    finally:
        pool.close()
    same = sum(a == b for a, b in zip(served.pop("replies"), local.pop("replies")))
    results = {
        "env": "e1",
        "model": "smollm2-135m",
        "split": "bundled test, seed 42",
        "max_concurrency": served_spec.max_concurrency,
        "sampling": served_spec.sampling.as_dict(),
        "served": served,
        "in_process": local,
        "replies_equal": same,
        "served_vs_in_process_evals_per_hour": served["evals_per_hour"] / local["evals_per_hour"],
    }
    record = bench_record("python bench/served_evals.py" + (" --write" if args.write else ""), results)
    print(json.dumps(record))
    if args.write:
        print(f"written to {write_record(record, 'served-evals').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
