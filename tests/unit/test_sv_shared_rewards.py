"""sv_shared.rewards: every reward stays in [0, 1]; costs are asymmetric; configs are
validated."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sv_shared import (
    CostConfig,
    ParsedAnswer,
    abstention_reward,
    accuracy_reward,
    asymmetric_cost_reward,
    calibration_reward,
    decision_cost,
    format_reward,
    parse_label_answer,
)

LABELS = ("Benign", "Malicious", "Abstain")
DEFAULT = CostConfig(positive_label="Malicious")  # fn 5, fp 1, abstain 0.5, invalid 5


def answer(ok: bool) -> ParsedAnswer:
    return ParsedAnswer("Benign", 0.5, None, {}, ok, () if ok else ("x",))


# -- format / accuracy ------------------------------------------------------------------------


def test_format_reward():
    assert format_reward(answer(True)) == 1.0
    assert format_reward(answer(False)) == 0.0
    assert format_reward(parse_label_answer('{"label": "Benign", "confidence": 0.2}', LABELS)) == 1.0
    assert format_reward(parse_label_answer('{"label": "Benign", "confidence": "high"}', LABELS)) == 0.0


@pytest.mark.parametrize(
    "predicted, gold, expected",
    [
        ("Malicious", "Malicious", 1.0),
        ("Benign", "Malicious", 0.0),
        ("Abstain", "Malicious", 0.0),
        (None, "Malicious", 0.0),
        ("malicious", "Malicious", 0.0),  # exact match: the parser canonicalises case
    ],
)
def test_accuracy_reward(predicted, gold, expected):
    assert accuracy_reward(predicted, gold) == expected


# -- calibration -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "predicted, confidence, expected",
    [
        ("Malicious", 0.9, 1 - 0.1**2),  # right and confident: 0.99
        ("Benign", 0.9, 1 - 0.9**2),  # wrong and confident: 0.19
        ("Benign", 0.1, 1 - 0.1**2),  # wrong but unsure: 0.99
        ("Malicious", 1.0, 1.0),
        ("Benign", 1.0, 0.0),
        ("Malicious", 0.5, 0.75),
        ("Malicious", 0, 0.0),  # an int confidence is fine
        ("Abstain", 0.9, 0.0),  # nothing to calibrate
        (None, 0.9, 0.0),
        ("Malicious", None, 0.0),
        ("Malicious", float("nan"), 0.0),
        ("Malicious", float("inf"), 0.0),
        ("Malicious", 1.5, 0.0),  # out of range is "no usable confidence", not clipped
        ("Malicious", -0.2, 0.0),
    ],
)
def test_calibration_reward(predicted, confidence, expected):
    assert calibration_reward(predicted, confidence, "Malicious") == pytest.approx(expected)


def test_calibration_reward_respects_a_custom_abstain_label():
    assert calibration_reward("Unsure", 0.9, "Malicious", abstain_label="Unsure") == 0.0
    assert calibration_reward("Abstain", 0.9, "Malicious", abstain_label="Unsure") == pytest.approx(0.19)


# -- costs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "predicted, gold, expected",
    [
        ("Malicious", "Malicious", 0.0),
        ("Benign", "Benign", 0.0),
        ("Benign", "Malicious", 5.0),  # missed attack: fn_cost
        ("Malicious", "Benign", 1.0),  # false alarm: fp_cost
        ("Abstain", "Malicious", 0.5),
        ("Abstain", "Benign", 0.5),
        (None, "Benign", 5.0),  # unparseable: invalid_cost defaults to max(fn, fp)
        (None, "Malicious", 5.0),
        ("Evil", "Benign", 5.0),  # unknown label on a negative: invalid
        ("Evil", "Malicious", 5.0),  # on a positive it is a miss: fn_cost
    ],
)
def test_decision_cost_default_table(predicted, gold, expected):
    assert decision_cost(predicted, gold, DEFAULT) == expected


def test_decision_cost_with_explicit_invalid_cost():
    costs = CostConfig(positive_label="Malicious", fn_cost=4, fp_cost=2, abstain_cost=1, invalid_cost=3)
    assert [decision_cost(p, "Benign", costs) for p in ("Benign", "Malicious", "Abstain", None, "Evil")] == [
        0,
        2,
        1,
        3,
        3,
    ]
    assert [decision_cost(p, "Malicious", costs) for p in ("Malicious", "Benign", "Abstain", None, "Evil")] == [
        0,
        4,
        1,
        3,
        4,
    ]
    assert costs.max_cost == 4 and costs.resolved_invalid_cost == 3
    assert DEFAULT.resolved_invalid_cost == 5 and DEFAULT.max_cost == 5


def test_missing_an_attack_is_rewarded_less_than_a_false_alarm():
    missed = asymmetric_cost_reward("Benign", "Malicious", DEFAULT)
    alarm = asymmetric_cost_reward("Malicious", "Benign", DEFAULT)
    abstain = asymmetric_cost_reward("Abstain", "Malicious", DEFAULT)
    assert missed == 0.0  # 1 - 5/5
    assert alarm == pytest.approx(0.8)  # 1 - 1/5
    assert abstain == pytest.approx(0.9)  # 1 - 0.5/5
    assert missed < alarm < abstain < asymmetric_cost_reward("Malicious", "Malicious", DEFAULT) == 1.0
    assert asymmetric_cost_reward(None, "Benign", DEFAULT) == 0.0


def test_asymmetric_cost_reward_divides_by_the_largest_cost_whichever_it_is():
    costs = CostConfig(positive_label="Malicious", fn_cost=2, fp_cost=1, abstain_cost=0.5, invalid_cost=10)
    assert asymmetric_cost_reward("Benign", "Malicious", costs) == pytest.approx(0.8)  # 1 - 2/10
    assert asymmetric_cost_reward(None, "Malicious", costs) == 0.0


def test_all_zero_costs_give_full_reward():
    free = CostConfig(positive_label="Malicious", fn_cost=0, fp_cost=0, abstain_cost=0)
    assert free.max_cost == 0
    assert all(asymmetric_cost_reward(p, "Benign", free) == 1.0 for p in ("Benign", "Malicious", "Abstain", None))


@pytest.mark.parametrize("field", ["fn_cost", "fp_cost", "abstain_cost", "invalid_cost"])
@pytest.mark.parametrize("bad", [-1.0, -1e-9, float("nan"), float("inf"), "5", True, None])
def test_cost_config_rejects_bad_costs(field, bad):
    if field == "invalid_cost" and bad is None:
        CostConfig(positive_label="Malicious", invalid_cost=None)  # None means "use the default"
        return
    with pytest.raises(ValueError, match=field):
        CostConfig(positive_label="Malicious", **{field: bad})


def test_cost_config_rejects_bad_labels():
    with pytest.raises(ValueError, match="positive_label"):
        CostConfig(positive_label="")
    with pytest.raises(ValueError, match="differ"):
        CostConfig(positive_label="Abstain")


def test_cost_config_is_frozen():
    with pytest.raises(AttributeError):
        DEFAULT.fn_cost = 0  # type: ignore[misc]


# -- abstention ------------------------------------------------------------------------------


def test_abstention_reward():
    assert abstention_reward("Malicious", "Malicious") == 1.0
    assert abstention_reward("Abstain", "Malicious") == 0.5  # default partial credit
    assert abstention_reward("Abstain", "Benign", abstain_credit=0.4) == 0.4
    assert abstention_reward("Abstain", "Benign", abstain_credit=0) == 0.0
    assert abstention_reward("Benign", "Malicious") == 0.0
    assert abstention_reward(None, "Malicious") == 0.0
    assert abstention_reward("Pass", "Benign", abstain_label="Pass", abstain_credit=0.3) == 0.3
    assert abstention_reward("Abstain", "Benign", abstain_label="Pass") == 0.0


@pytest.mark.parametrize("bad", [1.5, -0.1, float("nan"), float("inf"), "0.5", None])
def test_abstain_credit_is_validated(bad):
    with pytest.raises(ValueError, match="abstain_credit"):
        abstention_reward("Abstain", "Benign", abstain_credit=bad)


# -- properties -------------------------------------------------------------------------------

labels = st.sampled_from(["Benign", "Malicious", "Abstain", "Evil"]) | st.text(max_size=8)
maybe_label = st.none() | labels
any_conf = st.none() | st.floats() | st.integers(-5, 5)
finite_cost = st.floats(min_value=0, max_value=1e9, allow_nan=False) | st.integers(0, 100)


@st.composite
def cost_configs(draw) -> CostConfig:
    return CostConfig(
        positive_label="Malicious",
        fn_cost=draw(finite_cost),
        fp_cost=draw(finite_cost),
        abstain_cost=draw(finite_cost),
        invalid_cost=draw(st.none() | finite_cost),
    )


def in_unit_interval(value: float) -> bool:
    return isinstance(value, float) and not math.isnan(value) and 0.0 <= value <= 1.0


@settings(max_examples=500, deadline=None)
@given(maybe_label, labels, any_conf, cost_configs(), st.floats(0, 1))
def test_every_reward_stays_in_unit_interval(pred, gold, conf, costs, credit):
    for value in (
        accuracy_reward(pred, gold),
        calibration_reward(pred, conf, gold),
        asymmetric_cost_reward(pred, gold, costs),
        abstention_reward(pred, gold, abstain_credit=credit),
    ):
        assert in_unit_interval(value), value
    assert 0.0 <= decision_cost(pred, gold, costs) <= costs.max_cost


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_format_reward_is_zero_or_one(text):
    assert format_reward(parse_label_answer(text, LABELS)) in (0.0, 1.0)


@settings(max_examples=300, deadline=None)
@given(cost_configs(), st.sampled_from(["Benign", "Malicious"]))
def test_the_right_answer_is_never_worse_than_any_other(costs, gold):
    best = asymmetric_cost_reward(gold, gold, costs)
    assert best == 1.0
    assert all(asymmetric_cost_reward(p, gold, costs) <= best for p in ("Benign", "Malicious", "Abstain", None))


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 1e6), st.floats(0, 1e6))
def test_the_costlier_mistake_earns_the_lower_reward(fn, fp):
    assume(abs(fn - fp) > 1e-9 * max(fn, fp, 0.5))  # a difference float division can still see
    costs = CostConfig(positive_label="Malicious", fn_cost=fn, fp_cost=fp)
    missed = asymmetric_cost_reward("Benign", "Malicious", costs)
    alarm = asymmetric_cost_reward("Malicious", "Benign", costs)
    assert (missed < alarm) == (fn > fp)


@settings(max_examples=300, deadline=None)
@given(st.floats(0, 1))
def test_calibration_rewards_honest_confidence(confidence):
    # For a right answer more confidence is better; for a wrong one, less.
    right = calibration_reward("Benign", confidence, "Benign")
    wrong = calibration_reward("Malicious", confidence, "Benign")
    assert right == pytest.approx(1 - (1 - confidence) ** 2)
    assert wrong == pytest.approx(1 - confidence**2)
    assert calibration_reward("Benign", min(1.0, confidence + 0.1), "Benign") >= right
    assert calibration_reward("Malicious", min(1.0, confidence + 0.1), "Benign") <= wrong
