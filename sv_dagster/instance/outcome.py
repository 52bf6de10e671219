"""What an in-process run made, read from its materialization events as plain values: the
eval summaries and tournament folders the command line prints, and a training chain's test
evals, checkpoints and safety review."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sv_dagster.instance.lineage import metadata_value


def _materializations(result):
    for event in result.get_asset_materialization_events():
        yield event.step_materialization_data.materialization


@dataclass
class RunOutcome:
    evals: dict[str, list[tuple[dict[str, Any], Path]]] = field(default_factory=dict)
    """Each environment's eval summaries and folders, in the order the run made them."""
    tournaments: list[Path] = field(default_factory=list)


def run_outcome(result) -> RunOutcome:
    outcome = RunOutcome()
    for materialization in _materializations(result):
        kind = materialization.asset_key.path[0]
        if kind not in ("eval", "tournament"):
            continue
        path = Path(materialization.metadata["artifact_path"].value)
        if kind == "tournament":
            outcome.tournaments.append(path)
        else:
            summary = json.loads((path / "summary.json").read_text())
            outcome.evals.setdefault(materialization.asset_key.path[1], []).append((summary, path))
    return outcome


@dataclass
class TrainingOutcome:
    rows: list[dict[str, Any]]
    """The test evals' summaries, base -> SFT -> RLFT."""
    stages: list[tuple[str, dict[str, Any]]]
    """Each checkpoint's stage and recorded values (steps, hours, checkpoint_path, dev_eval, ...)."""
    review: dict[str, Any] | None
    """The safety review's `review_passed` and `reasons`, when the run reviewed."""
    blocked_by_review: bool = False
    """The run failed only where a safety review's blocking check failed: the chain stopped
    at its gate, as it should, rather than broke."""


def training_outcome(result) -> TrainingOutcome:
    from sv_dagster.training.catalog import stage_order

    rows, stages, review = [], [], None
    for materialization in _materializations(result):
        kind, *rest = materialization.asset_key.path
        metadata = materialization.metadata
        if kind == "eval":
            rows.append(json.loads((Path(metadata["artifact_path"].value) / "summary.json").read_text()))
        elif kind == "checkpoint":
            stages.append((rest[-1], {name: metadata_value(metadata, name) for name in metadata}))
        elif kind == "safety_review":
            review = {name: metadata[name].value for name in ("review_passed", "reasons") if name in metadata}
    by_stage = stage_order()
    rows.sort(key=lambda r: by_stage(r["model"]))
    return TrainingOutcome(rows, stages, review, blocked_by_review(result))


def blocked_by_review(result) -> bool:
    """Every failed step of the run is a failed check of a safety review (the gate that keeps
    an unsafe checkpoint from being evaluated and promoted)."""
    failed_steps = {event.step_key for event in result.all_events if event.is_step_failure}
    failed_review_checks = {
        f"{'__'.join(evaluation.asset_key.path)}_{evaluation.check_name}"
        for evaluation in result.get_asset_check_evaluations()
        if not evaluation.passed and evaluation.asset_key.path[0] == "safety_review"
    }
    return bool(failed_steps) and failed_steps <= failed_review_checks
