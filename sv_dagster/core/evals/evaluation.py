"""One evaluation: a model on an environment's dataset, written as eval artifacts.

outputs/evals/<env_id>--<model>/<run_id>/metadata.json   what ran (before the first call)
                                         results.jsonl   one line per example, as it finishes
                                         summary.json    metrics, when the run ends
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.paths import safe_path_part
from sv_dagster.core.artifacts.provenance import file_sha256, package_versions
from sv_dagster.core.artifacts.redaction import redact, redact_text
from sv_dagster.core.envs import EnvSpec
from sv_dagster.core.evals.errors import RESUMABLE_ERRORS, ErrorKind
from sv_dagster.core.evals.references import rows_prior, score_references, versus_best
from sv_dagster.core.evals.runner import (
    SUMMARY_DROP,
    RunCounts,
    read_results,
    run_eval,
    score_row,
    withhold_unsafe,
)
from sv_dagster.core.evals.summary import summarize
from sv_dagster.core.models.cache import CachedBackend, ResponseCache
from sv_dagster.core.models.completion import Backend
from sv_dagster.core.models.pricing import PriceTable, load_price_table
from sv_dagster.core.models.registry import LOCAL_BACKENDS, ModelSpec


@dataclass(frozen=True)
class EvalRun:
    run_dir: Path
    metadata_path: Path
    results_path: Path
    summary_path: Path
    summary: dict[str, Any]
    metadata: dict[str, Any]


def eval_dir(outputs_root: Path, env: EnvSpec, model_name: str, run_id: str) -> Path:
    return outputs_root / "evals" / f"{env.env_id}--{safe_path_part(model_name)}" / run_id


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(redact_text(json.dumps(data, indent=2, sort_keys=True, default=str)) + "\n", encoding="utf-8")


def evaluate(
    env: EnvSpec,
    model: ModelSpec,
    backend: Backend,
    *,
    dataset_path: Path | None,
    outputs_root: Path,
    run_id: str,
    limit: int | None = None,
    concurrency: int | None = None,
    reward_config: Path | None = None,
    seed: int | None = 0,
    dataset_info: dict[str, Any] | None = None,
    resume: bool = False,
    cache: ResponseCache | None = None,
    prices: PriceTable | None = None,
    use_tools: bool = True,
    counterpart: Backend | None = None,
    counterpart_model: ModelSpec | None = None,
    task_options: dict[str, Any] | None = None,
    observe: Callable[[dict[str, Any]], None] | None = None,
    progress: Callable[[RunCounts], None] | None = None,
    reference_policies: bool = True,
) -> EvalRun:
    """Run the eval and write its artifacts. Every configuration problem (bad dataset,
    bad reward config, missing API key, unreachable endpoint or safety judge) raises
    before the first model call. With `resume`, examples already finished in this run
    folder are kept and only the rest are run (an interrupted or re-executed run).
    `counterpart` is the model on the other side of a dialogue environment (E5's
    target); `task_options` are extra task-config fields (the tournament's updates).
    `progress` is `run_eval`'s (e.g. a `core.progress.EvalProgress`). With `reference_policies`
    (an environment that declares them), its trivial policies are scored on the same examples
    (`core.evals.references`); the majority label is `dataset_info["label_prior"]`'s, else
    the scored rows' own."""
    settings = env.reward_settings(reward_config)
    prices = prices or load_price_table()
    if cache is not None and model.backend not in LOCAL_BACKENDS and not env.withholds_unsafe:
        # In-process models cost nothing to ask again (and a retrained checkpoint keeps its
        # registry name); unsafe text is never cached.
        backend = CachedBackend(backend, cache)
    if env.counterpart_env and counterpart is None:
        raise ValueError(f"{env.env_id} needs a counterpart model (the target); none was given")
    tasks = env.iter_tasks(dataset_path, reward_config, limit, seed, task_options)
    try:  # read and check the whole dataset file now, before any model call
        first = next(tasks)
        tasks = itertools.chain([first], tasks)
    except StopIteration:
        first, tasks = None, iter(())
    asyncio.run(backend.preflight())
    if counterpart is not None:
        asyncio.run(counterpart.preflight())
    if first is not None and hasattr(first, "preflight"):
        asyncio.run(first.preflight())  # e.g. the safety judge's endpoint
    run_dir = eval_dir(outputs_root, env, model.name, run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    metadata_path, results_path, summary_path = (
        run_dir / "metadata.json",
        run_dir / "results.jsonl",
        run_dir / "summary.json",
    )
    concurrency = concurrency or model.max_concurrency
    metadata: dict[str, Any] = redact(
        {
            "run_id": run_id,
            "env": env.env_id,
            "env_short": env.short,
            "model": model.public_dict(),
            "dataset": {
                "path": str(dataset_path) if dataset_path else "bundled",
                "sha256": file_sha256(dataset_path) if dataset_path else None,
                **(dataset_info or {}),
            },
            "reward_config": settings.as_dict(),
            "seed": seed,
            "concurrency": concurrency,
            "price_table": {"version": prices.version, "currency": prices.currency},
            "packages": package_versions(["sv-dagster", "verifiers", "dagster", env.env_id, "sv-shared"]),
            "tools": env.tools_now(),
            "tools_offered": use_tools,
            "counterpart_model": counterpart_model.public_dict() if counterpart_model else None,
            "task_options": _describe_options(task_options),
            "started_at": datetime.now(UTC).isoformat(),
        }
    )
    tool_cache_before = env.tool_cache_now()
    _write_json(metadata_path, metadata)
    counts = asyncio.run(
        run_eval(
            tasks,
            backend,
            results_path,
            concurrency=concurrency,
            parse=env.parse,
            resume=resume,
            price=lambda usage: prices.cost(model.model, usage),
            use_tools=use_tools,
            counterpart=counterpart,
            observe=observe,
            progress=progress,
        )
    )
    rows = read_results(results_path, drop=SUMMARY_DROP)
    summary = summarize(env, rows, settings)
    if env.reference is not None and reference_policies:  # the trivial policies, same examples, same scorer
        scored = {row["example_id"] for row in rows if row.get("error") is None}  # what the metrics cover
        prior = (dataset_info or {}).get("label_prior") or rows_prior(rows, (dataset_info or {}).get("split", "?"))
        summary["reference_policies"] = score_references(
            env,
            lambda: (
                task
                for task in env.iter_tasks(dataset_path, reward_config, limit, seed, task_options)
                if task.key in scored
            ),
            settings,
            run_dir,
            prior,
        )
        summary["vs_best_reference"] = versus_best(summary, summary["reference_policies"])
    summary.update(run_id=run_id, env=env.env_id, model=model.name, sample=bool((dataset_info or {}).get("sample")))
    if dataset_info and dataset_info.get("user_file"):  # a user's own rows: the summary names the file, not SAMPLE
        summary["user_file"] = dataset_info["user_file"]
    tool_cache_after = env.tool_cache_now() if tool_cache_before is not None else None
    if tool_cache_before is not None and tool_cache_after is not None:  # this run's share of the shared cache
        summary["tool_cache"] = metadata["tool_cache"] = _cache_delta(tool_cache_before, tool_cache_after)
    metadata.update(finished_at=datetime.now(UTC).isoformat(), counts=counts.__dict__)
    metadata["dataset"]["n_examples"] = counts.n + counts.n_resumed
    limits = getattr(getattr(backend, "inner", backend), "limits", None)
    if limits is not None:
        metadata["endpoint_limits"] = limits.stats()
    if isinstance(backend, CachedBackend):
        used = backend.cache
        metadata["response_cache"] = {"path": str(used.path), "hits": used.hits, "misses": used.misses}
    _write_json(metadata_path, metadata)
    _write_json(summary_path, summary)
    return EvalRun(run_dir, metadata_path, results_path, summary_path, summary, metadata)


def load_eval_run(run_dir: Path) -> EvalRun:
    """A finished eval folder (written by another process) as an EvalRun."""
    paths = [run_dir / name for name in ("metadata.json", "results.jsonl", "summary.json")]
    metadata, summary = (json.loads(path.read_text(encoding="utf-8")) for path in (paths[0], paths[2]))
    return EvalRun(run_dir, paths[0], paths[1], paths[2], summary, metadata)


def _describe_options(options: dict[str, Any] | None) -> dict[str, Any] | None:
    """Task options as metadata: lists of texts (attacks, which may be unsafe) only as
    their count and sha256, never in clear."""
    if not options:
        return None
    import hashlib

    out: dict[str, Any] = {}
    for name, value in options.items():
        if isinstance(value, list):
            blob = json.dumps(value, sort_keys=True).encode("utf-8")
            out[name] = {"n": len(value), "sha256": hashlib.sha256(blob).hexdigest()}
        else:
            out[name] = str(value)
    return out


def _cache_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    hits, misses = after["hits"] - before["hits"], after["misses"] - before["misses"]
    return {"hits": hits, "misses": misses, "hit_rate": hits / (hits + misses) if hits + misses else None}


def rescore(
    env: EnvSpec,
    source: Path,
    *,
    outputs_root: Path,
    run_id: str,
    reward_config: Path | None = None,
) -> EvalRun:
    """Score the completions stored in an eval folder again with the environment's
    current verifier (and `reward_config`), with no model calls. Writes a new eval folder
    beside the source, whose metadata names the run it re-scored."""
    source_meta = json.loads((source / "metadata.json").read_text())
    dataset = source_meta["dataset"]
    dataset_path = None if dataset["path"] == "bundled" else Path(dataset["path"])
    settings = env.reward_settings(reward_config)
    tasks = {task.key: task for task in env.load_tasks(dataset_path, reward_config)}
    model = source_meta["model"]
    run_dir = eval_dir(outputs_root, env, model["name"], run_id)
    run_dir.mkdir(parents=True, exist_ok=True)
    metadata = {
        **source_meta,
        "run_id": run_id,
        "rescored_from": {"run_id": source_meta["run_id"], "path": str(source)},
        "tools": env.tools_now(),
        "reward_config": settings.as_dict(),
        "packages": package_versions(["sv-dagster", "verifiers", "dagster", env.env_id, "sv-shared"]),
        "started_at": datetime.now(UTC).isoformat(),
    }
    results_path = run_dir / "results.jsonl"

    async def score_all() -> None:
        parse = env.parse
        with results_path.open("w", encoding="utf-8") as out:
            for row in read_results(source / "results.jsonl"):
                task = tasks.get(row["example_id"])
                if task is None:
                    row.update(
                        error=f"example {row['example_id']} not in {dataset['path']}",
                        error_kind=ErrorKind.SCORING,
                        reward=None,
                    )
                elif row.get("error_kind") not in RESUMABLE_ERRORS and row.get("completion") is not None:
                    await score_row(row, task, row["completion"], parse, model["model"])
                    await withhold_unsafe(task, row)
                out.write(redact_text(json.dumps(row, default=str)) + "\n")

    asyncio.run(score_all())
    rows = read_results(results_path, drop=SUMMARY_DROP)
    summary = summarize(env, rows, settings)
    if env.reference is not None:  # played again on the source's examples, by the current verifier
        scored = {row["example_id"] for row in rows if row.get("error") is None}
        prior = dataset.get("label_prior") or rows_prior(rows, dataset.get("split", "?"))
        summary["reference_policies"] = score_references(
            env, lambda: (task for key, task in tasks.items() if key in scored), settings, run_dir, prior
        )
        summary["vs_best_reference"] = versus_best(summary, summary["reference_policies"])
    summary.update(
        run_id=run_id, env=env.env_id, model=model["name"], sample=bool(source_meta["dataset"].get("sample"))
    )
    metadata["finished_at"] = datetime.now(UTC).isoformat()
    _write_json(run_dir / "metadata.json", metadata)
    _write_json(run_dir / "summary.json", summary)
    return EvalRun(run_dir, run_dir / "metadata.json", results_path, run_dir / "summary.json", summary, metadata)
