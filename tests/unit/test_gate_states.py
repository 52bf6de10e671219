"""The regression gate's three states on eval folders written here: PASS and FAIL only
when a baseline of the same split shares scored examples with the candidate."""

from __future__ import annotations

import json
from pathlib import Path

from sv_dagster.core.evals.gate import FAIL, NO_BASELINE, PASS, record_baseline, regression_gate


def eval_folder(path: Path, run_id: str, split: str, answers: dict[str, str]) -> Path:
    """An E1-shaped eval folder: each example's parsed label against the answer 'Malicious'."""
    path.mkdir(parents=True)
    metadata = {"run_id": run_id, "env": "sv-env-network-logs", "model": {"name": "m"}, "dataset": {"split": split}}
    (path / "metadata.json").write_text(json.dumps(metadata))
    rows = [
        {
            "example_id": key,
            "answer": "Malicious",
            "parsed": {"label": label},
            "reward": float(label == "Malicious"),
            "error": None,
        }
        for key, label in answers.items()
    ]
    (path / "results.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (path / "summary.json").write_text("{}")
    return path


def test_no_baseline_same_split_and_shared_examples(tmp_path: Path):
    outputs = tmp_path / "outputs"
    right = {f"x{i}": "Malicious" for i in range(40)}
    base = eval_folder(tmp_path / "base", "run-base", "test", right)
    candidate = eval_folder(tmp_path / "same", "run-same", "test", right)

    missing = regression_gate(candidate, outputs)
    assert missing.state == NO_BASELINE and not missing.failed and "no baseline recorded" in missing.note

    record_baseline(base, outputs)
    same = regression_gate(candidate, outputs)
    assert same.state == PASS and same.baseline_run_id == "run-base" and len(same.comparisons) == 2

    worse = regression_gate(
        eval_folder(tmp_path / "worse", "run-worse", "test", dict.fromkeys(right, "Benign")), outputs
    )
    assert worse.state == FAIL and worse.failed and worse.failures[0].startswith("accuracy fell 1.0000 -> 0.0000")

    # A regression on another split, or on examples the baseline never saw, is not compared.
    other_split = regression_gate(
        eval_folder(tmp_path / "dev", "run-dev", "dev", dict.fromkeys(right, "Benign")), outputs
    )
    assert other_split.state == NO_BASELINE and "split 'test', this eval of 'dev'" in other_split.note
    disjoint = {f"y{i}": "Benign" for i in range(40)}
    unshared = regression_gate(eval_folder(tmp_path / "new", "run-new", "test", disjoint), outputs)
    assert unshared.state == NO_BASELINE and "no scored example shared" in unshared.note
    assert unshared.metadata()["state"] == NO_BASELINE


def test_the_weekly_report_lists_evals_without_a_baseline_apart_from_passes():
    from sv_dagster.core.reporting.reports import weekly_markdown

    gates = {
        ("e1", "heuristic"): {"state": PASS, "failures": []},
        ("e4", "heuristic"): {"state": NO_BASELINE, "failures": []},
        ("e2", "oracle"): {"state": NO_BASELINE, "failures": []},
    }
    text = weekly_markdown("2026-W48", [], {}, gates, Path("."))
    assert "- none among the 1 eval(s) compared with a recorded baseline" in text
    assert "- NO BASELINE (nothing compared): e2 / oracle, e4 / heuristic" in text
