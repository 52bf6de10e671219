"""An environment's prompt judged by what models score on the same rows, before and after a
change: each run evaluates the given models on a dev or synthetic dataset file (never a test
split) with the environment's prompt as installed, and records, per model, the mean reward,
every reward component and the environment's rates, each with its 95% bootstrap CI (seed 42,
as the eval tables), the format rate, how many replies copy a placeholder of the answer
schema, and the replies themselves (cut to 300 characters).

The run also records what identifies the prompt (the environment's version and the sha256 of
the rendered prompts), the dataset file's sha256 and the git commit, so a `before` run is
repeated by checking out its commit and running the same command. Served models are started
on loopback and stopped after their eval, one at a time.

Usage: python bench/prompts.py --env e3 --dataset rows.jsonl --label before
           [--models qwen2.5-coder-0.5b smollm2-135m heuristic tool-oracle] [--n N] [--write]
Prints a table; --write merges the run into bench/results/<date>-prompts.json under
results[env][label] (runs of other environments and labels in that file are kept).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.record import RESULTS, bench_record  # noqa: E402

DEFAULT_MODELS = ("qwen2.5-coder-0.5b", "smollm2-135m", "heuristic", "tool-oracle")
# Placeholders the environments' answer schemas showed before they were written as plain
# descriptions; a reply containing one copied the schema instead of answering.
PLACEHOLDERS = (
    "<unified diff>",
    "<one or two sentences>",
    "<why this fixes it>",
    "<one sentence>",
    "<number 0..1>",
    "<item copied from the email>",
    "<tool>/<rule>",
    "<unified diff or JSON patch, may be empty>",
)
REPLY_CHARS = 300


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True)
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def copies_placeholder(reply: str | None) -> bool:
    return bool(reply) and any(p in reply for p in PLACEHOLDERS)


def model_figures(rows: list[dict[str, Any]], rates: dict[str, Any]) -> dict[str, Any]:
    """Means with 95% bootstrap CIs of the total reward, each component and each rate."""
    from sv_dagster.core.evals.stats import STANDARD_SEED, mean_cis

    scored = [row for row in rows if row.get("error") is None]
    series: dict[str, list[float | None]] = {"mean_reward": [row.get("reward") for row in scored]}
    components = sorted({name for row in scored for name in (row.get("rewards") or {})})
    series.update({f"reward/{name}": [(row.get("rewards") or {}).get(name) for row in scored] for name in components})
    series.update({name: [fn(row) for row in scored] for name, fn in rates.items()})
    parsed = [row.get("parsed") or {} for row in scored]
    if any("format_ok" in p for p in parsed):
        series["format_rate"] = [float(bool(p.get("format_ok"))) for p in parsed]
    cis = mean_cis(series, seed=STANDARD_SEED)
    figures: dict[str, Any] = {}
    for name, values in series.items():
        present = [v for v in values if v is not None]
        figures[name] = {
            "mean": sum(present) / len(present) if present else None,
            "ci95": cis[name],
            "n": len(present),
        }
    return {
        "n": len(rows),
        "n_errors": len(rows) - len(scored),
        "copied_placeholder": sum(copies_placeholder(row.get("completion")) for row in rows),
        "tool_calls": sum(len(row.get("tool_calls") or ()) for row in rows),
        "figures": figures,
        "replies": {str(row["example_id"]): (row.get("completion") or "")[:REPLY_CHARS] for row in rows},
    }


def _prompt_sha(rows: list[dict[str, Any]]) -> str:
    """sha256 of the rendered prompts (system and user turns), in example order."""
    prompts = [[str(row["example_id"]), row.get("prompt")] for row in sorted(rows, key=lambda r: str(r["example_id"]))]
    return _sha256(json.dumps(prompts, sort_keys=True, default=str).encode())


def run(
    env_short: str,
    dataset: Path,
    models: list[str],
    n: int | None,
    seed: int,
    keep: Path | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    from sv_dagster.core.envs import ENVS
    from sv_dagster.core.evals.evaluation import evaluate
    from sv_dagster.core.models.backends import make_backend
    from sv_dagster.core.models.registry import load_registry
    from sv_dagster.core.models.serving import ServerPool
    from sv_dagster.resources.serving import ModelServing

    env = ENVS[env_short]
    registry = load_registry()
    serving = ModelServing()
    out: dict[str, Any] = {
        "env": env_short,
        "env_version": env.package.__version__,
        "dataset": {"path": str(dataset), "sha256": _sha256(dataset.read_bytes())},
        "n": n,
        "seed": seed,
        "commit": _git_commit(),
        "models": {},
    }
    prompt_shas = set()
    with tempfile.TemporaryDirectory() as tmp:
        outputs = keep or Path(tmp)
        for name in models:
            spec = registry[name].for_env(env_short)
            if timeout_s is not None and spec.backend == "openai":
                # A loaded machine must not turn a slow batch into timeouts and retries.
                spec = replace(spec, sampling=replace(spec.sampling, timeout_s=timeout_s))
            pool = ServerPool() if spec.served else None
            backend = make_backend(
                spec, env.env_id, server_options=serving.options(), resolve=serving.resolve, pool=pool
            )
            started = time.perf_counter()
            try:
                result = evaluate(
                    env,
                    spec,
                    backend,
                    dataset_path=dataset,
                    outputs_root=outputs,
                    run_id=f"prompts-{name}",
                    limit=n,
                    seed=seed,
                )
            finally:
                if pool is not None:
                    pool.close()
            rows = [json.loads(line) for line in result.results_path.read_text(encoding="utf-8").splitlines()]
            prompt_shas.add(_prompt_sha(rows))
            figures = model_figures(rows, dict(env.rates or {}))
            figures["seconds"] = round(time.perf_counter() - started, 1)
            figures["sampling"] = spec.sampling.as_dict() if spec.served or spec.backend == "openai" else None
            out["models"][name] = figures
    # Every model saw the same prompts; one hash says which prompt this was.
    out["prompt_sha256"] = sorted(prompt_shas)[0] if len(prompt_shas) == 1 else sorted(prompt_shas)
    return out


def _table(result: dict[str, Any]) -> str:
    lines = [
        f"{result['env']} {result['env_version']} on {result['dataset']['path']} (prompts {result['prompt_sha256']})"
    ]
    for name, m in result["models"].items():
        parts = []
        for key, fig in m["figures"].items():
            if fig["mean"] is None:
                continue
            ci = fig["ci95"] or [float("nan")] * 2
            parts.append(f"{re.sub(r'^reward/', '', key)} {fig['mean']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]")
        lines.append(
            f"  {name} n={m['n']} errors={m['n_errors']} copied={m['copied_placeholder']}: " + "; ".join(parts)
        )
    return "\n".join(lines)


def _merge(path: Path, record: dict[str, Any], env_short: str, label: str) -> None:
    """This run under results[env][label]; the file's other runs stay."""
    previous = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    results = previous.get("results", {})
    results.setdefault(env_short, {})[label] = record["results"]
    commands = {**previous.get("commands", {}), f"{env_short}/{label}": record["command"]}
    merged = {**record, "command": "python bench/prompts.py (one command per run: see `commands`)"}
    merged.update(commands=commands, results=results)
    path.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env", required=True, help="e1 .. e6")
    parser.add_argument("--dataset", type=Path, required=True, help="a dev or synthetic rows file (never test)")
    parser.add_argument("--label", required=True, help="e.g. before or after")
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--n", type=int, default=None, help="rows drawn under --seed (default: all)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--write", action="store_true", help="merge into bench/results/<date>-prompts.json")
    parser.add_argument("--timeout-s", type=float, default=None, help="per-request timeout instead of the registry's")
    parser.add_argument("--keep", type=Path, default=None, help="keep the evals' result files under this folder")
    args = parser.parse_args()
    if not args.dataset.is_file():
        parser.error(f"--dataset {args.dataset}: no such file")
    result = run(args.env, args.dataset, args.models, args.n, args.seed, args.keep, args.timeout_s)
    command = " ".join(["python bench/prompts.py", *sys.argv[1:]])
    record = bench_record(command, result)
    result["machine"] = record["machine"]  # each run's own, when runs are merged
    print(_table(result))
    if args.write:
        path = RESULTS / f"{record['date'][:10]}-prompts.json"
        _merge(path, record, args.env, args.label)
        print(f"written to {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
