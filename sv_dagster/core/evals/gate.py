"""The regression gate: an eval fails when a core metric drops by more than 3% against
the recorded baseline for that model and environment AND a paired test on the shared
examples says the drop is real (p < 0.05).

Baselines are eval folders copied under `outputs/baselines/<env>/<model>/` by
`sv-dagster baseline record EVAL_DIR`; recording one is a deliberate act.

A gate has three states. PASS and FAIL compare the candidate with a baseline of the same
split on the examples both scored. NO BASELINE means nothing was compared: none is
recorded, it is of another split, or it shares no scored example with the candidate. That
is a warning, never a pass.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sv_dagster.core.artifacts.paths import safe_path_part
from sv_dagster.core.evals.runner import read_results
from sv_dagster.core.evals.stats import PairedComparison, paired_compare

MAX_RELATIVE_DROP = 0.03
ALPHA = 0.05


def _correct(row: dict[str, Any]) -> float | None:
    parsed = row.get("parsed") or {}
    if "label" not in parsed:  # not a labelling environment (E2, E3): mean reward is its core metric
        return None
    return float(parsed["label"] == row.get("answer"))


CORE_METRICS = {
    # name: (per-example value, binary outcome -> McNemar; else paired bootstrap)
    "accuracy": (_correct, True),
    "mean_reward": (lambda row: row.get("reward"), False),
}


PASS, FAIL, NO_BASELINE = "PASS", "FAIL", "NO BASELINE"


@dataclass(frozen=True)
class GateResult:
    state: str
    """PASS, FAIL or NO BASELINE."""
    baseline_run_id: str | None
    comparisons: list[PairedComparison] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def failed(self) -> bool:
        """A regression was found (only FAIL blocks)."""
        return self.state == FAIL

    def metadata(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "baseline_run_id": self.baseline_run_id,
            "max_relative_drop": MAX_RELATIVE_DROP,
            "alpha": ALPHA,
            "comparisons": [c.as_dict() for c in self.comparisons],
            "failures": self.failures,
            "note": self.note,
        }


def baseline_dir(outputs_root: Path, env_id: str, model_name: str) -> Path:
    return outputs_root / "baselines" / env_id / safe_path_part(model_name)


def record_baseline(eval_dir: Path, outputs_root: Path) -> Path:
    """Copy an eval folder's metadata, results and summary as the baseline of its
    (environment, model)."""
    metadata = json.loads((eval_dir / "metadata.json").read_text())
    target = baseline_dir(outputs_root, metadata["env"], metadata["model"]["name"])
    target.mkdir(parents=True, exist_ok=True)
    for name in ("metadata.json", "results.jsonl", "summary.json"):
        shutil.copyfile(eval_dir / name, target / name)
    return target


def _split(metadata: dict[str, Any]) -> str | None:
    return (metadata.get("dataset") or {}).get("split")


def regression_gate(candidate_dir: Path, outputs_root: Path) -> GateResult:
    metadata = json.loads((candidate_dir / "metadata.json").read_text())
    base = baseline_dir(outputs_root, metadata["env"], metadata["model"]["name"])
    if not (base / "results.jsonl").exists():
        return GateResult(
            NO_BASELINE,
            None,
            note=f"no baseline recorded at {base}; record one with `sv-dagster baseline record {candidate_dir}`",
        )
    base_meta = json.loads((base / "metadata.json").read_text())
    if _split(base_meta) != _split(metadata):
        return GateResult(
            NO_BASELINE,
            base_meta["run_id"],
            note=f"the baseline at {base} is of split "
            f"{_split(base_meta)!r}, this eval of {_split(metadata)!r}; nothing compared",
        )
    baseline_rows, candidate_rows = read_results(base / "results.jsonl"), read_results(candidate_dir / "results.jsonl")
    comparisons, failures = [], []
    for name, (value, binary) in CORE_METRICS.items():
        comparison = paired_compare(baseline_rows, candidate_rows, name, value=value, binary=binary)
        if comparison is None:
            continue
        comparisons.append(comparison)
        allowed = MAX_RELATIVE_DROP * abs(comparison.baseline)
        if comparison.delta < -allowed and comparison.p_value < ALPHA:
            failures.append(
                f"{name} fell {comparison.baseline:.4f} -> {comparison.candidate:.4f} "
                f"(delta {comparison.delta:+.4f}, 95% CI {comparison.ci[0]:+.4f}..{comparison.ci[1]:+.4f}, "
                f"p={comparison.p_value:.2g}, {comparison.test})"
            )
    if not comparisons:
        return GateResult(
            NO_BASELINE,
            base_meta["run_id"],
            note=f"no scored example shared with the baseline at {base}; nothing compared",
        )
    return GateResult(FAIL if failures else PASS, base_meta["run_id"], comparisons, failures)
