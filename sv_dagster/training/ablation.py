"""Ablations: each experiment config against the same baseline, as paired deltas.

Every variant starts where the baseline started (the same SFT checkpoint, or the same base
model when the experiment changes SFT itself) and is evaluated with the environment's own
reward config on the same test examples, so each delta is paired: candidate minus baseline
per example, with a 95% bootstrap CI and a McNemar (binary outcomes) or paired-bootstrap
p-value, the regression gate's own tests.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sv_dagster.core.evals.gate import CORE_METRICS
from sv_dagster.core.evals.stats import paired_compare
from sv_dagster.training.config import TrainingConfig


@dataclass
class VariantResult:
    experiment: str
    description: str
    changes: dict[str, Any]
    checkpoint: str
    eval_dir: str
    wall_seconds: float
    cpu_hours: float
    gpu_hours: float
    deltas: list[dict[str, Any]]


def changed_fields(base: TrainingConfig, variant: TrainingConfig) -> dict[str, Any]:
    """What the experiment changes, as dotted paths (what the report shows)."""
    out: dict[str, Any] = {}

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) or isinstance(b, dict):
            a, b = a or {}, b or {}  # a table the baseline does not set compares as empty
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                walk(a.get(key), b.get(key), f"{path}.{key}" if path else key)
        elif a != b and path != "description":
            out[path] = b

    walk(base.model_dump(), variant.model_dump(), "")
    return out


def retrains_sft(base: TrainingConfig, variant: TrainingConfig) -> bool:
    return variant.sft_variant != base.sft_variant or variant.sft != base.sft or variant.model != base.model


def paired_deltas(baseline_rows: list[dict[str, Any]], candidate_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    deltas = []
    for name, (value, binary) in CORE_METRICS.items():
        comparison = paired_compare(baseline_rows, candidate_rows, name, value=value, binary=binary)
        if comparison is not None:
            deltas.append(comparison.as_dict())
    return deltas


def report_markdown(env: str, baseline: dict[str, Any], variants: list[VariantResult]) -> str:
    lines = [
        f"# Ablations: {env}",
        "",
        f"Baseline: `{baseline['checkpoint']}` (eval `{baseline['eval_dir']}`). Deltas are variant minus baseline on the "
        "same test examples, scored with the environment's own reward config; 95% bootstrap CI; p from McNemar "
        "(accuracy) or a paired bootstrap (mean reward).",
        "",
        "| experiment | changes | metric | baseline | variant | delta [95% CI] | p | test | train wall s | CPU h | GPU h |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant in variants:
        changes = ", ".join(f"{k}={v}" for k, v in variant.changes.items()) or "-"
        for delta in variant.deltas or [{}]:
            if not delta:
                lines.append(
                    f"| {variant.experiment} | {changes} | - | - | - | no shared examples | - | - | "
                    f"{variant.wall_seconds:.1f} | {variant.cpu_hours:.4f} | {variant.gpu_hours:.4f} |"
                )
                continue
            lines.append(
                f"| {variant.experiment} | {changes} | {delta['metric']} | {delta['baseline']:.3f} | {delta['candidate']:.3f} | "
                f"{delta['delta']:+.3f} [{delta['ci'][0]:+.3f}, {delta['ci'][1]:+.3f}] | {delta['p_value']:.3g} | "
                f"{delta['test']} | {variant.wall_seconds:.1f} | {variant.cpu_hours:.4f} | {variant.gpu_hours:.4f} |"
            )
    return "\n".join(lines) + "\n"


def as_dicts(variants: list[VariantResult]) -> list[dict[str, Any]]:
    return [asdict(v) for v in variants]
