"""Metrics over a set of predictions. Undefined values (empty denominators) are None."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sv_shared.rewards import CostConfig, decision_cost


@dataclass(frozen=True)
class Prediction:
    predicted: str | None
    gold: str
    confidence: float | None = None


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def expected_calibration_error(confidences: Sequence[float], correct: Sequence[bool], n_bins: int = 10) -> float | None:
    """Weighted mean |accuracy - confidence| over `n_bins` equal-width confidence bins."""
    if not confidences:
        return None
    bins: list[list[tuple[float, bool]]] = [[] for _ in range(n_bins)]
    for conf, ok in zip(confidences, correct):
        bins[min(int(conf * n_bins), n_bins - 1)].append((conf, ok))
    total = len(confidences)
    return sum(
        len(b) / total * abs(sum(ok for _, ok in b) / len(b) - sum(c for c, _ in b) / len(b))
        for b in bins
        if b
    )


def brier_score(confidences: Sequence[float], correct: Sequence[bool]) -> float | None:
    """Mean (confidence - correct)^2."""
    if not confidences:
        return None
    return sum((c - float(ok)) ** 2 for c, ok in zip(confidences, correct)) / len(confidences)


def aurc(confidences: Sequence[float], correct: Sequence[bool]) -> float | None:
    """Area under the risk-coverage curve: answer the most confident first; the mean,
    over coverages k/n, of the error rate among the top k. Lower is better."""
    if not confidences:
        return None
    ranked = sorted(zip(confidences, correct), key=lambda item: -item[0])
    errors, risks = 0, []
    for k, (_, ok) in enumerate(ranked, start=1):
        errors += not ok
        risks.append(errors / k)
    return sum(risks) / len(risks)


def classification_metrics(
    preds: Sequence[Prediction],
    *,
    positive_label: str,
    abstain_label: str = "Abstain",
    costs: CostConfig | None = None,
    n_bins: int = 10,
) -> dict[str, float | int | None]:
    """Accuracy, precision, recall, F1, FNR, FPR over answered examples (abstentions
    excluded, unparseable answers counted wrong); ECE, Brier, AURC over answered examples
    with a confidence; abstain/invalid rates and cost-weighted accuracy over all."""
    costs = costs or CostConfig(positive_label=positive_label, abstain_label=abstain_label)
    n = len(preds)
    answered = [p for p in preds if p.predicted != abstain_label]
    valid = [p for p in answered if p.predicted is not None]
    n_invalid = len(answered) - len(valid)
    tp = sum(p.predicted == positive_label and p.gold == positive_label for p in valid)
    fp = sum(p.predicted == positive_label and p.gold != positive_label for p in valid)
    fn = sum(p.predicted != positive_label and p.gold == positive_label for p in valid)
    tn = sum(p.predicted != positive_label and p.gold != positive_label for p in valid)
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else (0.0 if precision is not None and recall is not None else None)
    scored = [p for p in valid if p.confidence is not None]
    confidences = [p.confidence for p in scored]
    correct = [p.predicted == p.gold for p in scored]
    ranked_conf = [p.confidence if p.confidence is not None else 0.0 for p in valid]
    ranked_ok = [p.predicted == p.gold for p in valid]
    total_cost = sum(decision_cost(p.predicted, p.gold, costs) for p in preds)
    worst = costs.max_cost
    return {
        "n": n,
        "n_answered": len(answered),
        "n_abstained": n - len(answered),
        "n_invalid": n_invalid,
        "accuracy": _ratio(sum(p.predicted == p.gold for p in valid), len(answered)),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "fnr": _ratio(fn, tp + fn),
        "fpr": _ratio(fp, fp + tn),
        "ece": expected_calibration_error(confidences, correct, n_bins),
        "brier": brier_score(confidences, correct),
        "aurc": aurc(ranked_conf, ranked_ok),
        "abstain_rate": _ratio(n - len(answered), n),
        "invalid_rate": _ratio(n_invalid, n),
        "cost_weighted_accuracy": (1.0 - total_cost / (n * worst) if worst else 1.0) if n else None,
        "mean_cost": _ratio(total_cost, n),
    }
