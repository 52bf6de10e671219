"""Reward helpers: pure functions, each returning a float in [0, 1]."""

from __future__ import annotations

import math
from dataclasses import dataclass

from sv_shared.parsing import ParsedAnswer


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def format_reward(parsed: ParsedAnswer) -> float:
    """1.0 when the reply followed the schema (`parsed.format_ok`), else 0.0. Range {0, 1}."""
    return 1.0 if parsed.format_ok else 0.0


def accuracy_reward(predicted: str | None, gold: str) -> float:
    """1.0 for exactly the gold label, else 0.0 (abstaining or no answer included).
    Range {0, 1}."""
    return 1.0 if predicted is not None and predicted == gold else 0.0


def calibration_reward(
    predicted: str | None, confidence: float | None, gold: str, *, abstain_label: str = "Abstain"
) -> float:
    """1 - (confidence - correct)^2 with correct = 1.0 when `predicted == gold`: one minus
    the Brier score of this answer. Range [0, 1].

    0.0 without a label, on abstention (there is no claim to calibrate) and without a
    usable confidence (None, non-finite, or outside [0, 1]: the parser never produces
    those, so they are treated as missing rather than clipped)."""
    if predicted is None or predicted == abstain_label:
        return 0.0
    if confidence is None or not _is_number(confidence) or not 0.0 <= confidence <= 1.0:  # also rejects NaN
        return 0.0
    correct = 1.0 if predicted == gold else 0.0
    return 1.0 - (float(confidence) - correct) ** 2


@dataclass(frozen=True)
class CostConfig:
    """Costs of each kind of decision, for one positive ("alarm") class."""

    positive_label: str
    fn_cost: float = 5.0
    """Missing a positive."""
    fp_cost: float = 1.0
    """A false alarm."""
    abstain_cost: float = 0.5
    """Abstaining, whatever the gold label."""
    invalid_cost: float | None = None
    """No usable answer; None means max(fn_cost, fp_cost)."""
    abstain_label: str = "Abstain"

    def __post_init__(self) -> None:
        if not isinstance(self.positive_label, str) or not self.positive_label:
            raise ValueError(f"positive_label must be a non-empty string, got {self.positive_label!r}")
        if self.abstain_label == self.positive_label:
            raise ValueError(f"abstain_label and positive_label must differ, both are {self.positive_label!r}")
        for name in ("fn_cost", "fp_cost", "abstain_cost", "invalid_cost"):
            value = getattr(self, name)
            if value is None and name == "invalid_cost":
                continue
            if not _is_number(value) or not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    @property
    def resolved_invalid_cost(self) -> float:
        """`invalid_cost`, or max(fn_cost, fp_cost) when it is unset."""
        return max(self.fn_cost, self.fp_cost) if self.invalid_cost is None else self.invalid_cost

    @property
    def max_cost(self) -> float:
        """The largest cost any single decision can have."""
        return max(self.fn_cost, self.fp_cost, self.abstain_cost, self.resolved_invalid_cost)


def decision_cost(predicted: str | None, gold: str, costs: CostConfig) -> float:
    """Raw cost of one decision, in [0, costs.max_cost]:

    - 0 when `predicted == gold`;
    - `abstain_cost` for the abstain label;
    - `fn_cost` when gold is positive and another (non-abstain) label was predicted;
    - `fp_cost` when gold is negative and the positive label was predicted;
    - `invalid_cost` for None, or a label that is neither gold nor positive on a
      negative example (without the label set, an unknown label cannot be told apart
      from "the negative label" when gold is positive: it is then a miss, `fn_cost`).
    """
    if predicted is None:
        return float(costs.resolved_invalid_cost)
    if predicted == costs.abstain_label:
        return float(costs.abstain_cost)
    if predicted == gold:
        return 0.0
    if gold == costs.positive_label:
        return float(costs.fn_cost)
    if predicted == costs.positive_label:
        return float(costs.fp_cost)
    return float(costs.resolved_invalid_cost)


def asymmetric_cost_reward(predicted: str | None, gold: str, costs: CostConfig) -> float:
    """1 - decision_cost / costs.max_cost. Range [0, 1]; 1.0 when every cost is 0."""
    worst = costs.max_cost
    if worst == 0:
        return 1.0
    # min/max: guard the [0, 1] contract against float rounding.
    return min(1.0, max(0.0, 1.0 - decision_cost(predicted, gold, costs) / worst))


def abstention_reward(
    predicted: str | None, gold: str, *, abstain_label: str = "Abstain", abstain_credit: float = 0.5
) -> float:
    """1.0 for the gold label, `abstain_credit` for an explicit abstention, 0.0 for a wrong
    label or no answer. Range [0, 1]; raises ValueError unless 0 <= abstain_credit <= 1."""
    if not _is_number(abstain_credit) or not 0.0 <= abstain_credit <= 1.0:
        raise ValueError(f"abstain_credit must be a number in [0, 1], got {abstain_credit!r}")
    if predicted is not None and predicted == gold:
        return 1.0
    return float(abstain_credit) if predicted == abstain_label else 0.0
