"""Metrics over a set of predictions. Undefined values (empty denominators) are None,
never NaN and never a ZeroDivisionError."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

from sv_shared.rewards import CostConfig, decision_cost


@dataclass(frozen=True)
class Prediction:
    predicted: str | None
    """The parsed label; None when the reply could not be parsed."""
    gold: str
    confidence: float | None = None


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _check(confidences: Sequence[float], correct: Sequence[bool]) -> None:
    if len(confidences) != len(correct):
        raise ValueError(f"{len(confidences)} confidences but {len(correct)} correctness values")
    for c in confidences:
        if not isinstance(c, (int, float)) or isinstance(c, bool) or not 0.0 <= c <= 1.0:
            raise ValueError(f"confidences must be numbers in [0, 1], got {c!r}")


def _usable_confidence(value: object) -> float | None:
    """A confidence fit for calibration metrics; anything else counts as missing."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
        return float(value)
    return None


def expected_calibration_error(confidences: Sequence[float], correct: Sequence[bool], n_bins: int = 10) -> float | None:
    """Sum over `n_bins` equal-width confidence bins of (bin size / n) * |accuracy - mean
    confidence|; bin b holds [b/n_bins, (b+1)/n_bins), the last one also 1.0. In [0, 1];
    None for no examples. Raises ValueError on mismatched lengths or confidences outside
    [0, 1]."""
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    _check(confidences, correct)
    if not confidences:
        return None
    n_right = [0.0] * n_bins
    conf_sum = [0.0] * n_bins
    for conf, ok in zip(confidences, correct):
        b = min(int(conf * n_bins), n_bins - 1)
        n_right[b] += bool(ok)
        conf_sum[b] += conf
    # (size/n) * |right/size - conf/size| == |right - conf| / n, with less rounding.
    ece = sum(abs(r - c) for r, c in zip(n_right, conf_sum)) / len(confidences)
    return min(1.0, ece)


def brier_score(confidences: Sequence[float], correct: Sequence[bool]) -> float | None:
    """Mean (confidence - correct)^2, in [0, 1]; None for no examples."""
    _check(confidences, correct)
    if not confidences:
        return None
    return min(1.0, sum((c - float(bool(ok))) ** 2 for c, ok in zip(confidences, correct)) / len(confidences))


def aurc(confidences: Sequence[float], correct: Sequence[bool]) -> float | None:
    """Area under the risk-coverage curve, in [0, 1]; lower is better; None for no examples.

    Answer the most confident first; the risk at coverage k/n is the error rate among
    the top k; AURC is the mean risk over k = 1..n. Examples with equal confidence have no
    order between them, so within a tie the expected risk over all their orders is used
    (the result does not depend on the input order)."""
    _check(confidences, correct)
    if not confidences:
        return None
    ranked = sorted(zip(confidences, correct), key=lambda item: -item[0])
    seen, errors, total_risk = 0, 0.0, 0.0
    for _, group in groupby(ranked, key=lambda item: item[0]):
        oks = [bool(ok) for _, ok in group]
        group_error_rate = oks.count(False) / len(oks)
        for j in range(1, len(oks) + 1):  # expected errors after taking j of the tie
            total_risk += (errors + j * group_error_rate) / (seen + j)
        seen += len(oks)
        errors += oks.count(False)
    return min(1.0, total_risk / len(confidences))


def classification_metrics(
    preds: Sequence[Prediction],
    *,
    positive_label: str,
    abstain_label: str = "Abstain",
    costs: CostConfig | None = None,
    n_bins: int = 10,
) -> dict[str, float | int | None]:
    """Metrics of one run. Of the `n` predictions:

    - abstentions are left out of accuracy, precision, recall, F1, FNR, FPR, ECE, Brier
      and AURC, and counted in `abstain_rate`;
    - invalid predictions (None) are answered but wrong: they count in accuracy's
      denominator and `invalid_rate`; precision/recall/F1/FNR/FPR use only valid answers
      (positive class `positive_label`); ECE and Brier use valid answers with a
      confidence, AURC all valid answers (missing confidence = 0);
    - `mean_cost` and `cost_weighted_accuracy` = 1 - total cost / (n * max cost) cover
      every prediction, with `costs` (default CostConfig(positive_label)).
    """
    costs = costs or CostConfig(positive_label=positive_label, abstain_label=abstain_label)
    n = len(preds)
    answered = [p for p in preds if p.predicted != abstain_label]
    valid = [p for p in answered if p.predicted is not None]
    n_answered, n_invalid = len(answered), len(answered) - len(valid)
    n_abstained = n - n_answered

    is_pos = [(p.predicted == positive_label, p.gold == positive_label) for p in valid]
    tp = sum(pred and gold for pred, gold in is_pos)
    fp = sum(pred and not gold for pred, gold in is_pos)
    fn = sum(not pred and gold for pred, gold in is_pos)
    tn = sum(not pred and not gold for pred, gold in is_pos)

    calibrated = [(c, p.predicted == p.gold) for p in valid if (c := _usable_confidence(p.confidence)) is not None]
    cal_conf = [c for c, _ in calibrated]
    cal_ok = [ok for _, ok in calibrated]
    ranked_conf = [_usable_confidence(p.confidence) or 0.0 for p in valid]
    ranked_ok = [p.predicted == p.gold for p in valid]

    total_cost = sum(decision_cost(p.predicted, p.gold, costs) for p in preds)
    worst = costs.max_cost
    if not n:
        cost_weighted_accuracy = None
    elif worst == 0:
        cost_weighted_accuracy = 1.0  # nothing can cost anything
    else:
        cost_weighted_accuracy = min(1.0, max(0.0, 1.0 - total_cost / (n * worst)))

    return {
        "n": n,
        "n_answered": n_answered,
        "n_abstained": n_abstained,
        "n_invalid": n_invalid,
        "accuracy": _ratio(sum(p.predicted == p.gold for p in valid), n_answered),
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        # 2TP / (2TP + FP + FN): equals the harmonic mean when both are defined, and is 0
        # (not undefined) when there are positives but no true positive.
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "fnr": _ratio(fn, tp + fn),
        "fpr": _ratio(fp, fp + tn),
        "ece": expected_calibration_error(cal_conf, cal_ok, n_bins),
        "brier": brier_score(cal_conf, cal_ok),
        "aurc": aurc(ranked_conf, ranked_ok),
        "abstain_rate": _ratio(n_abstained, n),
        "invalid_rate": _ratio(n_invalid, n),
        "cost_weighted_accuracy": cost_weighted_accuracy,
        "mean_cost": _ratio(total_cost, n),
    }
