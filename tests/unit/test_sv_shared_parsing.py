"""sv_shared.parsing: every reply shape we accept, every rejection with its reason, and a
parser that never raises."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sv_shared import ParsedAnswer, extract_json_object, parse_label_answer

LABELS = ("Benign", "Malicious", "Abstain")
INT_LABELS = {0: "Benign", 1: "Malicious"}


def parse(text, **kwargs) -> ParsedAnswer:
    return parse_label_answer(text, LABELS, int_labels=INT_LABELS, **kwargs)


# -- extract_json_object -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ('  \n{"a": 1}\n ', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```JSON\n{"a": 1}```', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('Here you go:\n```json\n{"a": 1}\n```\nHope that helps.', {"a": 1}),
        ('I think {"a": 1} is right. {"b": 2}', {"a": 1}),
        ('{"a": 1', None),
        ("[1, 2, 3]", None),
        ("42", None),
        ('"just a string"', None),
        ("no braces at all", None),
        ("", None),
        (None, None),
    ],
)
def test_extract_json_object(text, expected):
    assert extract_json_object(text) == expected


def test_extract_prefers_a_fenced_block_over_an_earlier_object_in_prose():
    text = 'Schema: {"label": "<one of ...>"}\n```json\n{"label": "Benign"}\n```'
    assert extract_json_object(text) == {"label": "Benign"}


def test_extract_skips_an_invalid_first_object():
    text = '{"label": "Malicious", "confidence": } oops, I mean {"label": "Benign", "confidence": 0.2}'
    assert extract_json_object(text) == {"label": "Benign", "confidence": 0.2}


def test_extract_skips_a_list_and_finds_the_object_after_it():
    assert extract_json_object('[1, 2] and then {"a": [3]}') == {"a": [3]}


def test_extract_handles_braces_and_escaped_quotes_inside_strings():
    text = 'x {"note": "a } and a { and \\"quoted }\\"", "n": 1} y'
    assert extract_json_object(text) == {"note": 'a } and a { and "quoted }"', "n": 1}


def test_extract_does_not_raise_on_nesting_deeper_than_the_recursion_limit():
    deep = "[" * 100_000 + "]" * 100_000
    assert extract_json_object(deep) is None
    assert extract_json_object(deep + ' {"a": 1}') == {"a": 1}


# -- parse_label_answer: accepted shapes ----------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"label": "Malicious", "confidence": 0.8}',  # raw JSON
        '```json\n{"label": "Malicious", "confidence": 0.8}\n```',  # fenced, with language
        '```\n{"label": "Malicious", "confidence": 0.8}\n```',  # fenced, no language
        'My answer: {"label": "Malicious", "confidence": 0.8} -- that is all.',  # prose both sides
        '{"label": "  malicious ", "confidence": "0.8"}',  # case, whitespace, numeric string
        '{"label": 1, "confidence": 0.8}',  # int label
        '{"label": "1", "confidence": "80%"}',  # digit-string label, percent confidence
        '{"label": " 1 ", "confidence": "80 %"}',
        'Scratch {not json} then {"label": "Malicious", "confidence": 0.8}',
        '{"label": "Malicious", "confidence": } no wait: {"label": "Malicious", "confidence": 0.8}',
        '{"Label": "MALICIOUS", "Confidence": 0.8}',  # key case is not held against the model
    ],
)
def test_accepted_shapes(text):
    parsed = parse(text)
    assert parsed.format_ok, parsed.problems
    assert parsed.label == "Malicious"
    assert parsed.confidence == pytest.approx(0.8)
    assert parsed.problems == ()
    assert isinstance(parsed.raw, dict)


def test_braces_inside_strings_do_not_break_extraction():
    parsed = parse('note: {"rationale": "saw {weird} }", "label": "Benign", "confidence": 0.3} end')
    assert parsed.format_ok
    assert (parsed.label, parsed.confidence, parsed.rationale) == ("Benign", 0.3, "saw {weird} }")


def test_escaped_quotes_inside_strings():
    parsed = parse('{"rationale": "he said \\"{\\" once", "label": "Benign", "confidence": 0.3}')
    assert parsed.format_ok and parsed.rationale == 'he said "{" once'


def test_the_object_carrying_the_label_wins_over_an_earlier_scratch_object():
    parsed = parse('The flow {"src": "10.0.0.1", "port": 23} looks bad. {"label": "Malicious", "confidence": 0.9}')
    assert parsed.format_ok and parsed.label == "Malicious" and parsed.raw == {"label": "Malicious", "confidence": 0.9}


def test_an_answer_nested_in_a_wrapper_object_is_found():
    parsed = parse('{"answer": {"label": "Benign", "confidence": 0.1}}')
    assert parsed.format_ok and parsed.label == "Benign" and parsed.confidence == 0.1


def test_first_labelled_object_is_used_when_there_are_several():
    parsed = parse('{"label": "Benign", "confidence": 0.6} or maybe {"label": "Malicious", "confidence": 0.4}')
    assert parsed.label == "Benign" and parsed.confidence == 0.6


@pytest.mark.parametrize(
    "value, expected",
    [(0, "Benign"), (1, "Malicious"), ("0", "Benign"), ("1", "Malicious"), ("+1", "Malicious")],
)
def test_int_labels_are_coerced(value, expected):
    parsed = parse(json.dumps({"label": value, "confidence": 0.5}))
    assert parsed.format_ok and parsed.label == expected


@pytest.mark.parametrize("value", [True, False, 2, -1, 1.0, "2", "1.0", "one"])
def test_other_numbers_and_booleans_are_not_labels(value):
    parsed = parse(json.dumps({"label": value, "confidence": 0.5}))
    assert not parsed.format_ok and parsed.label is None
    assert any(p.startswith("unknown label") for p in parsed.problems)


def test_bool_true_is_not_coerced_to_one():
    parsed = parse('{"label": true, "confidence": 0.9}')
    assert parsed.label is None and "unknown label True" in parsed.problems


def test_ints_are_unknown_labels_without_int_labels():
    parsed = parse_label_answer('{"label": 1, "confidence": 0.5}', LABELS)
    assert parsed.label is None and parsed.problems == ("unknown label 1",)


def test_aliases_map_to_the_canonical_spelling():
    parsed = parse('{"label": "MALWARE", "confidence": 0.7}', aliases={"malware": "Malicious", " ok ": "benign"})
    assert parsed.format_ok and parsed.label == "Malicious"
    assert parse('{"label": "ok", "confidence": 0.7}', aliases={" ok ": "benign"}).label == "Benign"
    # An alias pointing at a label that is not allowed gives nothing.
    assert parse('{"label": "evil", "confidence": 0.7}', aliases={"evil": "Evil"}).label is None


def test_custom_label_field():
    parsed = parse('{"verdict": "benign", "confidence": 0.2}', label_field="verdict")
    assert parsed.format_ok and parsed.label == "Benign"
    assert parse('{"verdict": "benign", "confidence": 0.2}').problems == ("missing label",)


@pytest.mark.parametrize("key", ["rationale", "reason", "explanation"])
def test_rationale_keys(key):
    assert parse(json.dumps({"label": "Benign", "confidence": 0.5, key: "why"})).rationale == "why"


def test_non_string_rationale_is_dropped_without_failing_the_format():
    parsed = parse('{"label": "Benign", "confidence": 0.5, "rationale": ["a", "b"]}')
    assert parsed.format_ok and parsed.rationale is None


@pytest.mark.parametrize(
    "value, expected", [(0, 0.0), (1, 1.0), ("1", 1.0), ("0%", 0.0), ("100%", 1.0), (" 0.25 ", 0.25)]
)
def test_confidence_edges(value, expected):
    parsed = parse(json.dumps({"label": "Benign", "confidence": value}))
    assert parsed.format_ok and parsed.confidence == expected and isinstance(parsed.confidence, float)


# -- parse_label_answer: rejected shapes ----------------------------------------------------


@pytest.mark.parametrize(
    "text, problem",
    [
        ("", "empty completion"),
        ("   \n\t", "empty completion"),
        (None, "empty completion"),
        ("The flow looks malicious.", "no JSON object found"),
        ("[1, 2, 3]", "no JSON object found"),
        ('{"label": "Malicious", "confidence": 0.9', "no JSON object found"),
        ('{"label": "Evil", "confidence": 0.9}', "unknown label 'Evil'"),
        ('{"label": ["Benign"], "confidence": 0.9}', "unknown label ['Benign']"),
        ('{"label": null, "confidence": 0.9}', "missing label"),
        ('{"confidence": 0.9}', "missing label"),
        ('{"label": "Benign"}', "missing confidence"),
        ('{"label": "Benign", "confidence": "high"}', "confidence 'high' is not a number"),
        ('{"label": "Benign", "confidence": true}', "confidence True is not a number"),
        ('{"label": "Benign", "confidence": [0.5]}', "confidence [0.5] is not a number"),
        ('{"label": "Benign", "confidence": NaN}', "confidence is NaN"),
        ('{"label": "Benign", "confidence": "nan"}', "confidence is NaN"),
        ('{"label": "Benign", "confidence": Infinity}', "confidence is infinite"),
        ('{"label": "Benign", "confidence": 1e999}', "confidence is infinite"),
        ('{"label": "Benign", "confidence": 7}', "confidence 7.0 outside [0,1]"),
        ('{"label": "Benign", "confidence": -0.1}', "confidence -0.1 outside [0,1]"),
        ('{"label": "Benign", "confidence": "80"}', "confidence 80.0 outside [0,1]"),
        ('{"label": "Benign", "confidence": "180%"}', "confidence 1.8 outside [0,1]"),
        ('{"label": "Benign", "confidence": ' + "9" * 400 + "}", "outside [0,1]"),
    ],
)
def test_rejected_shapes_say_why(text, problem):
    parsed = parse(text)
    assert not parsed.format_ok
    assert any(problem in p for p in parsed.problems), parsed.problems


def test_label_survives_a_bad_confidence_and_vice_versa():
    bad_conf = parse('{"label": "Malicious", "confidence": "high"}')
    assert bad_conf.label == "Malicious" and bad_conf.confidence is None and not bad_conf.format_ok
    bad_label = parse('{"label": "Evil", "confidence": 0.4}')
    assert bad_label.label is None and bad_label.confidence == 0.4 and not bad_label.format_ok


def test_both_problems_are_reported():
    assert parse('{"label": "Evil", "confidence": 7}').problems == (
        "unknown label 'Evil'",
        "confidence 7.0 outside [0,1]",
    )


def test_no_object_leaves_every_field_empty():
    parsed = parse("I refuse to answer in JSON.")
    assert parsed == ParsedAnswer(None, None, None, None, False, ("no JSON object found",))


def test_bytes_are_decoded_and_other_types_rejected():
    assert parse(b'{"label": "Benign", "confidence": 0.5}').label == "Benign"
    assert parse(b"\xff\xfe garbage").problems == ("no JSON object found",)
    assert parse(12345).problems == ("completion is not text (int)",)


def test_problem_messages_stay_short_for_huge_values():
    parsed = parse(json.dumps({"label": "x" * 100_000, "confidence": 0.5}))
    assert parsed.problems[0].startswith("unknown label 'xxx") and len(parsed.problems[0]) < 120


def test_junk_before_the_answer_does_not_hide_it():
    junk = (
        "def f(x): return {x: 1}\n" * 500  # code with braces
        + '{"a": [1, 2, ' * 200  # never-closed objects
        + '{"unterminated": "string } { ' * 100
        + "{" * 10_000
    )
    parsed = parse(junk + '\n{"label": "Benign", "confidence": 0.5}')
    assert parsed.format_ok and parsed.label == "Benign"


@pytest.mark.parametrize(
    "junk",
    [
        '{"a": [' * 100_000,  # nesting far deeper than the recursion limit, never closed
        ('{"a": [' + "1," * 1000) * 500,  # the same with long levels
        '{"k":"{","k":"{",' * 50_000,  # an unclosed object full of brace-strings
        "{" * 500_000,
        "```json\n" * 50_000,
    ],
)
def test_adversarial_inputs_finish_without_raising(junk):
    # No assertion on the answer: past a work budget (linear in the length) the search
    # gives up. What matters is that it returns, promptly, with a well-formed result.
    check_invariants(parse(junk + '{"label": "Benign", "confidence": 0.5}'))
    check_invariants(parse(junk))


# -- to_dict ---------------------------------------------------------------------------------


def test_to_dict_is_strict_json():
    parsed = parse('{"label": 1, "confidence": NaN, "extra": [Infinity, -Infinity]}')
    data = json.loads(json.dumps(parsed.to_dict(), allow_nan=False))
    assert data["label"] == "Malicious" and data["confidence"] is None and data["format_ok"] is False
    assert data["raw"] == {"label": 1, "confidence": "NaN", "extra": ["Infinity", "-Infinity"]}
    assert data["problems"] == ["confidence is NaN"]
    assert set(data) == {"label", "confidence", "rationale", "raw", "format_ok", "problems"}


# -- properties ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.floats()
    | st.integers()
    | st.text(max_size=20)
    | st.sampled_from(LABELS + ("0", "1", "80%")),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.sampled_from(["label", "confidence"]), children, max_size=4)
    ),
    max_leaves=12,
)


def check_invariants(parsed: ParsedAnswer) -> None:
    assert isinstance(parsed, ParsedAnswer)
    assert parsed.format_ok == (not parsed.problems)
    if parsed.format_ok:
        assert parsed.label in LABELS
        assert parsed.confidence is not None and 0.0 <= parsed.confidence <= 1.0
        assert isinstance(parsed.raw, dict)
    if parsed.confidence is not None:
        assert math.isfinite(parsed.confidence) and 0.0 <= parsed.confidence <= 1.0
    assert parsed.label is None or parsed.label in LABELS
    json.dumps(parsed.to_dict(), allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parser_never_raises_on_any_text(text):
    check_invariants(parse(text))
    found = extract_json_object(text)
    assert found is None or isinstance(found, dict)


@settings(max_examples=300, deadline=None)
@given(json_values, st.text(max_size=30), st.text(max_size=30), st.sampled_from(["", "```json\n", "```\n"]))
def test_parser_never_raises_on_json_in_prose(value, before, after, fence):
    body = json.dumps({"label": value, "confidence": value} if not isinstance(value, dict) else value)
    text = f"{before}{fence}{body}{chr(10) + '```' if fence else ''}{after}"
    check_invariants(parse(text))
    found = extract_json_object(text)
    assert found is None or isinstance(found, dict)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_parser_never_raises_on_bytes(data):
    check_invariants(parse(data))


prose = st.text(alphabet=st.characters(blacklist_characters="{`"), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(LABELS), st.floats(0.0, 1.0), prose, prose, st.sampled_from(["", "```json\n", "```\n"]))
def test_a_well_formed_answer_always_round_trips(label, confidence, before, after, fence):
    body = json.dumps({"label": label, "confidence": confidence, "rationale": before})
    text = f"{before}{fence}{body}{chr(10) + '```' if fence else ''}{after}"
    parsed = parse(text)
    assert parsed.format_ok, parsed.problems
    assert (parsed.label, parsed.confidence, parsed.rationale) == (label, confidence, before)
