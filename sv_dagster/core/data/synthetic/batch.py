"""The common synthetic pipeline: templates -> optional model sampling (temperature sweep)
-> schema validation -> labelling by the environment's own verifier -> 5% spot-check
sample -> batch files and metadata.json.

Environment-specific work lives in each environment package and reaches the pipeline
through its `SyntheticSpec` (`sv_shared.synthetic`): the seeds it reads and its generator.
A columnar environment's batch is Parquet (`columnar.py`) but shares the spot-check,
reject and metadata code here. Nothing is dropped silently: every candidate ends as a row
or as a line of `rejects.jsonl` with its stage and reason, and metadata.json counts both.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sv_dagster.core.data.synthetic.files import EXAMPLES_FILE, METADATA_FILE, QUEUE_FILE
from sv_dagster.core.data.synthetic.sampling import Sample, sample_variations
from sv_dagster.core.models.registry import ModelSpec
from sv_shared import textrefs
from sv_shared.synthetic import Reject, RowGenerator

REJECTS_FILE = "rejects.jsonl"
PIPELINE_VERSION = "1"


@dataclass(frozen=True)
class BatchSpec:
    env: str
    """The environment's short name (`Environment.short`)."""
    env_id: str
    partition: str
    """The daily partition (YYYY-MM-DD) the batch belongs to."""
    batch_id: str
    """Unique per materialization (the run id's first 8 characters)."""
    out_dir: Path
    size: int
    """Template candidates to generate (accepted rows are fewer when some are rejected)."""
    seed: int
    """The batch's seed (derived from the configured seed, the env and the partition)."""
    sample: bool
    """Rows come from bundled SAMPLE seeds / project-written templates (not a real corpus)."""
    spot_fraction: float = 0.05
    seed_models: tuple[ModelSpec, ...] = ()
    temperatures: tuple[float, ...] = ()
    variations: int = 4
    """Template rows each (model, temperature) pair varies."""
    sampling_concurrency: int = 8
    by_reference: tuple[str, ...] = ()
    """Harmful request texts of the seeds (`sv_shared.textrefs`): written as markers wherever a
    row repeats them."""
    held_out: Callable[[Sequence[dict[str, Any]]], list[str | None]] | None = None
    """Per accepted row, why it may not be kept (it duplicates or nearly duplicates a dev/test
    row), or None: such rows become rejects at stage "leakage". None: nothing to compare with."""

    @property
    def id_prefix(self) -> str:
        return f"{self.env}-syn-{self.partition.replace('-', '')}"


def screen_held_out(spec: BatchSpec, rows: list[dict[str, Any]], rejects: list[Reject]) -> list[dict[str, Any]]:
    """The rows `spec.held_out` lets through; the others are added to `rejects`."""
    if spec.held_out is None or not rows:
        return rows
    kept = []
    for row, reason in zip(rows, spec.held_out(rows), strict=True):
        if reason is None:
            kept.append(row)
        else:
            rejects.append(Reject(str(row.get("id")), "leakage", reason))
    return kept


def derive_seed(seed: int, env: str, partition: str) -> int:
    """One seed per (configured seed, env, partition): a partition re-run is reproducible."""
    import hashlib

    return int(hashlib.sha256(f"{seed}:{env}:{partition}".encode()).hexdigest()[:12], 16)


@dataclass
class Origin:
    kind: str = "template"
    model: ModelSpec | None = None
    temperature: float | None = None
    varied_from: str | None = None

    def tags(self) -> dict[str, Any]:
        if self.kind == "template":
            return {"origin": "template"}
        assert self.model is not None  # a model row names the model that wrote it
        return {
            "origin": "model",
            "varied_from": self.varied_from,
            "seed_model": {
                "name": self.model.name,
                "model": self.model.model,
                "backend": self.model.backend,
                "temperature": self.temperature,
            },
        }


def reason_kind(reason: str) -> str:
    """A reason with its numbers and quoted values blanked, for counting by kind."""
    text = re.sub(r"\[[^\]]*\]|\([^)]*\)|'[^']*'", "…", reason)
    return re.sub(r"\d+(?:\.\d+)?", "N", text)[:160]


