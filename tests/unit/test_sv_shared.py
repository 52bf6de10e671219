"""sv-shared: the parser never raises, rewards stay in [0, 1], metrics match hand counts."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sv_shared import (
    CostConfig,
    Prediction,
    abstention_reward,
    accuracy_reward,
    asymmetric_cost_reward,
    aurc,
    calibration_reward,
    classification_metrics,
    decision_cost,
    expected_calibration_error,
    extract_json_object,
    format_reward,
    parse_label_answer,
)

LABELS = ("Benign", "Malicious", "Abstain")
INT_LABELS = {0: "Benign", 1: "Malicious"}


def parse(text):
    return parse_label_answer(text, LABELS, int_labels=INT_LABELS)


# -- parser ------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text",
    [
        '{"label": "Malicious", "confidence": 0.8}',
        '```json\n{"label": "Malicious", "confidence": 0.8}\n```',
        '```\n{"label": "Malicious", "confidence": 0.8}\n```',
        'My answer: {"label": "Malicious", "confidence": 0.8} -- that is all.',
        '{"label": "malicious ", "confidence": "0.8"}',
        '{"label": 1, "confidence": 0.8}',
        '{"label": "1", "confidence": "80%"}',
        'Scratch {not json} then {"label": "Malicious", "confidence": 0.8}',
    ],
)
def test_accepted_shapes(text):
    parsed = parse(text)
    assert parsed.format_ok and parsed.label == "Malicious" and parsed.confidence == pytest.approx(0.8)


def test_braces_inside_strings_do_not_break_extraction():
    text = 'note: {"rationale": "saw {weird} } and \\"quotes\\"", "label": "Benign", "confidence": 0.3} end'
    parsed = parse(text)
    assert parsed.label == "Benign" and parsed.rationale == 'saw {weird} } and "quotes"'


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty completion"),
        (None, "empty completion"),
        ("The flow looks malicious.", "no JSON object found"),
        ('{"label": "Evil", "confidence": 0.9}', "unknown label 'Evil'"),
        ('{"label": true, "confidence": 0.9}', "unknown label True"),
        ('{"label": "Benign", "confidence": "high"}', "confidence 'high' is not a number"),
        ('{"label": "Benign", "confidence": NaN}', "confidence is NaN"),
        ('{"label": "Benign", "confidence": 7}', "confidence 7.0 outside [0,1]"),
        ('{"label": "Benign", "confidence": -0.1}', "outside [0,1]"),
        ('{"label": "Benign"}', "missing confidence"),
        ("[1, 2, 3]", "no JSON object found"),
    ],
)
def test_rejected_shapes_say_why(text, problem):
    parsed = parse(text)
    assert not parsed.format_ok
    assert any(problem in p for p in parsed.problems), parsed.problems


def test_label_survives_a_bad_confidence():
    parsed = parse('{"label": "Malicious", "confidence": "high"}')
    assert parsed.label == "Malicious" and parsed.confidence is None and not parsed.format_ok


def test_to_dict_is_json_serialisable():
    assert json.loads(json.dumps(parse('{"label": 1, "confidence": 0.2}').to_dict()))["label"] == "Malicious"


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parser_never_raises_on_any_text(text):
    parsed = parse(text)
    if parsed.format_ok:
        assert parsed.label in LABELS and 0.0 <= parsed.confidence <= 1.0


@settings(max_examples=300, deadline=None)
@given(json_values, st.text(max_size=30), st.text(max_size=30), st.sampled_from(["", "```json\n", "```\n"]))
def test_parser_never_raises_on_json_in_prose(value, before, after, fence):
    obj = {"label": value, "confidence": value} if not isinstance(value, dict) else value
    body = json.dumps(obj)
    text = f"{before}{fence}{body}{chr(10) + '```' if fence else ''}{after}"
    parsed = parse(text)
    assert extract_json_object(text) is None or isinstance(extract_json_object(text), dict)
    if parsed.format_ok:
        assert parsed.label in LABELS and 0.0 <= parsed.confidence <= 1.0


# -- rewards -----------------------------------------------------------------------------

finite_cost = st.floats(min_value=0, max_value=1e6, allow_nan=False)
maybe_label = st.sampled_from([None, "Benign", "Malicious", "Abstain", "Other"])
maybe_conf = st.none() | st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=300, deadline=None)
@given(maybe_label, st.sampled_from(["Benign", "Malicious"]), maybe_conf, finite_cost, finite_cost, finite_cost, st.floats(0, 1))
def test_every_reward_stays_in_unit_interval(pred, gold, conf, fn, fp, ab, credit):
    costs = CostConfig(positive_label="Malicious", fn_cost=fn, fp_cost=fp, abstain_cost=ab)
    for value in (
        accuracy_reward(pred, gold),
        calibration_reward(pred, conf, gold),
        asymmetric_cost_reward(pred, gold, costs),
        abstention_reward(pred, gold, abstain_credit=credit),
        format_reward(parse(json.dumps({"label": pred, "confidence": conf}))),
    ):
        assert 0.0 <= value <= 1.0 and not math.isnan(value)


def test_calibration_rewards_confident_right_answers_most():
    assert calibration_reward("Malicious", 0.9, "Malicious") == pytest.approx(0.99)
    assert calibration_reward("Benign", 0.9, "Malicious") == pytest.approx(0.19)
    assert calibration_reward("Abstain", 0.9, "Malicious") == 0.0


def test_costs_are_asymmetric_and_abstention_earns_partial_credit():
    costs = CostConfig(positive_label="Malicious", fn_cost=5, fp_cost=1, abstain_cost=0.5)
    assert decision_cost("Benign", "Malicious", costs) == 5
    assert decision_cost("Malicious", "Benign", costs) == 1
    assert decision_cost("Abstain", "Benign", costs) == 0.5
    assert decision_cost(None, "Benign", costs) == 5  # unparseable: the worst decision cost
    missed = asymmetric_cost_reward("Benign", "Malicious", costs)
    alarm = asymmetric_cost_reward("Malicious", "Benign", costs)
    assert missed == 0.0 and alarm == pytest.approx(0.8) and missed < alarm
    assert abstention_reward("Abstain", "Malicious", abstain_credit=0.4) == 0.4
    assert abstention_reward("Benign", "Malicious") == 0.0 and abstention_reward("Malicious", "Malicious") == 1.0


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "5"])
def test_cost_config_rejects_bad_costs(bad):
    with pytest.raises(ValueError, match="fn_cost"):
        CostConfig(positive_label="Malicious", fn_cost=bad)


def test_abstain_credit_is_validated():
    with pytest.raises(ValueError, match="abstain_credit"):
        abstention_reward("Abstain", "Benign", abstain_credit=1.5)


# -- metrics -----------------------------------------------------------------------------

def test_metrics_by_hand():
    preds = [
        Prediction("Malicious", "Malicious", 0.9),  # TP
        Prediction("Malicious", "Benign", 0.8),  # FP
        Prediction("Benign", "Malicious", 0.6),  # FN
        Prediction("Benign", "Benign", 0.7),  # TN
        Prediction("Abstain", "Malicious", 0.5),  # abstained: out of accuracy, in abstain_rate
        Prediction(None, "Benign", None),  # invalid: wrong for accuracy, out of P/R
    ]
    m = classification_metrics(preds, positive_label="Malicious")
    assert (m["n"], m["n_answered"], m["n_abstained"], m["n_invalid"]) == (6, 5, 1, 1)
    assert m["accuracy"] == pytest.approx(2 / 5)
    assert m["precision"] == pytest.approx(1 / 2) and m["recall"] == pytest.approx(1 / 2)
    assert m["f1"] == pytest.approx(1 / 2)
    assert m["fnr"] == pytest.approx(1 / 2) and m["fpr"] == pytest.approx(1 / 2)
    assert m["abstain_rate"] == pytest.approx(1 / 6) and m["invalid_rate"] == pytest.approx(1 / 6)
    # Brier over the 4 answered with confidence: (0.1^2 + 0.8^2 + 0.6^2 + 0.3^2) / 4
    assert m["brier"] == pytest.approx((0.01 + 0.64 + 0.36 + 0.09) / 4)
    # ECE: bins 9 (0.9 ok), 8 (0.8 wrong), 6 (0.6 wrong), 7 (0.7 ok): (0.1 + 0.8 + 0.6 + 0.3) / 4
    assert m["ece"] == pytest.approx(1.8 / 4)
    # AURC: ranked 0.9 ok, 0.8 x, 0.7 ok, 0.6 x -> risks 0, 1/2, 1/3, 1/2
    assert m["aurc"] == pytest.approx((0 + 1 / 2 + 1 / 3 + 1 / 2) / 4)
    # costs (fn 5, fp 1, abstain 0.5, invalid 5): 0 + 1 + 5 + 0 + 0.5 + 5 = 11.5 of 6 * 5
    assert m["mean_cost"] == pytest.approx(11.5 / 6)
    assert m["cost_weighted_accuracy"] == pytest.approx(1 - 11.5 / 30)


def test_empty_and_degenerate_inputs_give_none_not_errors():
    m = classification_metrics([], positive_label="Malicious")
    assert m["n"] == 0 and all(m[k] is None for k in ("accuracy", "f1", "ece", "brier", "aurc", "cost_weighted_accuracy"))
    only_abstain = classification_metrics([Prediction("Abstain", "Benign", 0.5)], positive_label="Malicious")
    assert only_abstain["accuracy"] is None and only_abstain["abstain_rate"] == 1.0


def test_perfect_calibration_has_zero_ece():
    confidences = [0.75] * 4
    assert expected_calibration_error(confidences, [True, True, True, False]) == pytest.approx(0.0)


def test_aurc_prefers_confidence_on_right_answers():
    confidences = [0.9, 0.8, 0.2, 0.1]
    assert aurc(confidences, [True, True, False, False]) < aurc(confidences, [False, False, True, True])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(maybe_label, st.sampled_from(["Benign", "Malicious"]), st.none() | st.floats(0, 1)), max_size=30))
def test_rate_metrics_are_none_or_in_unit_interval(rows):
    m = classification_metrics([Prediction(*row) for row in rows], positive_label="Malicious")
    for key in ("accuracy", "precision", "recall", "f1", "fnr", "fpr", "ece", "brier", "aurc", "abstain_rate", "invalid_rate", "cost_weighted_accuracy"):
        assert m[key] is None or 0.0 <= m[key] <= 1.0, (key, m[key])
