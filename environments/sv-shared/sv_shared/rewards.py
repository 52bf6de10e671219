"""Reward helpers. Every reward returns a float in [0, 1]."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sv_shared.parsing import ParsedAnswer


def format_reward(parsed: ParsedAnswer) -> float:
    """1.0 when the reply followed the schema, else 0.0."""
    return 1.0 if parsed.format_ok else 0.0


def accuracy_reward(predicted: str | None, gold: str) -> float:
    """1.0 for the gold label, 0.0 otherwise (abstaining or no answer included)."""
    return 1.0 if predicted is not None and predicted == gold else 0.0


def calibration_reward(
    predicted: str | None, confidence: float | None, gold: str, *, abstain_label: str = "Abstain"
) -> float:
    """1 - (confidence - correct)^2, a Brier-based score in [0, 1]; 0.0 without a label or
    confidence, or on abstention (there is no claim to calibrate)."""
    if predicted is None or predicted == abstain_label or confidence is None:
        return 0.0
    if not math.isfinite(confidence):
        return 0.0
    confidence = min(1.0, max(0.0, confidence))
    correct = 1.0 if predicted == gold else 0.0
    return 1.0 - (confidence - correct) ** 2


@dataclass(frozen=True)
class CostConfig:
    positive_label: str
    fn_cost: float = 5.0
    fp_cost: float = 1.0
    abstain_cost: float = 0.5
    invalid_cost: float | None = None
    abstain_label: str = "Abstain"

    def __post_init__(self) -> None:
        for name in ("fn_cost", "fp_cost", "abstain_cost", "invalid_cost"):
            value = getattr(self, name)
            if value is None and name == "invalid_cost":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    @property
    def resolved_invalid_cost(self) -> float:
        return max(self.fn_cost, self.fp_cost) if self.invalid_cost is None else self.invalid_cost

    @property
    def max_cost(self) -> float:
        return max(self.fn_cost, self.fp_cost, self.abstain_cost, self.resolved_invalid_cost)


def decision_cost(predicted: str | None, gold: str, costs: CostConfig) -> float:
    """Cost of one decision: 0 when right; a missed positive costs `fn_cost`, a false
    alarm `fp_cost`, abstaining `abstain_cost`, no usable answer `invalid_cost`."""
    if predicted is None:
        return costs.resolved_invalid_cost
    if predicted == costs.abstain_label:
        return costs.abstain_cost
    if predicted == gold:
        return 0.0
    if gold == costs.positive_label:
        return costs.fn_cost
    if predicted == costs.positive_label:
        return costs.fp_cost
    return costs.resolved_invalid_cost  # a label that is neither gold nor positive


def asymmetric_cost_reward(predicted: str | None, gold: str, costs: CostConfig) -> float:
    """1 - cost / max possible cost, in [0, 1]; 1.0 when every cost is 0."""
    worst = costs.max_cost
    return 1.0 if worst == 0 else 1.0 - decision_cost(predicted, gold, costs) / worst


def abstention_reward(
    predicted: str | None, gold: str, *, abstain_label: str = "Abstain", abstain_credit: float = 0.5
) -> float:
    """1.0 when right, `abstain_credit` for an explicit abstention, 0.0 when wrong."""
    if not (isinstance(abstain_credit, (int, float)) and 0.0 <= abstain_credit <= 1.0):
        raise ValueError(f"abstain_credit must be in [0, 1], got {abstain_credit!r}")
    if predicted is not None and predicted == gold:
        return 1.0
    return float(abstain_credit) if predicted == abstain_label else 0.0