def spot_check_ids(ids: Sequence[str], fraction: float, seed: int) -> list[str]:
    """A seeded sample of `fraction` of the rows, at least one when there are rows."""
    if not ids:
        return []
    k = min(len(ids), max(1, round(fraction * len(ids))))
    return sorted(random.Random(f"{seed}:spot-check").sample(list(ids), k))


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]] | Any) -> int:
    n = 0
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True, default=str) + "\n")
            n += 1
    return n


def write_queue(path: Path, rows: Sequence[dict[str, Any]], spec: BatchSpec) -> int:
    """The review queue: one line per sampled row, with the row as the environment sees it."""
    return write_jsonl(
        path,
        (
            {
                "row_id": str(row["id"]),
                "env": spec.env,
                "partition": spec.partition,
                "batch_id": spec.batch_id,
                "row": row,
            }
            for row in rows
        ),
    )


def count_rejects(rejects: Sequence[Reject]) -> dict[str, Any]:
    return {
        "count": len(rejects),
        "by_stage": dict(Counter(r.stage for r in rejects)),
        "by_reason": dict(Counter(f"{r.stage}: {reason_kind(r.reason)}" for r in rejects).most_common(50)),
        "first": [r.to_dict() for r in rejects[:20]],
    }


def review_command(spec: BatchSpec) -> str:
    return (
        f"sv-dagster review synthetic {spec.env} --partition {spec.partition} --reviewer NAME "
        "--verdict accept|reject [--rows ID ...] [--note TEXT]"
    )


def build_metadata(
    spec: BatchSpec,
    *,
    generator_id: str,
    verifier: str,
    versions: dict[str, Any],
    counts: dict[str, Any],
    labels: Counter[Any],
    scenarios: Counter[Any],
    difficulty: Counter[Any],
    rejects: Sequence[Reject],
    spot: int,
    seeds: dict[str, Any],
    files: dict[str, str],
) -> dict[str, Any]:
    """metadata.json: what the batch is and how it was made (no timings or absolute paths, so
    the same batch written twice hashes the same apart from its batch id)."""
    from sv_dagster.core.data.synthetic.review import decisions_path

    return {
        "env": spec.env,
        "env_id": spec.env_id,
        "partition": spec.partition,
        "batch_id": spec.batch_id,
        "sample": spec.sample,
        "synthetic": True,
        "pipeline_version": PIPELINE_VERSION,
        "generator": generator_id,
        "seed": spec.seed,
        "seed_models": [
            {**m.public_dict(), "temperatures": list(spec.temperatures), "variations": spec.variations}
            for m in spec.seed_models
        ],
        "verifier": verifier,
        "verifier_versions": versions,
        "seeds": seeds,
        "counts": counts,
        "label_balance": dict(sorted(labels.items())),
        "scenarios": dict(sorted(scenarios.items())),
        "difficulty": dict(sorted(difficulty.items())),
        "rejected": count_rejects(rejects),
        "spot_check": {"file": QUEUE_FILE, "rows": spot, "fraction": spec.spot_fraction},
        "review": {
            "decisions": str(decisions_path(spec.env, spec.partition, Path("."))),
            "command": review_command(spec),
        },
        "files": files,
    }


