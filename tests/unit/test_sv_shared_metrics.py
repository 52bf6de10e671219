"""sv_shared.metrics: hand-computed values for every key, undefined metrics as None, and
rates that stay in [0, 1]."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sv_shared import (
    CostConfig,
    Prediction,
    accuracy_reward,
    asymmetric_cost_reward,
    aurc,
    brier_score,
    classification_metrics,
    decision_cost,
    expected_calibration_error,
)

KEYS = {
    "n",
    "n_answered",
    "n_abstained",
    "n_invalid",
    "accuracy",
    "precision",
    "recall",
    "f1",
    "fnr",
    "fpr",
    "ece",
    "brier",
    "aurc",
    "abstain_rate",
    "invalid_rate",
    "cost_weighted_accuracy",
    "mean_cost",
}
RATES = (
    "accuracy",
    "precision",
    "recall",
    "f1",
    "fnr",
    "fpr",
    "ece",
    "brier",
    "aurc",
    "abstain_rate",
    "invalid_rate",
    "cost_weighted_accuracy",
)

# Positive class: Malicious.
PREDS = [
    Prediction("Malicious", "Malicious", 0.9),  # 1 TP, right
    Prediction("Malicious", "Benign", 0.8),  # 2 FP, wrong
    Prediction("Benign", "Malicious", 0.6),  # 3 FN, wrong
    Prediction("Benign", "Benign", 0.7),  # 4 TN, right
    Prediction("Benign", "Benign", None),  # 5 TN, right, no confidence
    Prediction("Abstain", "Malicious", 0.5),  # 6 abstained
    Prediction(None, "Benign", None),  # 7 unparseable
]


def test_every_key_by_hand():
    m = classification_metrics(PREDS, positive_label="Malicious")
    assert set(m) == KEYS
    # 7 predictions; 6 answered (all but #6); 1 abstained; 1 invalid (#7).
    assert (m["n"], m["n_answered"], m["n_abstained"], m["n_invalid"]) == (7, 6, 1, 1)
    # Right among the answered: #1, #4, #5 of 6 (the invalid #7 counts as wrong).
    assert m["accuracy"] == pytest.approx(3 / 6)
    # Over the valid answers #1-#5: TP 1, FP 1, FN 1, TN 2.
    assert m["precision"] == pytest.approx(1 / 2)  # TP / (TP + FP)
    assert m["recall"] == pytest.approx(1 / 2)  # TP / (TP + FN)
    assert m["f1"] == pytest.approx(1 / 2)  # 2TP / (2TP + FP + FN) = 2/4
    assert m["fnr"] == pytest.approx(1 / 2)  # FN / (TP + FN)
    assert m["fpr"] == pytest.approx(1 / 3)  # FP / (FP + TN) = 1/3
    # Calibration over valid answers with a confidence, #1-#4, each alone in its bin
    # (0.9 -> bin 9, 0.8 -> 8, 0.7 -> 7, 0.6 -> 6):
    # ECE = (|1-0.9| + |0-0.8| + |1-0.7| + |0-0.6|) / 4 = 1.8 / 4.
    assert m["ece"] == pytest.approx(0.45)
    # Brier = (0.1^2 + 0.8^2 + 0.3^2 + 0.6^2) / 4 = (0.01 + 0.64 + 0.09 + 0.36) / 4 = 1.1 / 4.
    assert m["brier"] == pytest.approx(0.275)
    # AURC over #1-#5 (#5 at confidence 0): order 0.9 right, 0.8 wrong, 0.7 right,
    # 0.6 wrong, 0.0 right -> risks 0/1, 1/2, 1/3, 2/4, 2/5.
    assert m["aurc"] == pytest.approx((0 + 1 / 2 + 1 / 3 + 2 / 4 + 2 / 5) / 5)
    assert m["abstain_rate"] == pytest.approx(1 / 7)
    assert m["invalid_rate"] == pytest.approx(1 / 7)
    # Default costs fn 5, fp 1, abstain 0.5, invalid max(5, 1) = 5; max cost 5.
    # #1..#7: 0 + 1 + 5 + 0 + 0 + 0.5 + 5 = 11.5.
    assert m["mean_cost"] == pytest.approx(11.5 / 7)
    assert m["cost_weighted_accuracy"] == pytest.approx(1 - 11.5 / (7 * 5))


def test_custom_costs_and_labels_by_hand():
    costs = CostConfig(positive_label="Malicious", fn_cost=4, fp_cost=2, abstain_cost=1, invalid_cost=3)
    m = classification_metrics(PREDS, positive_label="Malicious", costs=costs)
    # #1..#7: 0 + 2 + 4 + 0 + 0 + 1 + 3 = 10; max cost 4.
    assert m["mean_cost"] == pytest.approx(10 / 7)
    assert m["cost_weighted_accuracy"] == pytest.approx(1 - 10 / 28)
    # A different abstain label: "Abstain" is now an ordinary (wrong, negative) answer.
    m = classification_metrics(PREDS, positive_label="Malicious", abstain_label="Pass")
    assert (m["n_answered"], m["n_abstained"], m["abstain_rate"]) == (7, 0, 0.0)
    assert m["accuracy"] == pytest.approx(3 / 7)
    assert m["fnr"] == pytest.approx(2 / 3)  # #3 and #6 missed, of 3 positives


def test_abstains_are_out_of_accuracy_but_in_abstain_rate():
    preds = [
        Prediction("Benign", "Benign", 0.9),
        Prediction("Abstain", "Malicious", 0.1),
        Prediction("Abstain", "Benign"),
    ]
    m = classification_metrics(preds, positive_label="Malicious")
    assert m["accuracy"] == 1.0  # 1 of 1 answered
    assert m["abstain_rate"] == pytest.approx(2 / 3)
    assert m["recall"] is None  # the only positive was abstained on
    assert m["ece"] == pytest.approx(0.1) and m["brier"] == pytest.approx(0.01)  # the answered one only
    # but abstaining is not free: 0 + 0.5 + 0.5 of 3 * 5
    assert m["cost_weighted_accuracy"] == pytest.approx(1 - 1 / 15)


def test_invalid_answers_are_wrong_and_reported():
    m = classification_metrics(
        [Prediction(None, "Malicious", 0.9), Prediction("Malicious", "Malicious", 0.9)], positive_label="Malicious"
    )
    assert m["accuracy"] == 0.5 and m["invalid_rate"] == 0.5 and m["n_invalid"] == 1
    assert m["recall"] == 1.0  # recall and friends use valid answers only
    assert m["brier"] == pytest.approx(0.01)  # an invalid answer has nothing to calibrate


def test_empty_input_gives_none_not_exceptions():
    m = classification_metrics([], positive_label="Malicious")
    assert set(m) == KEYS
    assert (m["n"], m["n_answered"], m["n_abstained"], m["n_invalid"]) == (0, 0, 0, 0)
    assert all(m[key] is None for key in KEYS - {"n", "n_answered", "n_abstained", "n_invalid"})


def test_degenerate_inputs_give_none_where_undefined():
    only_abstain = classification_metrics([Prediction("Abstain", "Benign", 0.5)], positive_label="Malicious")
    assert only_abstain["accuracy"] is None and only_abstain["ece"] is None and only_abstain["aurc"] is None
    assert only_abstain["abstain_rate"] == 1.0 and only_abstain["cost_weighted_accuracy"] == pytest.approx(0.9)

    only_invalid = classification_metrics([Prediction(None, "Benign")], positive_label="Malicious")
    assert only_invalid["accuracy"] == 0.0 and only_invalid["precision"] is None and only_invalid["f1"] is None
    assert only_invalid["invalid_rate"] == 1.0 and only_invalid["cost_weighted_accuracy"] == 0.0

    negatives = classification_metrics([Prediction("Benign", "Benign", 0.8)] * 3, positive_label="Malicious")
    assert negatives["precision"] is None and negatives["recall"] is None and negatives["f1"] is None
    assert negatives["fnr"] is None and negatives["fpr"] == 0.0 and negatives["accuracy"] == 1.0

    # Positives never predicted: precision undefined, but F1 is a plain 0.
    missed = classification_metrics([Prediction("Benign", "Malicious", 0.8)], positive_label="Malicious")
    assert missed["precision"] is None and missed["recall"] == 0.0 and missed["f1"] == 0.0 and missed["fnr"] == 1.0

    free = CostConfig(positive_label="Malicious", fn_cost=0, fp_cost=0, abstain_cost=0)
    assert (
        classification_metrics([Prediction(None, "Benign")], positive_label="Malicious", costs=free)[
            "cost_weighted_accuracy"
        ]
        == 1.0
    )


def test_unusable_confidences_are_treated_as_missing():
    preds = [
        Prediction("Benign", "Benign", float("nan")),
        Prediction("Benign", "Benign", 1.5),
        Prediction("Benign", "Benign", True),
    ]
    m = classification_metrics(preds, positive_label="Malicious")
    assert m["ece"] is None and m["brier"] is None
    assert m["aurc"] == 0.0  # all right, ranked at confidence 0


# -- ECE / Brier / AURC on their own ---------------------------------------------------------


def test_ece_of_a_perfectly_calibrated_set_is_zero():
    assert expected_calibration_error([0.75] * 4, [True, True, True, False]) == pytest.approx(0.0)
    # Two bins, each calibrated: 1 of 4 right at 0.25, 3 of 4 right at 0.75.
    conf = [0.25] * 4 + [0.75] * 4
    ok = [True, False, False, False, True, True, True, False]
    assert expected_calibration_error(conf, ok) == pytest.approx(0.0)


def test_ece_bins_and_n_bins():
    # 10 bins: 0.9 (right) and 0.1 (wrong) sit apart -> (0.1 + 0.1) / 2.
    assert expected_calibration_error([0.9, 0.1], [True, False]) == pytest.approx(0.1)
    # 1 bin: accuracy 1/2, mean confidence 1/2 -> 0.
    assert expected_calibration_error([0.9, 0.1], [True, False], n_bins=1) == pytest.approx(0.0)
    # 1.0 lands in the last bin, 0.0 in the first; always-right-at-1 / always-wrong-at-0 is perfect.
    assert expected_calibration_error([1.0, 0.0], [True, False]) == 0.0
    # Over-confident: right half the time at 0.95 -> |0.5 - 0.95|.
    assert expected_calibration_error([0.95, 0.95], [True, False]) == pytest.approx(0.45)


def test_brier_by_hand():
    assert brier_score([1.0, 0.0], [True, False]) == 0.0
    assert brier_score([1.0, 0.0], [False, True]) == 1.0
    assert brier_score([0.5, 0.8], [True, False]) == pytest.approx((0.25 + 0.64) / 2)


def test_aurc_is_lower_when_the_confident_answers_are_the_right_ones():
    confidences = [0.9, 0.8, 0.2, 0.1]
    good = aurc(confidences, [True, True, False, False])  # risks 0, 0, 1/3, 2/4
    bad = aurc(confidences, [False, False, True, True])  # risks 1, 1, 2/3, 2/4
    assert good == pytest.approx((0 + 0 + 1 / 3 + 1 / 2) / 4)
    assert bad == pytest.approx((1 + 1 + 2 / 3 + 1 / 2) / 4)
    assert good < bad
    assert aurc([0.3, 0.6], [True, True]) == 0.0 and aurc([0.3, 0.6], [False, False]) == 1.0


def test_aurc_ties_do_not_depend_on_input_order():
    # A tie has no order: each coverage inside it uses the expected error count,
    # risks (0 + 1/2)/1 and (0 + 1)/2 -> 0.5, whichever comes first in the input.
    assert aurc([0.5, 0.5], [True, False]) == pytest.approx(0.5)
    assert aurc([0.5, 0.5], [False, True]) == pytest.approx(0.5)
    # 0.9 right, then a tie of one right and one wrong at 0.4: risks 0, (0 + 1/2)/2, (0 + 1)/3.
    assert aurc([0.4, 0.9, 0.4], [False, True, True]) == pytest.approx((0 + 1 / 4 + 1 / 3) / 3)


@pytest.mark.parametrize("fn", [expected_calibration_error, brier_score, aurc])
def test_calibration_functions_validate_their_inputs(fn):
    assert fn([], []) is None
    with pytest.raises(ValueError, match="correctness"):
        fn([0.5, 0.5], [True])
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            fn([bad], [True])


def test_ece_rejects_zero_bins():
    with pytest.raises(ValueError, match="n_bins"):
        expected_calibration_error([0.5], [True], n_bins=0)


# -- properties ----------------------------------------------------------------------------

labels = st.sampled_from(["Benign", "Malicious", "Abstain", "Evil"])
preds = st.lists(
    st.builds(
        Prediction,
        st.none() | labels,
        st.sampled_from(["Benign", "Malicious"]),
        st.none() | st.floats() | st.floats(0, 1),
    ),
    max_size=40,
)


@settings(max_examples=400, deadline=None)
@given(preds, st.integers(1, 20))
def test_rate_metrics_are_none_or_in_unit_interval(rows, n_bins):
    m = classification_metrics(rows, positive_label="Malicious", n_bins=n_bins)
    assert set(m) == KEYS
    for key in RATES:
        assert m[key] is None or (isinstance(m[key], float) and 0.0 <= m[key] <= 1.0), (key, m[key])
    assert m["n_answered"] + m["n_abstained"] == m["n"] == len(rows)
    assert 0 <= m["n_invalid"] <= m["n_answered"]
    assert (m["accuracy"] is None) == (m["n_answered"] == 0)
    assert m["mean_cost"] is None or 0.0 <= m["mean_cost"] <= 5.0


@settings(max_examples=300, deadline=None)
@given(preds)
def test_metrics_agree_with_the_per_answer_rewards(rows):
    costs = CostConfig(positive_label="Malicious")
    m = classification_metrics(rows, positive_label="Malicious", costs=costs)
    answered = [p for p in rows if p.predicted != "Abstain"]
    if answered:
        assert m["accuracy"] == pytest.approx(
            sum(accuracy_reward(p.predicted, p.gold) for p in answered) / len(answered)
        )
    if rows:
        # Cost-weighted accuracy is the mean asymmetric-cost reward over every example.
        assert m["cost_weighted_accuracy"] == pytest.approx(
            sum(asymmetric_cost_reward(p.predicted, p.gold, costs) for p in rows) / len(rows)
        )
        assert m["mean_cost"] == pytest.approx(sum(decision_cost(p.predicted, p.gold, costs) for p in rows) / len(rows))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_calibration_functions_are_bounded_and_order_free(pairs, rnd):
    conf, ok = [c for c, _ in pairs], [o for _, o in pairs]
    shuffled = pairs[:]
    rnd.shuffle(shuffled)
    conf2, ok2 = [c for c, _ in shuffled], [o for _, o in shuffled]
    for fn in (expected_calibration_error, brier_score, aurc):
        value = fn(conf, ok)
        assert 0.0 <= value <= 1.0 and not math.isnan(value)
        assert fn(conf2, ok2) == pytest.approx(value)
    error_rate = ok.count(False) / len(ok)
    # At full coverage the risk is the error rate; AURC is 0 with no errors, 1 with no right answers.
    assert (aurc(conf, ok) == 0.0) == (error_rate == 0.0)
    assert (aurc(conf, ok) == 1.0) == (error_rate == 1.0)
