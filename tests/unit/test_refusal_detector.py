"""The refusal detector is a judge too: its hand labels (real replies of this project), the
split fixed by id, its held-out agreement with CIs, and the line under E6's tables that names
it."""

from __future__ import annotations

import json
import re

import pytest

from sv_dagster.core.evals.judge_validation import refusal_agreement
from sv_dagster.core.reporting.judges import refusal_line
from sv_shared.redteam import (
    REFUSAL_DETECTOR,
    is_refusal,
    read_refusal_labels,
    refusal_split,
)

LABELS = read_refusal_labels()


def test_labels_are_real_replies_split_by_their_id_alone() -> None:
    assert len(LABELS) >= 60 and {label.split for label in LABELS} == {"development", "held_out"}
    assert all(label.split == refusal_split(label.id) for label in LABELS)
    assert len({label.reply for label in LABELS}) == len(LABELS)  # each reply labelled once
    assert {label.source for label in LABELS} >= {"e6 rule defender", "e6 smollm2-135m"}
    held = [label for label in LABELS if label.split == "held_out"]
    assert sum(label.refusal for label in held) >= 5 and sum(not label.refusal for label in held) >= 5


def test_a_label_in_the_wrong_split_or_repeated_is_an_error_naming_the_line(tmp_path) -> None:
    row = {
        "id": "x-1",
        "reply": "I can't help with that.",
        "request": "how?",
        "refusal": True,
        "source": "test",
        "note": "",
    }
    wrong = "development" if refusal_split("x-1") == "held_out" else "held_out"
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({**row, "split": wrong}) + "\n")
    with pytest.raises(ValueError, match=r"labels\.jsonl:1: split .* belongs to"):
        read_refusal_labels(path)
    right = json.dumps({**row, "split": refusal_split("x-1")})
    path.write_text(right + "\n" + right + "\n")
    with pytest.raises(ValueError, match=r"labels\.jsonl:2: duplicate id 'x-1'"):
        read_refusal_labels(path)
    path.write_text('{"id": "x-2"}\n')
    with pytest.raises(ValueError, match=r"labels\.jsonl:1: not a refusal label"):
        read_refusal_labels(path)


def test_held_out_agreement_is_reported_with_cis_apart_from_development() -> None:
    block = refusal_agreement()
    held = block["held_out"]
    assert block["detector"] == REFUSAL_DETECTOR
    assert held["n"] == sum(label.split == "held_out" for label in LABELS)
    expected = [is_refusal(label.reply) for label in LABELS if label.split == "held_out"]
    gold = [label.refusal for label in LABELS if label.split == "held_out"]
    assert held["accuracy"] == pytest.approx(sum(a == b for a, b in zip(expected, gold)) / len(gold))
    for key in ("accuracy", "cohen_kappa", "refusal_recall"):
        low, high = held["ci95"][key]
        assert low <= held[key] <= high
    assert block["development"]["part"].startswith("development")
    line = refusal_line(block)
    assert line.startswith(f"refusals detected by {REFUSAL_DETECTOR}; agreement on held-out hand labels")
    assert f"n={held['n']}" in line and len(re.findall(r"\d\.\d{3} \[\d\.\d\d, \d\.\d\d\]", line)) == 3
    assert f"refusal precision {held['refusal_precision']:.3f}" in line


def test_an_e6_summary_names_the_refusal_detector_and_e5_does_not_need_it() -> None:
    from sv_dagster.core.evals.safety import safety_summary

    class Settings:
        classifier = {"kind": "rules"}

    e6_rows = [{"details": {"turns": [{"refused": True, "outcome": "safe_refusal"}]}}]
    e5_rows = [{"details": {"success": False, "target_verdicts": []}}]
    assert safety_summary(e6_rows, Settings())["refusal_detector"]["detector"] == REFUSAL_DETECTOR
    assert "refusal_detector" not in safety_summary(e5_rows, Settings())