@dataclass
class BatchResult:
    out_dir: Path
    metadata: dict[str, Any]
    files: dict[str, Path] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def run_batch(
    spec: BatchSpec, generator: RowGenerator, seeds: dict[str, Any], rejects: Sequence[Reject] = ()
) -> BatchResult:
    """Generate, vary, check and write one batch (see the module doc). `rejects` are earlier
    ones (unusable seed rows, with their file and line) to report with the batch's own."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    rng = random.Random(spec.seed)
    candidates, template_rejects = generator.templates(spec.size, rng, spec.id_prefix)
    all_rejects: list[Reject] = [*rejects, *template_rejects]
    origins = [Origin() for _ in candidates]
    n_templates = len(candidates)
    timings["templates"] = time.perf_counter() - started

    n_model_rows = n_model_calls = 0
    if spec.seed_models:
        t0 = time.perf_counter()
        prompts = [(i, generator.variation_prompt(c)) for i, c in enumerate(candidates)]
        varyable = [(i, prompt) for i, prompt in prompts if prompt]
        chosen = rng.sample(varyable, min(spec.variations, len(varyable)))
        samples: list[Sample] = sample_variations(
            chosen, spec.seed_models, spec.temperatures, spec.env_id, concurrency=spec.sampling_concurrency
        )
        by_name = {m.name: m for m in spec.seed_models}
        n_model_calls = len(samples)
        for j, sample in enumerate(samples):
            base = candidates[sample.key]
            new_id = f"{spec.id_prefix}-m{j:05d}"
            model = by_name[sample.model]
            common: dict[str, Any] = {"origin": "model", "model": sample.model, "temperature": sample.temperature}
            if sample.error is not None:
                all_rejects.append(Reject(new_id, "sampling", f"model call failed: {sample.error}", **common))
                continue
            try:
                varied = generator.vary(base, sample.text or "", new_id, rng)
            except ValueError as exc:
                all_rejects.append(Reject(new_id, "sampling", f"unusable model reply: {exc}", **common))
                continue
            candidates.append(varied)
            origins.append(Origin("model", model, sample.temperature, generator.candidate_id(base)))
            n_model_rows += 1
        timings["sampling"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    outcomes = generator.check(candidates)
    timings["check"] = time.perf_counter() - t0
    accepted: list[dict[str, Any]] = []
    for candidate, origin, outcome in zip(candidates, origins, outcomes, strict=True):
        if outcome.row is None:
            all_rejects.append(
                Reject(
                    generator.candidate_id(candidate),
                    outcome.stage or "verification",
                    outcome.reason or "rejected",
                    origin=origin.kind,
                    model=origin.model.name if origin.model else None,
                    temperature=origin.temperature,
                    withheld=outcome.withheld,
                )
            )
            continue
        row = outcome.row
        if "sample" in row:  # a schema with a top-level flag too
            row["sample"] = spec.sample
        generator.tags_holder(row).update(
            synthetic=True, sample=spec.sample, partition=spec.partition, batch_id=spec.batch_id, **origin.tags()
        )
        accepted.append(row)
    accepted = screen_held_out(spec, accepted, all_rejects)

    out = spec.out_dir
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "examples": out / EXAMPLES_FILE,
        "rejects": out / REJECTS_FILE,
        "spot_check": out / QUEUE_FILE,
        "metadata": out / METADATA_FILE,
    }
    references = textrefs.References(spec.by_reference)
    accepted = [references(row) for row in accepted]
    write_jsonl(files["examples"], accepted)
    write_jsonl(files["rejects"], [r.to_dict() for r in all_rejects])
    spot = set(spot_check_ids([str(r["id"]) for r in accepted], spec.spot_fraction, spec.seed))
    write_queue(files["spot_check"], [r for r in accepted if str(r["id"]) in spot], spec)
    tags = [generator.tags(row) for row in accepted]
    counts = {
        "template_candidates": n_templates,
        "template_draws_rejected": len(template_rejects),
        "seed_rows_rejected": len(rejects),
        "model_calls": n_model_calls,
        "model_candidates": n_model_rows,
        "accepted": len(accepted),
        "rejected": len(all_rejects),
        "candidates": len(candidates),
    }
    timings["total"] = time.perf_counter() - started
    metadata = build_metadata(
        spec,
        generator_id=generator.generator_id,
        verifier=generator.verifier,
        versions=generator.versions(),
        counts=counts,
        labels=Counter(t[0] for t in tags),
        scenarios=Counter(t[1] for t in tags),
        difficulty=Counter(t[2] for t in tags),
        rejects=all_rejects,
        spot=len(spot),
        seeds=seeds,
        files={name: path.name for name, path in files.items()},
    )
    (files["metadata"]).write_text(json.dumps(metadata, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    return BatchResult(out, metadata, files, timings)
